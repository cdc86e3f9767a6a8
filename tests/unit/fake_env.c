/* A tiny name/value table standing in for the process environment. */
#include "fake_env.h"

#include <stdlib.h>
#include <string.h>

void fake_env_set(struct fake_env *e, const char *name, const char *value)
{
    int i;

    for (i = 0; i < e->n; i++) {
        if (strcmp(e->name[i], name) == 0) {
            e->value[i] = value;
            return;
        }
    }
    if (e->n == FAKE_ENV_MAX)
        abort(); /* a test bug, not a product bug */
    e->name[e->n] = name;
    e->value[e->n] = value;
    e->n++;
}

const char *fake_env_get(const char *name, void *ctx)
{
    const struct fake_env *e = ctx;
    int i;

    for (i = 0; i < e->n; i++)
        if (strcmp(e->name[i], name) == 0)
            return e->value[i];
    return NULL;
}
