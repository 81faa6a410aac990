/*
 * loop.c: lapse_loop (lapse.h), rpc_loop.h behind liblapse's public API: a
 * watch of the program's own is kept here, one per descriptor.
 */
#include <pthread.h>
#include <stdlib.h>

#include "../rpc/rpc_loop.h"
#include "client.h"

typedef struct own_watch own_watch;
struct own_watch {
    rpc_loop_watch w;
    int fd;
    own_watch *next;
};

struct lapse_loop {
    rpc_loop *l;
    pthread_mutex_t mu; /* guards watches */
    own_watch *watches;
};

struct rpc_loop *client_loop_rpc(lapse_loop *l)
{
    return l->l;
}

int lapse_loop_open(lapse_loop **out, lapse_error *err)
{
    if (out == NULL) {
        return client_err(err, LAPSE_EINVAL, "lapse_loop_open: out is NULL");
    }
    *out = NULL;
    lapse_loop *l = calloc(1, sizeof *l);
    if (l == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    int rv = rpc_loop_open(&l->l, "lapse:loop");
    if (rv != 0) {
        free(l);
        return client_err(err, rv, "cannot start the loop's thread");
    }
    pthread_mutex_init(&l->mu, NULL);
    *out = l;
    return client_ok(err);
}

int lapse_loop_watch(lapse_loop *l, int fd, void (*fn)(void *arg), void *arg, lapse_error *err)
{
    if (l == NULL || fd < 0 || fn == NULL) {
        return client_err(err, LAPSE_EINVAL, "lapse_loop_watch: NULL loop or callback, or bad fd");
    }
    own_watch *w = calloc(1, sizeof *w);
    if (w == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    *w = (own_watch){.w = {.fn = fn, .arg = arg}, .fd = fd};
    pthread_mutex_lock(&l->mu);
    int rv = rpc_loop_add(l->l, fd, &w->w);
    if (rv == 0) {
        w->next = l->watches;
        l->watches = w;
    }
    pthread_mutex_unlock(&l->mu);
    if (rv != 0) {
        free(w);
        return client_err(err, rv, "cannot watch descriptor %d", fd);
    }
    return client_ok(err);
}

void lapse_loop_unwatch(lapse_loop *l, int fd)
{
    if (l == NULL) {
        return;
    }
    own_watch *found = NULL;
    pthread_mutex_lock(&l->mu);
    for (own_watch **p = &l->watches; *p != NULL; p = &(*p)->next) {
        if ((*p)->fd == fd) {
            found = *p;
            *p = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&l->mu);
    if (found != NULL) {
        rpc_loop_del(l->l, fd);
        rpc_loop_barrier(l->l);
        free(found);
    }
}

int lapse_loop_on_thread(const lapse_loop *l)
{
    return l != NULL && rpc_loop_on_thread(l->l);
}

void lapse_loop_close(lapse_loop *l)
{
    if (l == NULL) {
        return;
    }
    while (l->watches != NULL) {
        lapse_loop_unwatch(l, l->watches->fd);
    }
    rpc_loop_close(l->l);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
