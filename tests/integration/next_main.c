/* Prints what dlsym(RTLD_NEXT) from next_lib_a found: 2 is right (next_lib_b),
 * 1 means the lookup was judged from the wrong caller (an interposer's dlsym
 * that hid its caller's return address). */
#include <stdio.h>

int gs_next_probe_after_a(void);

int main(void)
{
    printf("%d\n", gs_next_probe_after_a());
    return 0;
}
