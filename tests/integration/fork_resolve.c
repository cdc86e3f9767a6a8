/*
 * fork() while another thread's first driver call resolves libcuda.so.1
 * (slow_dlopen.c holds that dlopen 300 ms): the child then calls the
 * driver too, and must get an answer, not wait forever for a lock the
 * resolving thread held at the fork. Prints "child exited N" or "child
 * killed by signal N" (SIGALRM after 5 s: it hung).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*init_fn)(unsigned);

static void *first_call(void *arg)
{
    (void)(*(init_fn *)arg)(0);
    return NULL;
}

int main(void)
{
    init_fn init = (init_fn)dlsym(RTLD_DEFAULT, "cuInit");
    const int *inside = (const int *)dlsym(RTLD_DEFAULT, "gs_slow_dlopen_inside");
    if (!init || !inside) {
        fprintf(stderr, "fork_resolve: no cuInit or no slow_dlopen preloaded\n");
        return 2;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, first_call, &init) != 0)
        return 2;
    for (int i = 0; !__atomic_load_n(inside, __ATOMIC_ACQUIRE); i++) {
        if (i == 10000) {
            fprintf(stderr, "fork_resolve: the interposer never opened libcuda.so.1 through dlopen\n");
            return 2;
        }
        usleep(1000);
    }
    pid_t child = fork();
    if (child == 0) {
        alarm(5);
        (void)init(0);
        _exit(0);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child)
        return 2;
    pthread_join(t, NULL);
    if (WIFEXITED(status))
        printf("child exited %d\n", WEXITSTATUS(status));
    else
        printf("child killed by signal %d\n", WTERMSIG(status));
    return 0;
}
