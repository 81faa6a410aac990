/*
 * rpc_loop.c: rpc_loop.h on epoll(7).
 *
 * The thread takes a round of events from epoll_wait, runs their callbacks
 * in order, and counts the round as ended. A barrier wakes the thread (an
 * eventfd it also watches) and waits for the count to pass the round under
 * way when it asked: a descriptor removed before that cannot be in a later
 * round, since epoll no longer reports it.
 */
#include "rpc_loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../common/lapse_err.h"
#include "rpc_frame.h"

#define LOOP_EVENTS 64

/* A watch the loop keeps for its owner (rpc_loop_watch_fd). */
typedef struct kept_watch kept_watch;
struct kept_watch {
    rpc_loop_watch w;
    int fd;
    kept_watch *next;
};

struct rpc_loop {
    int ep;      /* the epoll descriptor */
    int wake_fd; /* an eventfd: wakes the thread for a barrier or the close */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled when a round ends */
    uint64_t rounds;   /* rounds ended; guarded by mu */
    int stopping;      /* guarded by mu */
    kept_watch *kept;  /* rpc_loop_watch_fd's; guarded by mu */
};

static void *loop_run(void *arg)
{
    rpc_loop *l = arg;
    struct epoll_event ev[LOOP_EVENTS];
    for (;;) {
        int n = epoll_wait(l->ep, ev, LOOP_EVENTS, -1);
        for (int i = 0; i < n; i++) {
            rpc_loop_watch *w = ev[i].data.ptr;
            if (w == NULL) {
                rpc_frame_wake_drain(l->wake_fd);
            } else {
                w->fn(w->arg);
            }
        }
        pthread_mutex_lock(&l->mu);
        l->rounds++;
        pthread_cond_broadcast(&l->cv);
        int stop = l->stopping;
        pthread_mutex_unlock(&l->mu);
        if (stop) {
            return NULL;
        }
        if (n < 0 && errno != EINTR) {
            return NULL; /* never: the descriptor is ours and the buffer valid */
        }
    }
}

int rpc_loop_open(rpc_loop **out, const char *name)
{
    *out = NULL;
    rpc_loop *l = calloc(1, sizeof *l);
    if (l == NULL) {
        return LAPSE_ENOMEM;
    }
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    l->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (l->ep < 0 || l->wake_fd < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, l->wake_fd, &ev) != 0) {
        goto fail;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (pthread_create(&l->thread, NULL, loop_run, l) != 0) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        goto fail;
    }
    (void)pthread_setname_np(l->thread, name); /* for top -H, perf */
    *out = l;
    return 0;
fail:
    if (l->ep >= 0) {
        close(l->ep);
    }
    if (l->wake_fd >= 0) {
        close(l->wake_fd);
    }
    free(l);
    return LAPSE_ENOMEM;
}

int rpc_loop_add(rpc_loop *l, int fd, rpc_loop_watch *w)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = w};
    return epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0
           : errno == ENOMEM                             ? LAPSE_ENOMEM
                                                         : LAPSE_EINTERNAL;
}

void rpc_loop_del(rpc_loop *l, int fd)
{
    (void)epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL); /* ENOENT: closed already */
}

int rpc_loop_watch_fd(rpc_loop *l, int fd, void (*fn)(void *arg), void *arg)
{
    kept_watch *k = calloc(1, sizeof *k);
    if (k == NULL) {
        return LAPSE_ENOMEM;
    }
    *k = (kept_watch){.w = {.fn = fn, .arg = arg}, .fd = fd};
    pthread_mutex_lock(&l->mu);
    int rv = rpc_loop_add(l, fd, &k->w);
    if (rv == 0) {
        k->next = l->kept;
        l->kept = k;
    }
    pthread_mutex_unlock(&l->mu);
    if (rv != 0) {
        free(k);
    }
    return rv;
}

void rpc_loop_unwatch_fd(rpc_loop *l, int fd)
{
    kept_watch *found = NULL;
    pthread_mutex_lock(&l->mu);
    for (kept_watch **p = &l->kept; *p != NULL; p = &(*p)->next) {
        if ((*p)->fd == fd) {
            found = *p;
            *p = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&l->mu);
    if (found != NULL) {
        rpc_loop_del(l, fd);
        rpc_loop_barrier(l);
        free(found);
    }
}

void rpc_loop_barrier(rpc_loop *l)
{
    pthread_mutex_lock(&l->mu);
    uint64_t until = l->rounds + 1;
    rpc_frame_wake(l->wake_fd);
    while (l->rounds < until) {
        pthread_cond_wait(&l->cv, &l->mu);
    }
    pthread_mutex_unlock(&l->mu);
}

int rpc_loop_on_thread(const rpc_loop *l)
{
    return pthread_equal(pthread_self(), l->thread);
}

void rpc_loop_close(rpc_loop *l)
{
    if (l == NULL) {
        return;
    }
    pthread_mutex_lock(&l->mu);
    l->stopping = 1;
    pthread_mutex_unlock(&l->mu);
    rpc_frame_wake(l->wake_fd);
    pthread_join(l->thread, NULL);
    while (l->kept != NULL) { /* the thread is gone: no callback of theirs runs */
        kept_watch *k = l->kept;
        l->kept = k->next;
        free(k);
    }
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    close(l->ep);
    close(l->wake_fd);
    free(l);
}
