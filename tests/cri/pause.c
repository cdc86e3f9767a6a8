/*
 * The init of every pod sandbox in the CRI tests, in place of kubelet's
 * pause image (which no registry can give us here): it holds the sandbox's
 * namespaces until it is told to stop, and reaps the orphans a pid
 * namespace hands to its init. Linked statically, so its image is this one
 * file.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig)
{
    _exit(0);
}

static void reap(int sig)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

int main(void)
{
    struct sigaction sa = { .sa_handler = stop };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = reap;
    sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    sigaction(SIGCHLD, &sa, NULL);
    for (;;)
        pause();
}
