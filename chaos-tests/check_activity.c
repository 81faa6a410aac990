/*
 * check_activity.c: the minimum activity of a chaos run, without which its
 * PASS would prove nothing (a run with no acknowledged write, no TTL
 * deletion or no fault passes every invariant). See check.h and
 * docs/chaos.md ("A run that proved nothing").
 */
#include <stdarg.h>
#include <stdio.h>

#include "check.h"

/* Files one missed requirement. printf-style. */
static void idle(check_out *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void idle(check_out *out, const char *fmt, ...)
{
    if (out->idle < CHECK_MAX_IDLE) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(out->idle_why[out->idle], sizeof(out->idle_why[0]), fmt, ap);
        va_end(ap);
    }
    out->idle++;
}

/* The --faults name of kind bit b. */
static const char *kind_name(int b)
{
    static const char *const names[CHAOS_FAULT_KINDS] = {"node-kill",
                                                         "backfill-kill",
                                                         "coordinator-kill",
                                                         "stop-cont",
                                                         "partition",
                                                         "dest-kill",
                                                         "coordinator-leader-kill",
                                                         "etcd-member-kill",
                                                         "coordinator-stop",
                                                         "failover-twice",
                                                         "etcd-cut",
                                                         "dir-lost",
                                                         "oneway-cut",
                                                         "move"};
    return b >= 0 && b < CHAOS_FAULT_KINDS ? names[b] : "?";
}

void check_activity(run *r, check_out *out)
{
    out->acked_writes = out->acked_deletes = 0;
    for (int ti = 0; ti < r->m.ntables; ti++) {
        const mtable *t = &r->m.t[ti];
        for (int i = 0; i < t->nkeys; i++) {
            const mkey *k = &t->keys[i];
            for (uint32_t w = 0; w < k->nlog; w++) {
                if (k->log[w].acked) {
                    *(k->log[w].del ? &out->acked_deletes : &out->acked_writes) += 1;
                }
            }
        }
    }
    if (out->acked_writes < CHECK_MIN_WRITES) {
        idle(out, "%ld acknowledged writes, fewer than %d", out->acked_writes, CHECK_MIN_WRITES);
    }
    if (out->acked_deletes == 0) {
        idle(out, "no acknowledged user delete");
    }
    /* Faults after the workload ran out of keys hit an idle cluster. The
     * last tenth of the run is let go (workload.h: the reserve). */
    long long out_ms = atomic_load(&r->reserve_out_ms);
    if (out_ms > 0 && out_ms < (long long)r->opt->duration_s * 900) {
        idle(out,
             "the workload ran out of keys at +%.1fs of %d s (%ld frozen keys replaced, reserve "
             "used up)",
             (double)out_ms / 1000.0, r->opt->duration_s, atomic_load(&r->replaced));
    }

    /* The classes whose keys invariants 1-3 judge; uncertain keys prove
     * little and never-written ones nothing. */
    static const struct {
        int cls, inv;
    } judged[] = {{MC_DELETED, 1},   {MC_DUE_GONE, 2},       {MC_DUE_LATER, 1},
                  {MC_PROTECTED, 3}, {MC_NEVER_ELIGIBLE, 3}, {MC_NO_TTL, 1}};
    for (size_t j = 0; j < sizeof(judged) / sizeof(judged[0]); j++) {
        if (out->by_class[judged[j].cls] == 0) {
            idle(out, "no key \"%s\" for invariant %d to judge", model_class_names[judged[j].cls],
                 judged[j].inv);
        }
    }

    const repl_stats *rs = &out->repl;
    if (rs->table[0] == '\0') {
        idle(out, "the stream and indexes were not read (invariants 4 and 5)");
    } else {
        if (rs->ttl_removes == 0) {
            idle(out, "no TTL REMOVE in the stream of %s (invariant 4)", rs->table);
        }
        if (rs->records == rs->ttl_removes) {
            idle(out, "no user write in the stream of %s (invariant 4)", rs->table);
        }
        if (rs->gsi_entries == 0 || rs->lsi_entries == 0) {
            idle(out, "%ld GSI and %ld LSI entries in %s: an empty index (invariant 5)",
                 rs->gsi_entries, rs->lsi_entries, rs->table);
        }
    }

    /* Invariant 8 judges overlapping calls: reads, writes, and conditional
     * writes both taking effect and refused. */
    const lin_stats *ls = &out->lin;
    if (ls->reads < CHECK_MIN_REGISTER_CALLS || ls->writes < CHECK_MIN_REGISTER_CALLS ||
        ls->cas_ok == 0 || ls->cas_failed == 0) {
        idle(out,
             "register workload: %ld reads, %ld acknowledged writes (%ld conditional), %ld "
             "conditional writes refused; invariant 8 needs %d reads and writes each and both "
             "kinds of conditional write",
             ls->reads, ls->writes, ls->cas_ok, ls->cas_failed, CHECK_MIN_REGISTER_CALLS);
    }
    if (ls->undecided > 0) {
        idle(out,
             "the linearizability search gave up on %d of %d register histories "
             "(invariant 8 undecided there)",
             ls->undecided, ls->keys);
    }
    if (r->opt->replication > 1 && out->sets_compared == 0) {
        idle(out, "no partition's copies were compared (invariant 9)");
    }
    if (r->opt->faults == 0) {
        idle(out, "no fault asked for (--faults none): the invariants held without chaos");
    }
    for (int b = 0; b < CHAOS_FAULT_KINDS; b++) {
        if ((r->opt->faults & (1u << b)) && atomic_load(&r->kind_faults[b]) == 0) {
            idle(out, "%s asked for, but no such fault was injected", kind_name(b));
        }
    }
}
