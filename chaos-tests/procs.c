/*
 * procs.c: the run's processes under faults: naming, killing, restarting,
 * healing, and noting the ones that exited on their own. See procs.h.
 */
#include "procs.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "../common/clock.h"
#include "../tests/etcd_members.h"

/* Processes: the coordinators (0, and after the nodes on etcd), the nodes. */
/* Processes: the coordinators (0, and after the nodes on etcd), the nodes. */
int procs_count(run *r)
{
    return cluster_nodes(r->cl) + cluster_coordinators(r->cl);
}

void procs_name(run *r, int idx, char *buf, size_t len)
{
    if (idx == 0) {
        snprintf(buf, len, "coordinator");
    } else if (idx > cluster_nodes(r->cl)) {
        snprintf(buf, len, "coordinator %d", idx - cluster_nodes(r->cl) + 1);
    } else {
        snprintf(buf, len, "node %d", idx);
    }
}

/* The coordinator to kill: the one that leads (on etcd), else the one. */
int procs_coord_victim(run *r)
{
    int idx = cluster_etcd(r->cl) != NULL ? cluster_leader(r->cl, -1, 5000) : 0;
    return idx >= 0 ? idx : 0;
}

/* Counts one injected fault, for the running scenario's kinds too. */
void procs_injected(run *r)
{
    atomic_fetch_add(&r->faults, 1);
    for (int b = 0; b < CHAOS_FAULT_KINDS; b++) {
        if (r->fault_kind & (1u << b)) {
            atomic_fetch_add(&r->kind_faults[b], 1);
        }
    }
}

void procs_kill9(run *r, int idx, const char *why)
{
    char n[32];
    procs_name(r, idx, n, sizeof(n));
    if (cluster_kill(r->cl, idx, SIGKILL) == 0) {
        procs_injected(r);
        flog_add(r, "kill -9 %s %s", n, why);
    }
}

void procs_wait_up(run *r)
{
    if (cluster_wait_up(r->cl, cluster_nodes(r->cl), 20000) != 0) {
        flog_add(r, "cluster not all UP 20 s after a restart");
    }
}

void procs_restart(run *r, int idx)
{
    char n[32];
    procs_name(r, idx, n, sizeof(n));
    if (cluster_pid(r->cl, idx) == 0) {
        if (cluster_restart(r->cl, idx) == 0) {
            flog_add(r, "restart %s", n);
        } else {
            flog_add(r, "cannot restart %s", n);
        }
    }
}

void procs_restart_after(run *r, int idx, int64_t delay_ms)
{
    run_phase(r, "process %d down for %" PRId64 " ms", idx, delay_ms);
    clock_sleep_ms(delay_ms);
    procs_restart(r, idx);
    procs_wait_up(r);
}

int procs_check_crashes(run *r)
{
    int *seen = r->crashes_seen;
    int found = 0;
    for (int i = 0; i < procs_count(r); i++) {
        int n = cluster_crash_count(r->cl, i);
        if (n > seen[i]) {
            char nm[32];
            procs_name(r, i, nm, sizeof(nm));
            int st = cluster_exit_status(r->cl, i);
            flog_add(r, "CRASH: %s exited on its own (%s %d); see %s", nm,
                     WIFSIGNALED(st) ? "signal" : "status",
                     WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), cluster_log_path(r->cl, i));
            atomic_fetch_add(&r->crashes, n - seen[i]);
            found += n - seen[i];
            seen[i] = n;
            procs_restart(r, i);
        }
    }
    return found;
}

/* Brings node's link back up, retrying: a link left down would fail the
 * whole run for the wrong reason. Returns 0 or -1. */
int procs_heal(run *r, int node)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        if (netns_cut(r->netns, node, 0) == 0) {
            flog_add(r, "heal: node %d's link is up again", node);
            return 0;
        }
        clock_sleep_ms(200);
    }
    flog_add(r, "cannot heal node %d (see %s)", node, r->netns->log_path);
    return -1;
}

int procs_restore(run *r)
{
    procs_check_crashes(r);
    for (int i = 1; r->netns != NULL && i <= r->netns->nodes; i++) {
        if (r->netns->cut[i]) {
            procs_heal(r, i);
        }
        if (r->netns->oneway[i] && netns_oneway(r->netns, i, 0) != 0) {
            flog_add(r, "cannot end node %d's one-way cut (see %s)", i, r->netns->log_path);
        }
    }
    for (int i = 0; i < procs_count(r); i++) {
        if (cluster_pid(r->cl, i) > 0) {
            cluster_kill(r->cl, i, SIGCONT);
        } else {
            procs_restart(r, i);
        }
    }
    etcd_members *m = cluster_etcd(r->cl);
    for (int i = 0; m != NULL && i < etcd_members_count(m); i++) {
        if (etcd_members_pid(m, i) == 0 && etcd_members_restart(m, i, 15000) != 0) {
            flog_add(r, "etcd member %d did not come back healthy in 15 s", i);
        }
    }
    return cluster_wait_up(r->cl, cluster_nodes(r->cl), 30000);
}
