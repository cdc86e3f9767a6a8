/* Second definition of gs_next_probe: what RTLD_NEXT from next_lib_a must find. */
__attribute__((visibility("default"))) int gs_next_probe(void);

int gs_next_probe(void)
{
    return 2;
}
