/*
 * registers.c: the register workload of invariant 8. See registers.h.
 */
#include "registers.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/clock.h"
#include "../common/item.h"
#include "../tests/nodecall.h"

void reg_key_name(int h, char *buf, size_t len)
{
    snprintf(buf, len, "reg-%d-%d", h / REG_KEYS, h % REG_KEYS);
}

int64_t reg_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The epoch of keys the threads call now: the last one takes whatever
 * runs past the planned duration. */
static int current_epoch(const registers *g)
{
    int e = (int)((reg_now_us() - g->t0_us) / (REG_EPOCH_MS * 1000));
    return e < g->nkeys / REG_KEYS ? e : g->nkeys / REG_KEYS - 1;
}

static void record(reg_history *h, const lin_op *op)
{
    pthread_mutex_lock(&h->mu);
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        lin_op *ops = realloc(h->ops, cap * sizeof(*ops));
        if (ops == NULL) {
            abort(); /* the harness cannot judge a history it lost */
        }
        h->ops = ops;
        h->cap = cap;
    }
    h->ops[h->n++] = *op;
    h->unknown += op->outcome == LIN_UNKNOWN;
    pthread_mutex_unlock(&h->mu);
}

/* 1 when key h holds REG_MAX_UNKNOWN writes of unknown outcome. */
static int too_uncertain(reg_history *h)
{
    pthread_mutex_lock(&h->mu);
    int full = h->unknown >= REG_MAX_UNKNOWN;
    pthread_mutex_unlock(&h->mu);
    return full;
}

static lapse_item *reg_item(int k, uint64_t value)
{
    char name[32];
    lapse_item *it = lapse_item_new();
    reg_key_name(k, name, sizeof(name));
    if (it == NULL || lapse_item_set_s(it, "Id", name) != 0 ||
        (value != 0 && lapse_item_set_n_i64(it, "val", (int64_t)value) != 0)) {
        abort();
    }
    return it;
}

/* A strongly consistent get of key k; records it when it succeeded.
 * Returns the get's status; *seen the value (0: absent). */
static int reg_read(run *r, lapse_client *c, int k, int thread, uint64_t *seen)
{
    lapse_item *key = reg_item(k, 0), *got = NULL;
    lapse_error e;
    lin_op op = {.kind = LIN_READ, .outcome = LIN_OK, .thread = thread};
    op.call_us = reg_now_us();
    int rv = lapse_get(c, r->m.t[REG_TABLE].name, key, &got, &e);
    op.ret_us = reg_now_us();
    if (rv == 0) {
        const char *v = got != NULL ? lapse_item_get_n(got, "val") : NULL;
        op.value = v != NULL ? strtoull(v, NULL, 10) : 0;
        *seen = op.value;
        record(&r->regs->key[k], &op);
    }
    lapse_item_free(got);
    lapse_item_free(key);
    return rv;
}

/* A put of a fresh value to key k, conditional on val = expect when expect
 * is not 0. Returns the put's status; *seen the value on success. */
static int reg_write(run *r, lapse_client *c, int k, int thread, uint64_t expect, uint64_t *seen)
{
    lin_op op = {.kind = expect != 0 ? LIN_CAS : LIN_WRITE, .expect = expect, .thread = thread};
    op.value = run_ver(r);
    lapse_item *it = reg_item(k, op.value);
    char want[48];
    snprintf(want, sizeof(want), "{\"N\":\"%" PRIu64 "\"}", expect);
    lapse_condition cond = {.kind = LAPSE_COND_EQUALS, .attribute = "val", .value_json = want};
    lapse_error e;
    op.call_us = reg_now_us();
    int rv = lapse_put(c, r->m.t[REG_TABLE].name, it, expect != 0 ? &cond : NULL, &e);
    op.ret_us = reg_now_us();
    lapse_item_free(it);
    op.outcome = rv == 0                                 ? LIN_OK
                 : rv == LAPSE_ECONDITION && expect != 0 ? LIN_FAILED
                                                         : LIN_UNKNOWN;
    if (rv == 0) {
        *seen = op.value;
    }
    record(&r->regs->key[k], &op);
    return rv;
}

typedef struct reg_arg {
    run *r;
    int thread;
    lapse_client *c; /* its own: its map goes stale on its own */
} reg_arg;

static void *reg_worker(void *p)
{
    reg_arg *a = p;
    run *r = a->r;
    uint64_t rng = r->seed ^ (0x7e6157e5ULL * (uint64_t)(a->thread + 1));
    uint64_t seen[REG_KEYS] = {0};
    int epoch = 0;
    while (!atomic_load(&r->stop)) {
        int e = current_epoch(r->regs);
        if (e != epoch) {
            memset(seen, 0, sizeof(seen));
            epoch = e;
        }
        int j = (int)rng_range(&rng, 0, REG_KEYS - 1), k = epoch * REG_KEYS + j;
        uint64_t *saw = &seen[j];
        int x = (int)rng_range(&rng, 0, 9);
        if (x < 4 || too_uncertain(&r->regs->key[k])) {
            reg_read(r, a->c, k, a->thread, saw);
        } else if (x < 7 || *saw == 0) {
            reg_write(r, a->c, k, a->thread, 0, saw);
        } else {
            reg_write(r, a->c, k, a->thread, *saw, saw);
        }
        clock_sleep_ms(rng_range(&rng, 1, 4));
    }
    lapse_close(a->c);
    free(a);
    return NULL;
}

int reg_start(run *r)
{
    registers *g = calloc(1, sizeof(*g));
    int epochs = (int)((int64_t)r->opt->duration_s * 1000 / REG_EPOCH_MS) + 1;
    if (g == NULL || (g->key = calloc((size_t)epochs * REG_KEYS, sizeof(*g->key))) == NULL) {
        free(g);
        return ENOMEM;
    }
    g->nkeys = epochs * REG_KEYS;
    for (int k = 0; k < g->nkeys; k++) {
        pthread_mutex_init(&g->key[k].mu, NULL);
    }
    g->t0_us = reg_now_us();
    r->regs = g;
    for (int i = 0; i < REG_THREADS; i++) {
        reg_arg *a = malloc(sizeof(*a));
        if (a == NULL) {
            return ENOMEM;
        }
        a->r = r;
        a->thread = i;
        lapse_error e;
        int rv = lapse_connect_timeout(&a->c, cluster_coordinator_url(r->cl), 1500, &e);
        if (rv != 0) {
            free(a);
            return EIO;
        }
        if ((rv = pthread_create(&g->threads[i], NULL, reg_worker, a)) != 0) {
            lapse_close(a->c);
            free(a);
            return rv;
        }
        g->nthreads++;
    }
    return 0;
}

void reg_join(run *r)
{
    if (r->regs == NULL) {
        return;
    }
    for (int i = 0; i < r->regs->nthreads; i++) {
        pthread_join(r->regs->threads[i], NULL);
    }
    r->regs->nthreads = 0;
}

void reg_final_reads(run *r)
{
    if (r->regs == NULL) {
        return;
    }
    for (int k = 0; k < r->regs->nkeys; k++) {
        uint64_t seen;
        if (r->regs->key[k].n == 0) {
            continue;
        }
        for (int tries = 0; tries < 20 && reg_read(r, r->admin, k, REG_THREADS, &seen) != 0;
             tries++) {
            clock_sleep_ms(250);
        }
    }
}

int reg_read_at(run *r, rpc_client *c)
{
    registers *g = r->regs;
    if (g == NULL) {
        return 0;
    }
    int epoch = current_epoch(g);
    int answered = 0;
    for (int j = 0; j < REG_KEYS; j++) {
        int h = epoch * REG_KEYS + j;
        char name[32], err[256];
        reg_key_name(h, name, sizeof(name));
        attr_value id;
        item *key = item_new();
        if (key == NULL || item_value_init_bytes(&id, ATTR_S, name, strlen(name)) != 0 ||
            item_set(key, "Id", &id) != 0) {
            abort();
        }
        item *got = NULL;
        lin_op op = {.kind = LIN_READ, .outcome = LIN_OK, .thread = REG_THREADS + 1};
        op.call_us = reg_now_us();
        int rv = nodecall_get(c, r->m.t[REG_TABLE].name, key, 500, &got, err, sizeof(err));
        op.ret_us = reg_now_us();
        if (rv == 0) {
            const attr_value *v = got != NULL ? item_get(got, "val") : NULL;
            op.value = v != NULL && v->type == ATTR_N ? strtoull(v->u.bytes.ptr, NULL, 10) : 0;
            record(&g->key[h], &op);
            answered++;
        }
        item_free(got);
        item_free(key);
    }
    return answered;
}

void reg_free(run *r)
{
    if (r->regs == NULL) {
        return;
    }
    for (int k = 0; k < r->regs->nkeys; k++) {
        free(r->regs->key[k].ops);
        pthread_mutex_destroy(&r->regs->key[k].mu);
    }
    free(r->regs->key);
    free(r->regs);
    r->regs = NULL;
}
