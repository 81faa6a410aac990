/*
 * rpc_loop.c: rpc_loop.h on epoll(7).
 *
 * The thread takes a round of events from epoll_wait, runs their callbacks
 * in order, and counts the round as ended. A barrier wakes the thread (an
 * eventfd it also watches) and waits for the count to pass the round under
 * way when it asked: a descriptor removed before that cannot be in a later
 * round, since epoll no longer reports it.
 *
 * A driven loop has no thread: a caller of rpc_loop_drive takes the rounds
 * while no other does (driving, under mu), and the others wait for a
 * round's end on cv and look again at whether their calls are done.
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

#include "../common/clock.h"
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
    int driven;        /* no thread: rounds run in rpc_loop_drive (fixed) */
    int driving;       /* a caller of rpc_loop_drive is in a round; guarded by mu */
    pthread_t driver;  /* that caller, while driving */
};

/* Runs the callbacks of a round of n events. */
static void run_round(rpc_loop *l, const struct epoll_event *ev, int n)
{
    for (int i = 0; i < n; i++) {
        rpc_loop_watch *w = ev[i].data.ptr;
        if (w == NULL) {
            rpc_frame_wake_drain(l->wake_fd);
        } else {
            w->fn(w->arg);
        }
    }
}

static void *loop_run(void *arg)
{
    rpc_loop *l = arg;
    struct epoll_event ev[LOOP_EVENTS];
    for (;;) {
        int n = epoll_wait(l->ep, ev, LOOP_EVENTS, -1);
        run_round(l, ev, n);
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

/* Frees l's descriptors, lock and memory (its thread, if any, is gone). */
static void loop_free(rpc_loop *l)
{
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    if (l->ep >= 0) {
        close(l->ep);
    }
    if (l->wake_fd >= 0) {
        close(l->wake_fd);
    }
    free(l);
}

/* A loop with its epoll descriptor and eventfd, no thread yet, or NULL. */
static rpc_loop *loop_new(void)
{
    rpc_loop *l = calloc(1, sizeof *l);
    if (l == NULL) {
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    clock_cond_init_mono(&l->cv);
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    l->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (l->ep < 0 || l->wake_fd < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, l->wake_fd, &ev) != 0) {
        loop_free(l);
        return NULL;
    }
    return l;
}

int rpc_loop_open(rpc_loop **out, const char *name)
{
    *out = NULL;
    rpc_loop *l = loop_new();
    if (l == NULL) {
        return LAPSE_ENOMEM;
    }
    if (pthread_create(&l->thread, NULL, loop_run, l) != 0) {
        loop_free(l);
        return LAPSE_ENOMEM;
    }
    (void)pthread_setname_np(l->thread, name); /* for top -H, perf */
    *out = l;
    return 0;
}

int rpc_loop_open_driven(rpc_loop **out)
{
    *out = loop_new();
    if (*out == NULL) {
        return LAPSE_ENOMEM;
    }
    (*out)->driven = 1;
    return 0;
}

void rpc_loop_drive(rpc_loop *l, int (*done)(void *arg), void *arg, clock_mono deadline)
{
    struct epoll_event ev[LOOP_EVENTS];
    pthread_mutex_lock(&l->mu);
    for (;;) {
        int64_t left = clock_mono_remaining_ms(deadline);
        if (done(arg) || left <= 0) {
            break;
        }
        int timeout = left > INT32_MAX ? INT32_MAX : (int)left;
        if (l->driving) {
            /* Another caller takes the rounds: look again after one. */
            struct timespec ts = clock_mono_abstime(timeout);
            (void)pthread_cond_timedwait(&l->cv, &l->mu, &ts);
            continue;
        }
        l->driving = 1;
        l->driver = pthread_self();
        pthread_mutex_unlock(&l->mu);
        int n = epoll_wait(l->ep, ev, LOOP_EVENTS, timeout);
        run_round(l, ev, n);
        pthread_mutex_lock(&l->mu);
        l->driving = 0;
        l->rounds++;
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
}

int rpc_loop_is_driven(const rpc_loop *l)
{
    return l != NULL && l->driven;
}

void rpc_loop_wake(rpc_loop *l)
{
    rpc_frame_wake(l->wake_fd);
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
    if (l->driven && !l->driving) {
        until = l->rounds; /* no round under way, and none starts on its own */
    }
    rpc_frame_wake(l->wake_fd);
    while (l->rounds < until) {
        pthread_cond_wait(&l->cv, &l->mu);
    }
    pthread_mutex_unlock(&l->mu);
}

int rpc_loop_on_thread(const rpc_loop *l)
{
    if (l->driven) {
        /* Only the driver itself can see its own flag and id change under
         * it: it set them. */
        rpc_loop *m = (rpc_loop *)l;
        pthread_mutex_lock(&m->mu);
        int on = m->driving && pthread_equal(pthread_self(), m->driver);
        pthread_mutex_unlock(&m->mu);
        return on;
    }
    return pthread_equal(pthread_self(), l->thread);
}

void rpc_loop_close(rpc_loop *l)
{
    if (l == NULL) {
        return;
    }
    if (!l->driven) {
        pthread_mutex_lock(&l->mu);
        l->stopping = 1;
        pthread_mutex_unlock(&l->mu);
        rpc_frame_wake(l->wake_fd);
        pthread_join(l->thread, NULL);
    }
    while (l->kept != NULL) { /* no round runs now: no callback of theirs runs */
        kept_watch *k = l->kept;
        l->kept = k->next;
        free(k);
    }
    loop_free(l);
}
