/*
 * loop.c: lapse_loop (lapse.h), rpc_loop.h behind liblapse's public API
 * (the loop keeps the program's watches, one per descriptor).
 */
#include <stdlib.h>

#include "../rpc/rpc_loop.h"
#include "client.h"

struct lapse_loop {
    rpc_loop *l;
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
    *out = l;
    return client_ok(err);
}

int lapse_loop_watch(lapse_loop *l, int fd, void (*fn)(void *arg), void *arg, lapse_error *err)
{
    if (l == NULL || fd < 0 || fn == NULL) {
        return client_err(err, LAPSE_EINVAL, "lapse_loop_watch: NULL loop or callback, or bad fd");
    }
    int rv = rpc_loop_watch_fd(l->l, fd, fn, arg);
    return rv != 0 ? client_err(err, rv, "cannot watch descriptor %d", fd) : client_ok(err);
}

void lapse_loop_unwatch(lapse_loop *l, int fd)
{
    if (l != NULL) {
        rpc_loop_unwatch_fd(l->l, fd);
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
    rpc_loop_close(l->l); /* with the watches it keeps */
    free(l);
}
