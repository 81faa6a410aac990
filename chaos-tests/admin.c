/*
 * admin.c: the harness's admin calls, retried through coordinator restarts
 * or run beside a fault. See admin.h.
 */
#include "admin.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "../common/clock.h"
#include "procs.h"
#include "workload.h"

int admin_create_table(run *r, const char *name, int *first_rv)
{
    lapse_table_def d = {0};
    d.name = name;
    d.partition_key = "Id";
    d.partition_key_type = 'S';
    d.partitions = WL_PARTITIONS;
    d.replication = r->opt->replication;
    return admin_create_def(r, &d, first_rv);
}

int admin_create_def(run *r, const lapse_table_def *d, int *first_rv)
{
    int rv = 0;
    int64_t deadline = clock_mono_now().ms + 30000;
    while (clock_mono_now().ms < deadline) {
        lapse_error e = {0};
        rv = lapse_create_table(r->admin, d, &e);
        atomic_fetch_add(&r->ops[OP_ADMIN], 1);
        if (first_rv != NULL) {
            *first_rv = rv;
            first_rv = NULL;
        }
        if (rv == 0 || rv == LAPSE_EEXISTS) {
            return rv;
        }
        clock_sleep_ms(200);
    }
    return rv;
}

int admin_enable_ttl(run *r, const char *table, int timeout_ms)
{
    lapse_ttl_spec spec = {0};
    spec.action = LAPSE_TTL_ENABLE;
    spec.attribute = MODEL_TTL_ATTR;
    int rv = 0;
    int64_t deadline = clock_mono_now().ms + timeout_ms;
    while (clock_mono_now().ms < deadline) {
        lapse_error e = {0};
        rv = lapse_update_ttl(r->admin, table, &spec, NULL, &e);
        atomic_fetch_add(&r->ops[OP_ADMIN], 1);
        if (rv == 0 || (rv == LAPSE_ESTATE && strstr(e.message, "already enabled") != NULL)) {
            return 0;
        }
        clock_sleep_ms(200);
    }
    return rv;
}

static void *admin_thread(void *p)
{
    admin_job *j = p;
    if (j->enable) {
        lapse_ttl_spec spec = {0};
        spec.action = LAPSE_TTL_ENABLE;
        spec.attribute = MODEL_TTL_ATTR;
        j->rv = lapse_update_ttl(j->r->admin, j->table, &spec, NULL, &j->e);
    } else {
        lapse_table_def d = {0};
        d.name = j->table;
        d.partition_key = "Id";
        d.partition_key_type = 'S';
        d.partitions = WL_PARTITIONS;
        d.replication = j->r->opt->replication;
        j->rv = lapse_create_table(j->r->admin, &d, &j->e);
    }
    atomic_fetch_add(&j->r->ops[OP_ADMIN], 1);
    return NULL;
}

/* Runs j's call on a thread of its own and, delay_ms into it, fault(r,
 * arg) on this one; returns when both are done. Without a thread the call
 * runs alone, without the fault. */
void admin_with(run *r, admin_job *j, int64_t delay_ms, void (*fault)(run *, void *), void *arg)
{
    pthread_t th;
    if (pthread_create(&th, NULL, admin_thread, j) != 0) {
        admin_thread(j);
        return;
    }
    clock_sleep_ms(delay_ms);
    fault(r, arg);
    pthread_join(th, NULL);
}

typedef struct kill_fault {
    int victim;
    const char *why;
    int64_t delay_ms;
} kill_fault;

static void do_kill9(run *r, void *arg)
{
    const kill_fault *k = arg;
    char buf[160];
    snprintf(buf, sizeof(buf), "%.100s (%" PRId64 " ms after the call)", k->why, k->delay_ms);
    procs_kill9(r, k->victim, buf);
}

void admin_with_kill(run *r, admin_job *j, int victim, int64_t delay_ms, const char *why)
{
    kill_fault k = {victim, why, delay_ms};
    admin_with(r, j, delay_ms, do_kill9, &k);
}

/* After a killed UpdateTimeToLive(ENABLE): an acknowledged one must stick
 * by itself (settle then only waits for ENABLED); a failed one is retried. */
void admin_resolve_enable(run *r, int ti, const admin_job *j)
{
    mtable *t = &r->m.t[ti];
    if (j->rv == 0) {
        t->ttl_resolved = 1;
        flog_add(r, "UpdateTimeToLive(ENABLE) on %s was acknowledged", t->name);
    } else if (admin_enable_ttl(r, t->name, 20000) == 0) {
        t->ttl_resolved = 1;
        flog_add(r, "UpdateTimeToLive(ENABLE) on %s failed (%s); retried until applied", t->name,
                 lapse_strerror(j->rv));
    } else {
        flog_add(r, "TTL enable on %s not resolved yet (settle retries)", t->name);
    }
}

/* Fills model table ti (all its keys) with random TTL classes. */
void admin_fill_table(run *r, int ti, uint64_t *rng)
{
    int n = r->m.t[ti].nkeys;
    int *idx = malloc(sizeof(int) * (size_t)n);
    if (idx == NULL) {
        return;
    }
    for (int i = 0; i < n; i++) {
        idx[i] = i;
    }
    wl_batch_put(r, r->admin, ti, idx, n, 0, rng);
    free(idx);
}
