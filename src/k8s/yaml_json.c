/* YAML to jansson through libyaml's document loader. */
#include "yaml_json.h"

#include <stdio.h>
#include <yaml.h>

struct convert {
    yaml_document_t *doc;
    unsigned nodes; /* converted so far, aliases counted each time they are followed */
    char *err;
    size_t errlen;
};

static json_t *node_json(struct convert *c, yaml_node_t *n, int depth)
{
    if (!n)
        return json_string("");
    if (depth > YAML_JSON_MAX_DEPTH) {
        snprintf(c->err, c->errlen, "line %lu: nested deeper than %d levels", (unsigned long)n->start_mark.line + 1,
                 YAML_JSON_MAX_DEPTH);
        return NULL;
    }
    if (++c->nodes > YAML_JSON_MAX_NODES) {
        snprintf(c->err, c->errlen, "more than %d values (aliases counted each time they are used)",
                 YAML_JSON_MAX_NODES);
        return NULL;
    }
    switch (n->type) {
    case YAML_SCALAR_NODE: {
        json_t *s = json_stringn((const char *)n->data.scalar.value, n->data.scalar.length);
        if (!s)
            snprintf(c->err, c->errlen, "line %lu: a value that is not UTF-8 text",
                     (unsigned long)n->start_mark.line + 1);
        return s;
    }
    case YAML_SEQUENCE_NODE: {
        json_t *a = json_array();
        for (yaml_node_item_t *i = n->data.sequence.items.start; a && i < n->data.sequence.items.top; i++) {
            json_t *v = node_json(c, yaml_document_get_node(c->doc, *i), depth + 1);
            if (!v || json_array_append_new(a, v) != 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    case YAML_MAPPING_NODE: {
        json_t *o = json_object();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; o && p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
            if (!k || k->type != YAML_SCALAR_NODE) {
                snprintf(c->err, c->errlen, "line %lu: a key that is not a plain value",
                         (unsigned long)(k ? k->start_mark.line : n->start_mark.line) + 1);
                json_decref(o);
                return NULL;
            }
            json_t *key = node_json(c, k, depth + 1);
            json_t *v = key ? node_json(c, yaml_document_get_node(c->doc, p->value), depth + 1) : NULL;
            int bad = !v || json_object_set_new(o, json_string_value(key), v) != 0;
            json_decref(key);
            if (bad) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    default: return json_string("");
    }
}

json_t *yaml_to_json(const char *text, size_t len, char *err, size_t errlen)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        snprintf(err, errlen, "line %lu column %lu: %s", (unsigned long)parser.problem_mark.line + 1,
                 (unsigned long)parser.problem_mark.column + 1, parser.problem ? parser.problem : "not YAML");
        yaml_parser_delete(&parser);
        return NULL;
    }
    json_t *out = NULL;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        snprintf(err, errlen, "empty");
    } else {
        struct convert c = { &doc, 0, err, errlen };
        out = node_json(&c, root, 0);
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return out;
}
