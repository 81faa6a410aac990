/* stopsig.c: the daemons' stop signals. Contract in stopsig.h. */
#include "stopsig.h"

#include <pthread.h>
#include <string.h>

void stopsig_block(void (*on_stop)(int), sigset_t *waitset)
{
    sigset_t stopset;
    sigemptyset(&stopset);
    sigaddset(&stopset, SIGTERM);
    sigaddset(&stopset, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stopset, waitset);
    sigdelset(waitset, SIGTERM);
    sigdelset(waitset, SIGINT);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}
