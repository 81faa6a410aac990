/*
 * report.c: the text report of a chaos run. See report.h.
 */
#include "report.h"

#include <inttypes.h>
#include <string.h>

#include "workload.h"

void report_faults_text(unsigned f, char *buf, size_t len)
{
    snprintf(
        buf, len, "%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s", f & CHAOS_FAULT_NODE_KILL ? "node-kill," : "",
        f & CHAOS_FAULT_DEST_KILL ? "dest-kill," : "",
        f & CHAOS_FAULT_BACKFILL_KILL ? "backfill-kill," : "",
        f & CHAOS_FAULT_COORD_KILL ? "coordinator-kill," : "",
        f & CHAOS_FAULT_STOP_CONT ? "stop-cont," : "",
        f & CHAOS_FAULT_PARTITION ? "partition," : "",
        f & CHAOS_FAULT_FAILOVER_TWICE ? "failover-twice," : "",
        f & CHAOS_FAULT_ETCD_CUT ? "etcd-cut," : "", f & CHAOS_FAULT_DIR_LOST ? "dir-lost," : "",
        f & CHAOS_FAULT_ONEWAY_CUT ? "oneway-cut," : "", f & CHAOS_FAULT_MOVE ? "move," : "",
        f & CHAOS_FAULT_LEADER_KILL ? "coordinator-leader-kill," : "",
        f & CHAOS_FAULT_ETCD_KILL ? "etcd-member-kill," : "",
        f & CHAOS_FAULT_COORD_STOP ? "coordinator-stop," : "", f == 0 ? "none" : "");
    size_t n = strlen(buf);
    if (n > 0 && buf[n - 1] == ',') {
        buf[n - 1] = '\0';
    }
}

static const char *inv_names[CHAOS_INVARIANTS + 1] = {
    "",
    "acknowledged writes present (unless user-deleted or expired), deletes stay",
    "items due before the settle instant are gone (base table; indexes via 5)",
    "extended/removed TTLs honoured; old and non-number TTLs untouched",
    "stream: one record per change, one lapse.ttl REMOVE per TTL delete",
    "the GSI (and LSI) equal the projection of the base table",
    "no daemon exits but ours, clean SIGTERM, no sanitizer report",
    "(copies) no acknowledged write lost through failovers (judged under 1)",
    "per-key linearizable reads, writes and conditional writes (registers)",
    "(copies) every copy of every partition in sync and identical"};

static void print_faults_around(FILE *f, run *r, int64_t at_ms)
{
    int before = -1, shown = 0;
    for (int i = 0; i < r->flog.n; i++) {
        if (r->flog.e[i].wall_ms <= at_ms) {
            before = i;
        }
    }
    fprintf(f, "      faults before it:%s\n", before < 0 ? " none" : "");
    for (int i = before - 2 < 0 ? 0 : before - 2; i >= 0 && i <= before; i++) {
        fprintf(f, "        %+8.3fs %s\n",
                (double)(r->flog.e[i].wall_ms - r->start_wall_ms) / 1000.0, r->flog.e[i].text);
    }
    for (int i = before + 1; i < r->flog.n && shown < 3; i++, shown++) {
        fprintf(f, "      %s%+8.3fs %s\n", shown == 0 ? "after: " : "       ",
                (double)(r->flog.e[i].wall_ms - r->start_wall_ms) / 1000.0, r->flog.e[i].text);
    }
}

void report_write(FILE *f, run *r, const check_out *co, const char *run_dir, int verbose)
{
    char fl[192]; /* every fault's name fits */
    report_faults_text(r->opt->faults, fl, sizeof(fl));
    fprintf(f,
            "== lapse-chaos seed %" PRIu64
            " (profile %s, %d s, %d items, %d threads, faults %s, %u %s of each partition)\n",
            r->seed, r->opt->profile_long ? "long" : "short", r->opt->duration_s, r->opt->items,
            r->opt->threads, fl, r->opt->replication > 1 ? r->opt->replication : 1,
            r->opt->replication > 1 ? "copies" : "copy");
    fprintf(f, "run dir: %s\n", run_dir);
    fprintf(f,
            "operations: put %ld, update %ld, delete %ld, get %ld, batch put %ld, admin %ld; "
            "%ld failed or timed out (%ld keys left uncertain)\n",
            atomic_load(&r->ops[OP_PUT]), atomic_load(&r->ops[OP_UPDATE]),
            atomic_load(&r->ops[OP_DELETE]), atomic_load(&r->ops[OP_GET]),
            atomic_load(&r->ops[OP_BATCH]), atomic_load(&r->ops[OP_ADMIN]), atomic_load(&r->errors),
            atomic_load(&r->uncertain));
    long long out_ms = atomic_load(&r->reserve_out_ms);
    fprintf(f, "workload keys frozen by an uncertain call and replaced by reserve keys: %ld of %d",
            atomic_load(&r->replaced), 2 * wl_spare_keys(r->opt));
    if (out_ms > 0) {
        fprintf(f, "; the reserve ran out at +%.1fs, and the workload thinned from then\n",
                (double)out_ms / 1000.0);
    } else {
        fprintf(f, "; the workload had keys to write to the end\n");
    }
    fprintf(f, "faults injected: %d\n", atomic_load(&r->faults));
    if (verbose) {
        for (int i = 0; i < r->flog.n; i++) {
            fprintf(f, "  %+8.3fs %s\n", (double)(r->flog.e[i].wall_ms - r->start_wall_ms) / 1000.0,
                    r->flog.e[i].text);
        }
    }
    if (co->settle_ms >= 0) {
        fprintf(f, "settle: %d ms after the settle instant (+%.3fs)\n", co->settle_ms,
                (double)(co->settle_wall_ms - r->start_wall_ms) / 1000.0);
    } else {
        fprintf(f, "settle: did NOT settle before the deadline\n");
    }
    fprintf(f, "items checked: %ld written keys\n", co->items);
    for (int i = 0; i < MC_COUNT; i++) {
        if (i != MC_UNWRITTEN) {
            fprintf(f, "  %8ld %s\n", co->by_class[i], model_class_names[i]);
        }
    }
    fprintf(f, "keys never written: %ld (read too, must be absent; not counted above)\n",
            co->unwritten);
    const repl_stats *rs = &co->repl;
    if (rs->table[0] != '\0') {
        fprintf(f,
                "stream and indexes of %s: %ld stream records (%ld REMOVEs by lapse.ttl) in %d "
                "shards, %ld items, %ld GSI entries, %ld LSI entries; ",
                rs->table, rs->records, rs->ttl_removes, rs->shards, rs->base_items,
                rs->gsi_entries, rs->lsi_entries);
        if (rs->converge_ms >= 0) {
            fprintf(f, "matched the table after %d ms (%d reads)\n", rs->converge_ms, rs->attempts);
        } else {
            fprintf(f, "still differed after %d reads\n", rs->attempts);
        }
    }
    const lin_stats *ls = &co->lin;
    if (ls->keys > 0) {
        fprintf(f,
                "registers: %ld calls on %d keys: %ld reads, %ld acknowledged writes (%ld "
                "conditional), %ld conditional refused, %ld of unknown outcome; %ld search "
                "steps%s\n",
                ls->calls, ls->keys, ls->reads, ls->writes, ls->cas_ok, ls->cas_failed, ls->unknown,
                ls->steps, ls->undecided ? ", some histories UNDECIDED" : "");
    }
    fprintf(f, "invariants:\n");
    for (int i = 1; i <= CHAOS_INVARIANTS; i++) {
        const char *v = !co->checked[i] ? "not checked" : co->violations[i] == 0 ? "PASS" : "FAIL";
        fprintf(f, "  %d %-72s %s", i, inv_names[i], v);
        if (co->checked[i] && co->violations[i] > 0) {
            fprintf(f, " (%d)", co->violations[i]);
        }
        fprintf(f, "\n");
    }
    for (int i = 0; i < co->nv; i++) {
        const violation *v = &co->v[i];
        fprintf(f, "  VIOLATION of invariant %d: %s\n    expected: %s\n    found:    %s\n", v->inv,
                v->where, v->expected, v->found);
        if (v->last_op[0] != '\0') {
            fprintf(f, "    last call: %s", v->last_op);
            if (v->last_wall_ms > 0) {
                fprintf(f, ", returned at %+.3fs",
                        (double)(v->last_wall_ms - r->start_wall_ms) / 1000.0);
            }
            fprintf(f, "\n");
        }
        print_faults_around(f, r, v->last_wall_ms > 0 ? v->last_wall_ms : co->settle_wall_ms);
    }
    int total = 0;
    for (int i = 1; i <= CHAOS_INVARIANTS; i++) {
        total += co->violations[i];
    }
    if (co->nv < total) {
        fprintf(f, "  (%d more violations not shown)\n", total - co->nv);
    }
    fprintf(f,
            "activity: %ld acknowledged writes, %ld acknowledged deletes, %ld keys due and gone; "
            "faults by kind asked:",
            co->acked_writes, co->acked_deletes, co->by_class[MC_DUE_GONE]);
    for (int b = 0; b < CHAOS_FAULT_KINDS; b++) {
        if (r->opt->faults & (1u << b)) {
            char kn[160];
            report_faults_text(1u << b, kn, sizeof(kn));
            fprintf(f, " %s %d", kn, atomic_load(&r->kind_faults[b]));
        }
    }
    fprintf(f, "%s\n", r->opt->faults == 0 ? " none" : "");
    for (int i = 0; i < co->idle && i < CHECK_MAX_IDLE; i++) {
        fprintf(f, "  NOT ENOUGH: %s\n", co->idle_why[i]);
    }
    if (co->idle > 0) {
        fprintf(f, "verdict: FAIL: the run proved nothing (%d minimum%s of activity missed)%s\n",
                co->idle, co->idle == 1 ? "" : "s", total > 0 ? ", and invariants broke" : "");
    } else {
        fprintf(f, "verdict: %s\n", total == 0 ? "PASS" : "FAIL");
    }
}
