/* An environment the tests control, passed to gs_config_load through gs_getenv_fn. */
#ifndef GPUSLICE_TEST_FAKE_ENV_H
#define GPUSLICE_TEST_FAKE_ENV_H

#define FAKE_ENV_MAX 64

struct fake_env {
    const char *name[FAKE_ENV_MAX];
    const char *value[FAKE_ENV_MAX];
    int n;
};

/* Sets (or replaces) name=value; the strings must outlive the environment. */
void fake_env_set(struct fake_env *e, const char *name, const char *value);
/* gs_getenv_fn over a struct fake_env passed as ctx. */
const char *fake_env_get(const char *name, void *ctx);

#endif
