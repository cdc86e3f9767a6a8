/* YAML text as a jansson tree (libyaml), for the configuration files an
 * operator writes in YAML (a kubeconfig). */
#ifndef GPUSLICE_YAML_JSON_H
#define GPUSLICE_YAML_JSON_H

#include <jansson.h>
#include <stddef.h>

/* The first document of text (len bytes) as JSON: mappings as objects (a
 * later duplicate key wins), sequences as arrays, every scalar as a string,
 * quoted or not ("true" stays a string: the reader decides what a field
 * means). Aliases are followed, within YAML_JSON_MAX_DEPTH levels and
 * YAML_JSON_MAX_NODES nodes in all, so that a file of nested aliases cannot
 * grow without bound. Returns a new reference, or NULL with err set (a
 * syntax error names its line and column). */
#define YAML_JSON_MAX_DEPTH 32
#define YAML_JSON_MAX_NODES 65536
json_t *yaml_to_json(const char *text, size_t len, char *err, size_t errlen);

#endif
