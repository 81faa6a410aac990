/*
 * faults_coord.c: the fault scenarios aimed at the control plane: a
 * coordinator (the leader, on etcd) killed during CreateTable or
 * UpdateTimeToLive, an etcd member killed during a CreateTable, the leading
 * coordinator stopped past its lease. See faults_coord.h and docs/chaos.md.
 */
#include "faults_coord.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "../common/clock.h"
#include "../tests/etcd_members.h"
#include "admin.h"
#include "procs.h"
#include "workload.h"

static void resolve_create(run *r, mcreated *mc, const admin_job *j);
static mcreated *new_created(run *r, const char *prefix, int n);

void faults_coord_create(run *r, uint64_t *rng, int n)
{
    mcreated *mc = new_created(r, "chaos_ct", n);
    if (mc == NULL) {
        return;
    }
    run_phase(r, "create-table %s while killing the coordinator", mc->name);
    admin_job j = {r, 0, mc->name, 0, {0}};
    /* Mostly before the reply (the call fails), sometimes just after it. */
    int64_t delay = rng_next(rng) % 3 != 0 ? rng_range(rng, 0, 6) : rng_range(rng, 6, 30);
    int victim = procs_coord_victim(r);
    admin_with_kill(r, &j, victim, delay, "during CreateTable");
    procs_restart_after(r, victim, rng_range(rng, 200, 1500));
    resolve_create(r, mc, &j);
}

/* After a CreateTable cut off by a fault: the first retry tells, "exists"
 * if the cut-off call applied, success if it did not (a lost acknowledged
 * create is a violation). */
static void resolve_create(run *r, mcreated *mc, const admin_job *j)
{
    mc->acked = j->rv == 0;
    int first = -1;
    int rv = admin_create_table(r, mc->name, &first);
    mc->exists = rv == 0 || rv == LAPSE_EEXISTS;
    mc->recreated = first == 0;
    flog_add(r, "CreateTable %s %s; the retry after the restart said %s", mc->name,
             mc->acked ? "was acknowledged" : "failed or timed out",
             first == 0 ? "created" : lapse_strerror(first));
}

void faults_coord_ttl(run *r, uint64_t *rng, int n)
{
    char name[48];
    snprintf(name, sizeof(name), "chaos_pr%d", n);
    int ti = model_add_table(&r->m, name, 400, 0);
    if (ti < 0) {
        return;
    }
    run_phase(r, "TTL enable on %s while killing the coordinator", name);
    int crv = admin_create_table(r, name, NULL);
    if (crv != 0 && crv != LAPSE_EEXISTS) {
        flog_add(r, "cannot create %s", name);
        return;
    }
    admin_fill_table(r, ti, rng);
    r->m.t[ti].ttl = 1;
    admin_job j = {r, 1, name, 0, {0}};
    int victim = procs_coord_victim(r);
    admin_with_kill(r, &j, victim, rng_range(rng, 0, 12), "during UpdateTimeToLive propagation");
    procs_restart_after(r, victim, rng_range(rng, 200, 1500));
    admin_resolve_enable(r, ti, &j);
}

/* A new created-table record, or NULL when the model is full. */
static mcreated *new_created(run *r, const char *prefix, int n)
{
    if (r->m.ncreated >= MODEL_MAX_CREATED) {
        return NULL;
    }
    mcreated *mc = &r->m.created[r->m.ncreated++];
    snprintf(mc->name, sizeof(mc->name), "%s%d", prefix, n);
    return mc;
}

typedef struct etcd_fault {
    etcd_members *m;
    int member;
} etcd_fault;

static void do_etcd_kill(run *r, void *arg)
{
    const etcd_fault *f = arg;
    if (etcd_members_kill(f->m, f->member, SIGKILL) == 0) {
        procs_injected(r);
        flog_add(r, "kill -9 etcd member %d during CreateTable", f->member);
    }
}

/* kill -9 of an etcd member while a create-table runs; it comes back after
 * a while. One member of three: everything must go on. */
void faults_coord_etcd_kill(run *r, uint64_t *rng, int n)
{
    etcd_members *m = cluster_etcd(r->cl);
    mcreated *mc = m != NULL ? new_created(r, "chaos_ek", n) : NULL;
    if (mc == NULL) {
        return;
    }
    int member = (int)rng_range(rng, 0, etcd_members_count(m) - 1);
    run_phase(r, "create-table %s while killing etcd member %d", mc->name, member);
    admin_job j = {r, 0, mc->name, 0, {0}};
    etcd_fault f = {m, member};
    admin_with(r, &j, rng_range(rng, 0, 10), do_etcd_kill, &f);
    clock_sleep_ms(rng_range(rng, 200, 1500));
    if (etcd_members_restart(m, member, 15000) == 0) {
        flog_add(r, "restart etcd member %d", member);
    } else {
        flog_add(r, "etcd member %d did not come back healthy in 15 s", member);
    }
    resolve_create(r, mc, &j);
}

typedef struct stop_fault {
    int victim;
    int64_t ms;
} stop_fault;

static void do_stop(run *r, void *arg)
{
    const stop_fault *f = arg;
    if (cluster_kill(r->cl, f->victim, SIGSTOP) == 0) {
        procs_injected(r);
        flog_add(r, "SIGSTOP the leading coordinator (process %d) for %" PRId64 " ms", f->victim,
                 f->ms);
    }
    clock_sleep_ms(f->ms);
    cluster_kill(r->cl, f->victim, SIGCONT);
    flog_add(r, "SIGCONT process %d", f->victim);
}

/* SIGSTOP of the leading coordinator past its 2 s lease while a
 * create-table runs, then SIGCONT: another leads meanwhile, and the stalled
 * one must write nothing when it resumes. */
void faults_coord_stop(run *r, uint64_t *rng, int n)
{
    mcreated *mc = cluster_etcd(r->cl) != NULL ? new_created(r, "chaos_cs", n) : NULL;
    if (mc == NULL) {
        return;
    }
    int victim = procs_coord_victim(r);
    int64_t ms = rng_range(rng, 2500, 4500);
    run_phase(r, "create-table %s with the leading coordinator stopped %" PRId64 " ms", mc->name,
              ms);
    admin_job j = {r, 0, mc->name, 0, {0}};
    stop_fault f = {victim, ms};
    admin_with(r, &j, rng_range(rng, 0, 10), do_stop, &f);
    resolve_create(r, mc, &j);
}
