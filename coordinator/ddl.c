/* ddl.c: one change of the map by a table call. Contract in ddl.h. */
#include "ddl.h"

#include <pthread.h>
#include <string.h>

#include "../common/lapse_err.h"

void ddl_begin(ddl_txn *x, server *s, Lapse__Response *resp)
{
    memset(x, 0, sizeof(*x));
    x->s = s;
    pthread_mutex_lock(&s->ddl_lock);
    pthread_mutex_lock(&s->lock);
    resp->pmap_version = s->pm->version;
}

const pmap_table *ddl_find(ddl_txn *x, const char *name, Lapse__Response *resp, arena *a)
{
    const pmap_table *t = pmap_table_find(x->s->pm, name);
    if (t == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOTFOUND, "table %s does not exist", name);
    }
    return t;
}

int ddl_dup(ddl_txn *x, Lapse__Response *resp, arena *a)
{
    if ((x->next = pmap_dup(x->s->pm)) == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        return LAPSE_ENOMEM;
    }
    return 0;
}

int ddl_commit(ddl_txn *x, uint32_t next_table_id, Lapse__Response *resp, arena *a)
{
    server *s = x->s;
    char err[512] = "";
    int rv = server_commit(s, x->next, next_table_id, err, sizeof(err));
    if (rv != 0) {
        rpc_set_error(resp, a, rv, "cannot persist the partition map: %s", err);
        return rv;
    }
    x->next = NULL; /* owned by s now */
    x->committed = 1;
    resp->pmap_version = s->pm->version;
    push_plan_copy(&x->plan, s->pm, a);
    return 0;
}

void ddl_push(ddl_txn *x, push_reply_fn on_reply)
{
    server *s = x->s;
    pthread_mutex_unlock(&s->lock);
    pmap_free(x->next);
    x->next = NULL;
    if (x->committed) {
        ddl_push_ctx ctx = {s, x->plan.ids};
        push_plan_send(s->pusher, &x->plan, s->push_timeout_ms, on_reply, &ctx);
    }
}

void ddl_end(ddl_txn *x)
{
    pthread_mutex_unlock(&x->s->ddl_lock);
}
