/* push.c: per-node clients and parallel pushes. Contract in push.h. */
#include "push.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../rpc/wire.h"

typedef struct push_peer {
    char *url;       /* owned */
    rpc_client *cli; /* owned */
} push_peer;

struct push {
    pthread_mutex_t mu; /* guards peers; never held during a call */
    push_peer *peers;   /* owned array of npeers (cap cap) */
    size_t npeers;
    size_t cap;
};

int push_new(push **out)
{
    push *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return LAPSE_ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    *out = p;
    return 0;
}

void push_free(push *p)
{
    if (p == NULL) {
        return;
    }
    for (size_t i = 0; i < p->npeers; i++) {
        rpc_client_close(p->peers[i].cli);
        free(p->peers[i].url);
    }
    free(p->peers);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int push_client(push *p, const char *url, rpc_client **out, char *err, size_t errlen)
{
    int rv = 0;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->npeers; i++) {
        if (strcmp(p->peers[i].url, url) == 0) {
            *out = p->peers[i].cli;
            goto done;
        }
    }
    if (p->npeers == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        push_peer *np = realloc(p->peers, cap * sizeof(*np));
        if (np == NULL) {
            rv = LAPSE_ENOMEM;
            snprintf(err, errlen, "out of memory");
            goto done;
        }
        p->peers = np;
        p->cap = cap;
    }
    char *copy = strdup(url);
    if (copy == NULL) {
        rv = LAPSE_ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    rpc_client *cli = NULL;
    if ((rv = rpc_client_open(&cli, url, err, errlen)) != 0) {
        free(copy);
        goto done;
    }
    p->peers[p->npeers].url = copy;
    p->peers[p->npeers].cli = cli;
    p->npeers++;
    *out = cli;
done:
    pthread_mutex_unlock(&p->mu);
    return rv;
}

/* One call of a broadcast; runs on its own thread or inline. */
typedef struct push_job {
    push *p;
    const char *url;    /* borrowed */
    Lapse__Request req; /* own envelope; body shared */
    int timeout_ms;
    const char *what; /* for logs */
    size_t index;     /* in urls, for on_reply */
    push_reply_fn on_reply;
    void *arg;
    char *ok; /* NULL, or ok[index] set once the call answered OK */
    int rv;   /* result */
    pthread_t thread;
    int started; /* thread was created */
} push_job;

static void *run_job(void *arg)
{
    push_job *j = arg;
    char err[256] = "";
    rpc_client *cli = NULL;
    Lapse__Response *resp = NULL;
    j->rv = push_client(j->p, j->url, &cli, err, sizeof(err));
    if (j->rv == 0) {
        j->rv = rpc_call(cli, &j->req, j->timeout_ms, &resp, err, sizeof(err));
    }
    if (j->rv == 0 && resp != NULL && j->on_reply != NULL) {
        j->on_reply(j->arg, j->index, resp);
    }
    if (j->rv == 0 && resp != NULL && j->ok != NULL) {
        j->ok[j->index] = 1; /* a byte of its own: read after the join */
    }
    rpc_response_free(resp);
    if (j->rv != 0) {
        log_warn("%s to %s failed: %s: %s (the node pulls on its next heartbeat)", j->what, j->url,
                 lapse_strerror(j->rv), err);
    }
    return NULL;
}

/* push_broadcast that also sets ok[i] (ok NULL: not) once urls[i]
 * answered OK. */
static size_t broadcast(push *p, const char *const *urls, size_t n, const Lapse__Request *tmpl,
                        int timeout_ms, const char *what, push_reply_fn on_reply, void *arg,
                        char *ok)
{
    if (n == 0) {
        return 0;
    }
    push_job *jobs = calloc(n, sizeof(*jobs));
    if (jobs == NULL) {
        log_warn("%s: out of memory, not pushed", what);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        push_job *j = &jobs[i];
        j->p = p;
        j->url = urls[i];
        lapse__request__init(&j->req);
        j->req.body_case = tmpl->body_case;
        /* The body is a oneof of pointers: copying any member copies it. */
        j->req.push_partition_map = tmpl->push_partition_map;
        j->req.pmap_version = tmpl->pmap_version;
        j->timeout_ms = timeout_ms;
        j->what = what;
        j->index = i;
        j->on_reply = on_reply;
        j->arg = arg;
        j->ok = ok;
        /* Run the last one inline; a failed thread start also runs inline. */
        if (i + 1 < n && pthread_create(&j->thread, NULL, run_job, j) == 0) {
            j->started = 1;
        } else {
            run_job(j);
        }
    }
    size_t nok = 0;
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].started) {
            pthread_join(jobs[i].thread, NULL);
        }
        if (jobs[i].rv == 0) {
            nok++;
        }
    }
    free(jobs);
    return nok;
}

size_t push_broadcast(push *p, const char *const *urls, size_t n, const Lapse__Request *tmpl,
                      int timeout_ms, const char *what, push_reply_fn on_reply, void *arg)
{
    return broadcast(p, urls, n, tmpl, timeout_ms, what, on_reply, arg, NULL);
}

/* The addresses of pm's UP nodes, and their ids in *ids, copied into a.
 * Returns the array (n entries), or NULL with *n = 0 on OOM. */
static const char **up_nodes(const pmap *pm, arena *a, uint32_t **ids, size_t *n)
{
    *n = 0;
    const char **urls = arena_alloc(a, (pm->nnodes + 1) * sizeof(*urls));
    *ids = arena_alloc(a, (pm->nnodes + 1) * sizeof(**ids));
    if (urls == NULL || *ids == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < pm->nnodes; i++) {
        if (pm->nodes[i].state != PMAP_NODE_UP) {
            continue;
        }
        if ((urls[*n] = arena_strdup(a, pm->nodes[i].address)) == NULL) {
            *n = 0;
            return NULL;
        }
        (*ids)[*n] = pm->nodes[i].id;
        (*n)++;
    }
    return urls;
}

void push_plan_copy(push_plan *pl, const pmap *pm, arena *a)
{
    memset(pl, 0, sizeof(*pl));
    pl->version = pm->version;
    pl->map = wire_pmap_to_pb(a, pm);
    pl->urls = up_nodes(pm, a, &pl->ids, &pl->n);
    pl->ok = pl->n > 0 ? arena_alloc(a, pl->n) : NULL; /* zeroed: none took it yet */
}

size_t push_plan_send(push *p, push_plan *pl, int timeout_ms, push_reply_fn on_reply, void *arg)
{
    if (pl->map == NULL || pl->urls == NULL || pl->n == 0) {
        return 0;
    }
    Lapse__PushPartitionMapRequest body = LAPSE__PUSH_PARTITION_MAP_REQUEST__INIT;
    body.map = pl->map;
    Lapse__Request tmpl = LAPSE__REQUEST__INIT;
    tmpl.body_case = LAPSE__REQUEST__BODY_PUSH_PARTITION_MAP;
    tmpl.push_partition_map = &body;
    tmpl.pmap_version = pl->map->version;
    char what[64];
    snprintf(what, sizeof(what), "push of map version %llu", (unsigned long long)pl->map->version);
    size_t nok = broadcast(p, pl->urls, pl->n, &tmpl, timeout_ms, what, on_reply, arg, pl->ok);
    log_info("map version %llu pushed to %zu of %zu UP nodes", (unsigned long long)pl->map->version,
             nok, pl->n);
    return nok;
}
