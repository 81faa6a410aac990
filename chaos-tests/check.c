/*
 * check.c: settle and invariants. See check.h and docs/chaos.md.
 */
#include "check.h"

#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../common/clock.h"
#include "check_int.h"
#include "admin.h"
#include "procs.h"
#include "workload.h"

void check_add(check_out *out, int inv, const char *where, const char *last_op,
               int64_t last_wall_ms, const char *found, const char *fmt, ...)
{
    out->violations[inv]++;
    if (out->nv >= CHECK_MAX_DETAILS) {
        return;
    }
    violation *v = &out->v[out->nv++];
    v->inv = inv;
    snprintf(v->where, sizeof(v->where), "%s", where);
    snprintf(v->last_op, sizeof(v->last_op), "%s", last_op ? last_op : "");
    snprintf(v->found, sizeof(v->found), "%s", found);
    v->last_wall_ms = last_wall_ms;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->expected, sizeof(v->expected), fmt, ap);
    va_end(ap);
}

void check_add_key(check_out *out, int inv, const mtable *t, int idx, const char *what,
                   const char *found, const char *expected)
{
    char where[96], key[24];
    if (idx >= 0) {
        model_key_name(idx, key, sizeof(key));
        snprintf(where, sizeof(where), "%.47s/%.40s", t->name, key);
        check_add(out, inv, where, t->keys[idx].last_op, t->keys[idx].last_wall_ms, found, "%s",
                  expected);
    } else {
        snprintf(where, sizeof(where), "%.47s/%.40s", t->name, what);
        check_add(out, inv, where, NULL, 0, found, "%s", expected);
    }
}

int check_key_index(const mtable *t, const lapse_item *it)
{
    const char *id = lapse_item_get_s(it, "Id");
    char *end = NULL;
    if (id == NULL || id[0] != 'k' || id[1] < '0' || id[1] > '9') {
        return -1;
    }
    long idx = strtol(id + 1, &end, 10);
    if (*end != '\0' || idx >= t->nkeys) {
        return -1;
    }
    if (t->indexed) {
        const char *sk = lapse_item_get_n(it, WL_SK);
        if (sk == NULL || strcmp(sk, "0") != 0) {
            return -1;
        }
    }
    return (int)idx;
}

void check_brief(const lapse_item *it, char *buf, size_t len)
{
    if (it == NULL) {
        snprintf(buf, len, "absent");
        return;
    }
    const char *ver = lapse_item_get_n(it, "ver"), *grp = lapse_item_get_s(it, "Grp");
    char *ttl = lapse_item_get_json(it, MODEL_TTL_ATTR);
    snprintf(buf, len, "ver %s, Grp %s, %s %.60s", ver ? ver : "(none)", grp ? grp : "(none)",
             MODEL_TTL_ATTR, ttl ? ttl : "(none)");
    lapse_free(ttl);
}

/* ============================== settle ============================== */

/* The TimeToLiveStatus of table into st, or "?" when it cannot be read. */
static void ttl_status(run *r, const char *table, char *st, size_t len)
{
    char *js = NULL;
    lapse_error e;
    snprintf(st, len, "?");
    if (lapse_describe_ttl(r->admin, table, &js, &e) != 0) {
        return;
    }
    json_error_t jerr;
    json_t *root = json_loads(js, 0, &jerr);
    const char *s = json_string_value(
        json_object_get(json_object_get(root, "TimeToLiveDescription"), "TimeToLiveStatus"));
    if (s != NULL) {
        snprintf(st, len, "%s", s);
    }
    json_decref(root);
    lapse_free(js);
}

/* Reads keys [0, n) of table ti in batches: found[i], ver[i]; ttl[i] (may
 * be NULL) gets the TTL attribute's JSON (caller frees each). Returns 0 or
 * the error of a batch that failed for good. */
static int read_keys(run *r, int ti, const int *idx, int n, char *found, uint64_t *ver, char **ttl)
{
    mtable *t = &r->m.t[ti];
    lapse_item *keys[LAPSE_BATCH_GET_MAX], *got[LAPSE_BATCH_GET_MAX];
    for (int at = 0; at < n; at += LAPSE_BATCH_GET_MAX) {
        int m = n - at < LAPSE_BATCH_GET_MAX ? n - at : LAPSE_BATCH_GET_MAX;
        for (int i = 0; i < m; i++) {
            keys[i] = wl_key(t, idx[at + i]);
        }
        int rv = 0;
        for (int attempt = 0; attempt < 10; attempt++) {
            lapse_error e;
            rv = lapse_batch_get(r->admin, t->name, keys, (size_t)m, got, &e);
            if (rv == 0) {
                break;
            }
            clock_sleep_ms(300);
        }
        for (int i = 0; i < m; i++) {
            lapse_item_free(keys[i]);
        }
        if (rv != 0) {
            return rv;
        }
        for (int i = 0; i < m; i++) {
            found[at + i] = got[i] != NULL;
            ver[at + i] = 0;
            if (ttl != NULL) {
                ttl[at + i] = NULL;
            }
            if (got[i] != NULL) {
                const char *v = lapse_item_get_n(got[i], "ver");
                ver[at + i] = v ? strtoull(v, NULL, 10) : 0;
                if (ttl != NULL) {
                    ttl[at + i] = lapse_item_get_json(got[i], MODEL_TTL_ATTR);
                }
                lapse_item_free(got[i]);
            }
        }
    }
    return 0;
}

/* How many keys that must be gone by settle_ms are still present; -1 when
 * a read failed. */
static long due_left(run *r, int64_t settle_ms)
{
    long left = 0;
    for (int ti = 0; ti < r->m.ntables; ti++) {
        mtable *t = &r->m.t[ti];
        int *idx = malloc(sizeof(int) * (size_t)t->nkeys);
        char *found = malloc((size_t)t->nkeys + 1);
        uint64_t *ver = malloc(sizeof(uint64_t) * (size_t)t->nkeys + 1);
        int n = 0;
        if (idx == NULL || found == NULL || ver == NULL) {
            abort();
        }
        for (int i = 0; i < t->nkeys; i++) {
            mkey *k = &t->keys[i];
            int any_present = 0;
            for (int c = 0; c < k->ncand; c++) {
                any_present |= k->cand[c].present;
            }
            if (any_present && model_must_be_gone(t, k, settle_ms)) {
                idx[n++] = i; /* due items only, not plain user deletes */
            }
        }
        int rv = read_keys(r, ti, idx, n, found, ver, NULL);
        for (int i = 0; rv == 0 && i < n; i++) {
            left += found[i];
        }
        free(idx);
        free(found);
        free(ver);
        if (rv != 0) {
            return -1;
        }
    }
    return left;
}

void check_settle(run *r, int deadline_ms, check_out *out)
{
    run_phase(r, "settling: restoring every process");
    if (procs_restore(r) != 0) {
        flog_add(r, "settle: not every node UP 30 s after the restore");
    }
    for (int ti = 0; ti < r->m.ntables; ti++) {
        if (r->m.t[ti].ttl && !r->m.t[ti].ttl_resolved &&
            admin_enable_ttl(r, r->m.t[ti].name, 20000) != 0) {
            flog_add(r, "settle: TTL enable on %s still failing", r->m.t[ti].name);
        }
    }
    int64_t settle = clock_wall_now().ms;
    int64_t deadline = clock_mono_now().ms + deadline_ms;
    out->settle_wall_ms = settle;
    out->settle_ms = -1;
    char why[160] = "";
    while (clock_mono_now().ms < deadline) {
        procs_check_crashes(r);
        int ok = cluster_wait_up(r->cl, cluster_nodes(r->cl), 1000) == 0;
        if (!ok) {
            snprintf(why, sizeof(why), "not every node UP");
        }
        for (int ti = 0; ok && ti < r->m.ntables; ti++) {
            char st[32];
            if (!r->m.t[ti].ttl) {
                continue;
            }
            ttl_status(r, r->m.t[ti].name, st, sizeof(st));
            if (strcmp(st, "ENABLED") != 0) {
                snprintf(why, sizeof(why), "TTL status of %s is %s", r->m.t[ti].name, st);
                ok = 0;
            }
        }
        long left = ok ? due_left(r, settle) : -1;
        if (ok && left != 0) {
            snprintf(why, sizeof(why), "%ld items due before the settle instant still present",
                     left);
            ok = 0;
        }
        run_phase(r, "settling: %s", ok ? "done" : why);
        if (ok) {
            out->settle_ms = (int)(clock_wall_now().ms - settle);
            return;
        }
        clock_sleep_ms(250);
    }
    flog_add(r, "settle: deadline of %d ms passed (%s)", deadline_ms, why);
    /* A TTL table that never turned ENABLED is reported under invariant 2. */
    for (int ti = 0; ti < r->m.ntables; ti++) {
        char st[32];
        if (r->m.t[ti].ttl) {
            ttl_status(r, r->m.t[ti].name, st, sizeof(st));
            if (strcmp(st, "ENABLED") != 0) {
                check_add(out, 2, r->m.t[ti].name, NULL, 0, st,
                          "TTL status ENABLED within %d ms of the settle instant", deadline_ms);
            }
        }
    }
}

/* ============================== items ============================== */

void check_items(run *r, check_out *out)
{
    run_phase(r, "checking items");
    out->checked[1] = out->checked[2] = out->checked[3] = 1;
    for (int ti = 0; ti < r->m.ntables; ti++) {
        mtable *t = &r->m.t[ti];
        int n = t->nkeys;
        int *idx = malloc(sizeof(int) * (size_t)n);
        char *found = malloc((size_t)n + 1);
        uint64_t *ver = malloc(sizeof(uint64_t) * (size_t)n + 1);
        char **ttl = calloc((size_t)n + 1, sizeof(char *));
        if (idx == NULL || found == NULL || ver == NULL || ttl == NULL) {
            abort();
        }
        for (int i = 0; i < n; i++) {
            idx[i] = i;
        }
        int rv = read_keys(r, ti, idx, n, found, ver, ttl);
        int64_t read_end = clock_wall_now().ms;
        if (rv != 0) {
            check_add(out, 1, t->name, NULL, 0, lapse_strerror(rv),
                      "every key readable after the settle");
        }
        for (int i = 0; rv == 0 && i < n; i++) {
            mkey *k = &t->keys[i];
            char expected[512], where[96], what[256];
            int cls = model_classify(t, k, out->settle_wall_ms);
            *(cls == MC_UNWRITTEN ? &out->unwritten : &out->items) += 1;
            out->by_class[cls]++;
            int inv = model_judge(t, k, found[i], ver[i], out->settle_wall_ms, read_end, expected,
                                  sizeof(expected));
            if (inv == 0) {
                continue;
            }
            model_key_name(i, what, sizeof(what));
            snprintf(where, sizeof(where), "%.47s/%.40s", t->name, what);
            if (found[i]) {
                snprintf(what, sizeof(what), "present with ver %" PRIu64 ", %s %s", ver[i],
                         MODEL_TTL_ATTR, ttl[i] ? ttl[i] : "absent");
            } else {
                snprintf(what, sizeof(what), "absent");
            }
            check_add(out, inv, where, k->last_op, k->last_wall_ms, what, "%s", expected);
        }
        for (int i = 0; i < n; i++) {
            lapse_free(ttl[i]);
        }
        free(idx);
        free(found);
        free(ver);
        free(ttl);
    }

    /* Tables created while the coordinator was killed. */
    for (int i = 0; i < r->m.ncreated; i++) {
        mcreated *mc = &r->m.created[i];
        char *js = NULL;
        lapse_error e = {0};
        int rv = lapse_describe_table(r->admin, mc->name, &js, &e);
        lapse_free(js);
        if (mc->acked && mc->recreated) {
            check_add(out, 1, mc->name, "create-table (acknowledged)", 0,
                      "a retry after the coordinator restart created it anew",
                      "the acknowledged CreateTable to survive the coordinator's kill -9");
        }
        if (rv != 0) {
            check_add(out, 1, mc->name, "create-table", 0, lapse_strerror(rv),
                      "the table to exist (CreateTable %s, then retried)",
                      mc->acked ? "acknowledged" : "uncertain");
            continue;
        }
        /* And usable: a write and a read through its partitions. */
        lapse_item *it = lapse_item_new(), *got = NULL;
        lapse_item_set_s(it, "Id", "probe");
        rv = lapse_put(r->admin, mc->name, it, NULL, &e);
        if (rv == 0) {
            rv = lapse_get(r->admin, mc->name, it, &got, &e);
        }
        if (rv != 0 || got == NULL) {
            check_add(out, 1, mc->name, "create-table", 0,
                      rv != 0 ? e.message : "probe absent after its put",
                      "a put then get of a probe item to work");
        }
        lapse_item_free(got);
        lapse_item_free(it);
    }
}

/* ============================== daemons ============================== */

/* The first (last: the last) line of the log at path that contains one
 * of marks[] (NULL-terminated), without its newline and cut to fit, in
 * line. Returns 1 if there is one. */
static int log_line_with(const char *path, const char *const *marks, int last, char *line,
                         size_t len)
{
    FILE *f = path != NULL ? fopen(path, "r") : NULL;
    char buf[1024];
    int found = 0;
    while (f != NULL && (last || !found) && fgets(buf, sizeof(buf), f) != NULL) {
        for (int i = 0; marks[i] != NULL; i++) {
            if (strstr(buf, marks[i]) != NULL) {
                size_t n = strcspn(buf, "\n");
                n = n < len - 1 ? n : len - 1;
                memcpy(line, buf, n);
                line[n] = '\0';
                found = 1;
                break;
            }
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return found;
}

void check_daemons(run *r, check_out *out, void (*before_sigterm)(run *r))
{
    run_phase(r, "stopping the cluster");
    out->checked[6] = 1;
    procs_check_crashes(r);
    if (atomic_load(&r->crashes) > 0) {
        char found[64];
        snprintf(found, sizeof(found), "%d exit(s) we did not cause", atomic_load(&r->crashes));
        check_add(out, 6, "cluster", NULL, 0, found,
                  "no daemon exits except by our kills (see CRASH in the fault log)");
    }
    if (before_sigterm != NULL) {
        before_sigterm(r);
    }
    /* Nodes first, so none logs the coordinators' disappearance; then the
     * coordinators (process 0, and after the nodes on etcd). */
    int nodes = cluster_nodes(r->cl), nprocs = nodes + cluster_coordinators(r->cl);
    for (int k = 0; k < nprocs; k++) {
        int i = k < nodes ? nodes - k : k == nodes ? 0 : k;
        char who[32];
        if (i == 0 || i > nodes) {
            snprintf(who, sizeof(who), "coordinator %d", i == 0 ? 1 : i - nodes + 1);
        } else {
            snprintf(who, sizeof(who), "node %d", i);
        }
        if (cluster_pid(r->cl, i) == 0) {
            continue;
        }
        cluster_kill(r->cl, i, SIGTERM);
        int st = cluster_exit_status(r->cl, i);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            /* A node too slow to stop logs the step it is in (node/main.c,
             * shutdown_watchdog): the report names it, as CI keeps no logs. */
            static const char *const slow_mark[] = {"still shutting down", NULL};
            char found[256], slow[300] = "";
            const char *step =
                log_line_with(cluster_log_path(r->cl, i), slow_mark, 1, slow, sizeof(slow))
                    ? strstr(slow, slow_mark[0])
                    : NULL;
            snprintf(found, sizeof(found), "%s %d%s%.150s",
                     WIFSIGNALED(st) ? "signal" : "exit status",
                     WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
                     step != NULL ? "; its log: " : "", step != NULL ? step : "");
            check_add(out, 6, who, NULL, 0, found, "a clean exit (status 0) on SIGTERM");
        }
    }
    static const char *const sanitizer_marks[] = {
        "ERROR: AddressSanitizer",  "ERROR: LeakSanitizer",       "runtime error:",
        "WARNING: ThreadSanitizer", "UndefinedBehaviorSanitizer", NULL};
    for (int i = 0; i < nprocs; i++) {
        char line[291];
        const char *path = cluster_log_path(r->cl, i);
        if (log_line_with(path, sanitizer_marks, 0, line, sizeof(line))) {
            check_add(out, 6, path, NULL, 0, line, "no sanitizer report in the log");
        }
    }
}
