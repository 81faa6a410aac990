/*
 * check_repl.c: invariants 4 and 5 on the indexed table, waiting for the
 * stream and the GSI to converge. See check.h, check_int.h and docs/chaos.md.
 *
 * One attempt reads what the stream gained since the last attempt, scans the
 * base table, queries the GSI for every value of WL_GROUPS, and compares:
 * the GSI with the scan (check_gsi), the stream with the scan and the model
 * (check_stream.c). Only when both match does it query the LSI for every key
 * (check_lsi: a query per key, so once). Any mismatch is read again; only
 * what still mismatches at the deadline is filed.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "check_int.h"
#include "workload.h"

/* Every item of a scan of t (index and pk_json NULL) or of a query of t's
 * index with partition key value pk_json, appended to *out (caller frees
 * each and the array). Returns 0 or the first error. */
static int read_all(run *r, const mtable *t, const char *index, const char *pk_json,
                    lapse_item ***out, size_t *n, lapse_error *e)
{
    lapse_item *start = NULL;
    size_t cap = *n;
    int rv = 0;
    do {
        lapse_page *p = NULL;
        if (pk_json == NULL) {
            lapse_scan_opts so = {.exclusive_start_key = start};
            rv = lapse_scan(r->admin, t->name, &so, &p, e);
        } else {
            lapse_query_opts q = {.partition_key_json = pk_json, .exclusive_start_key = start};
            rv = lapse_query_index(r->admin, t->name, index, &q, &p, e);
        }
        if (rv != 0) {
            break;
        }
        for (size_t i = 0; i < lapse_page_count(p); i++) {
            if (*n == cap) {
                cap = cap ? cap * 2 : 64;
                if ((*out = realloc(*out, cap * sizeof(**out))) == NULL) {
                    abort();
                }
            }
            (*out)[(*n)++] = lapse_item_dup(lapse_page_item(p, i));
        }
        lapse_item_free(start);
        start = lapse_page_last_key(p) ? lapse_item_dup(lapse_page_last_key(p)) : NULL;
        lapse_page_free(p);
    } while (start != NULL);
    lapse_item_free(start);
    return rv;
}

int base_snap_read(run *r, const mtable *t, base_snap *b, lapse_error *e)
{
    lapse_item **v = NULL;
    size_t n = 0;
    memset(b, 0, sizeof(*b));
    b->n = t->nkeys;
    if ((b->item = calloc((size_t)t->nkeys + 1, sizeof(*b->item))) == NULL) {
        abort();
    }
    int rv = read_all(r, t, NULL, NULL, &v, &n, e);
    for (size_t i = 0; i < n; i++) {
        int idx = check_key_index(t, v[i]);
        b->count++;
        if (idx < 0 || b->item[idx] != NULL) {
            const char *id = lapse_item_get_s(v[i], "Id");
            snprintf(b->foreign, sizeof(b->foreign), "%s", id ? id : "(no Id)");
            lapse_item_free(v[i]);
            continue;
        }
        b->item[idx] = v[i]; /* taken */
    }
    free(v);
    return rv;
}

void base_snap_free(base_snap *b)
{
    for (int i = 0; b->item != NULL && i < b->n; i++) {
        lapse_item_free(b->item[i]);
    }
    free(b->item);
    memset(b, 0, sizeof(*b));
}

static void free_items(lapse_item **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        lapse_item_free(v[i]);
    }
    free(v);
}

/* The Grp of a base item when it puts the item in the GSI under a value
 * the checker queries (0..WL_GROUPS-1), else -1. */
static int group_of(const lapse_item *it)
{
    const char *g = it != NULL ? lapse_item_get_s(it, "Grp") : NULL;
    if (g == NULL || g[0] != 'g' || g[1] < '0' || g[1] > '9' || g[2] != '\0') {
        return -1;
    }
    return g[1] - '0' < WL_GROUPS ? g[1] - '0' : -1;
}

/* ============================== the GSI ============================== */

/* Invariant 5 for the GSI: for every value g of WL_GROUPS, the entries under
 * g are exactly the base items with Grp g, each equal to its item
 * (projection all), in ver order. At most one violation per key. */
static void check_gsi(run *r, const mtable *t, const base_snap *b, check_out *out, repl_stats *st)
{
    char *done = calloc((size_t)t->nkeys + 1, 1); /* 1: in the GSI, 2: reported */
    if (done == NULL) {
        abort();
    }
    for (int g = 0; g < WL_GROUPS; g++) {
        char pk[32], what[64], found[256], expected[512];
        lapse_item **v = NULL;
        size_t n = 0;
        lapse_error e = {0};
        snprintf(pk, sizeof(pk), "{\"S\":\"g%d\"}", g);
        int rv = read_all(r, t, WL_GSI, pk, &v, &n, &e);
        if (rv != 0) {
            snprintf(what, sizeof(what), "%s g%d", WL_GSI, g);
            check_add_key(out, 5, t, -1, what, e.message, "the GSI query to answer");
            free_items(v, n);
            continue;
        }
        st->gsi_entries += (long)n;
        double last_ver = -1;
        for (size_t i = 0; i < n; i++) {
            int idx = check_key_index(t, v[i]);
            const lapse_item *base = idx >= 0 ? b->item[idx] : NULL;
            const char *ver = lapse_item_get_n(v[i], "ver");
            double dv = ver != NULL ? strtod(ver, NULL) : -1;
            if (dv <= last_ver) {
                snprintf(what, sizeof(what), "%s g%d", WL_GSI, g);
                snprintf(found, sizeof(found), "ver %s after ver %.0f", ver ? ver : "(none)",
                         last_ver);
                check_add_key(out, 5, t, -1, what, found,
                              "entries in increasing order of the GSI's sort key ver");
            }
            last_ver = dv;
            if (base != NULL && group_of(base) == g && lapse_item_equal(v[i], base) &&
                done[idx] == 0) {
                done[idx] = 1;
                continue;
            }
            if (idx >= 0 && done[idx] == 2) {
                continue;
            }
            char got[160], want[160];
            check_brief(v[i], got, sizeof(got));
            check_brief(base, want, sizeof(want));
            snprintf(found, sizeof(found), "an entry under g%d: %s%s", g, got,
                     idx >= 0 && done[idx] == 1 ? " (a second one)" : "");
            snprintf(expected, sizeof(expected),
                     "the GSI %s to hold the projection of the table, which holds %s", WL_GSI,
                     want);
            if (idx < 0) {
                const char *id = lapse_item_get_s(v[i], "Id");
                check_add_key(out, 5, t, -1, id ? id : "(no Id)", found, expected);
            } else {
                done[idx] = 2;
                check_add_key(out, 5, t, idx, NULL, found, expected);
            }
        }
        free_items(v, n);
    }
    for (int i = 0; i < t->nkeys; i++) {
        if (done[i] == 0 && group_of(b->item[i]) >= 0) {
            char want[160], expected[256];
            check_brief(b->item[i], want, sizeof(want));
            snprintf(expected, sizeof(expected), "an entry in the GSI %s for the table's %s",
                     WL_GSI, want);
            check_add_key(out, 5, t, i, NULL, "no entry", expected);
        }
    }
    free(done);
}

/* ============================== the LSI ============================== */

/* Invariant 5 for the LSI: the LSI query of each key returns its base item
 * when the item has an S "pay" (the LSI's sort key), else nothing. */
static void check_lsi(run *r, const mtable *t, const base_snap *b, check_out *out, repl_stats *st)
{
    for (int i = 0; i < t->nkeys; i++) {
        char key[24], pk[48];
        lapse_item **v = NULL;
        size_t n = 0;
        lapse_error e = {0};
        model_key_name(i, key, sizeof(key));
        snprintf(pk, sizeof(pk), "{\"S\":\"%s\"}", key);
        int rv = read_all(r, t, WL_LSI, pk, &v, &n, &e);
        const lapse_item *base = b->item[i];
        const char *pay = base != NULL ? lapse_item_get_s(base, "pay") : NULL;
        int want = pay != NULL && pay[0] != '\0';
        st->lsi_entries += (long)n;
        if (rv != 0) {
            check_add_key(out, 5, t, i, NULL, e.message, "the LSI query to answer");
        } else if ((size_t)want != n || (want && !lapse_item_equal(v[0], base))) {
            char got[160], wanted[160], found[256], expected[256];
            check_brief(n > 0 ? v[0] : NULL, got, sizeof(got));
            check_brief(base, wanted, sizeof(wanted));
            snprintf(found, sizeof(found), "%zu LSI entries%s%s", n, n > 0 ? ", the first " : "",
                     n > 0 ? got : "");
            snprintf(expected, sizeof(expected), "the LSI %s to hold %s, as the table: %s", WL_LSI,
                     want ? "the item" : "nothing", wanted);
            check_add_key(out, 5, t, i, NULL, found, expected);
        }
        free_items(v, n);
    }
}

/* ============================== the loop ============================== */

static int total(const check_out *c)
{
    int n = 0;
    for (int i = 1; i <= CHAOS_INVARIANTS; i++) {
        n += c->violations[i];
    }
    return n;
}

static void merge(check_out *out, const check_out *from)
{
    for (int i = 1; i <= CHAOS_INVARIANTS; i++) {
        out->violations[i] += from->violations[i];
    }
    for (int i = 0; i < from->nv && out->nv < CHECK_MAX_DETAILS; i++) {
        out->v[out->nv++] = from->v[i];
    }
}

/* One attempt on t: fills *c (zeroed here) and *st. The LSI is queried
 * when everything else matched, or when this is the final attempt. */
static void attempt(run *r, const mtable *t, streamread *s, int final, check_out *c, repl_stats *st)
{
    lapse_error e = {0};
    base_snap b;
    memset(c, 0, sizeof(*c));
    memset(st, 0, sizeof(*st));
    snprintf(st->table, sizeof(st->table), "%s", t->name);
    int rv = streamread_more(r->admin, t->name, s, &e);
    if (rv != 0) {
        check_add_key(c, 4, t, -1, "(stream)", e.message, "every stream shard readable");
    }
    st->shards = (int)s->nshards;
    if ((rv = base_snap_read(r, t, &b, &e)) != 0) {
        check_add_key(c, 5, t, -1, "(scan)", e.message, "the table readable");
        base_snap_free(&b);
        return;
    }
    st->base_items = b.count;
    if (b.foreign[0] != '\0') {
        check_add_key(c, 5, t, -1, b.foreign, "in the table",
                      "only items the run wrote (Id k<i>, Sk 0), each once");
    }
    check_gsi(r, t, &b, c, st);
    check_stream(t, s, &b, c, st);
    if (total(c) == 0 || final) {
        check_lsi(r, t, &b, c, st);
    }
    base_snap_free(&b);
}

void check_repl(run *r, check_out *out, int deadline_ms)
{
    check_out *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        abort();
    }
    for (int ti = 0; ti < r->m.ntables; ti++) {
        const mtable *t = &r->m.t[ti];
        if (!t->indexed) {
            continue;
        }
        run_phase(r, "checking the stream, GSI and LSI of %s", t->name);
        out->checked[4] = out->checked[5] = 1;
        streamread s = {0};
        repl_stats st;
        int64_t start = clock_mono_now().ms, deadline = start + deadline_ms;
        int n = 0;
        for (;;) {
            int final = clock_mono_now().ms >= deadline;
            attempt(r, t, &s, final, c, &st);
            st.attempts = ++n;
            if (total(c) == 0) {
                st.converge_ms = (int)(clock_mono_now().ms - start);
                break;
            }
            if (final) {
                st.converge_ms = -1;
                flog_add(r,
                         "check: the stream and indexes of %s still differ from the table "
                         "after %d ms (%d mismatches)",
                         t->name, deadline_ms, total(c));
                merge(out, c);
                break;
            }
            run_phase(r, "waiting for the stream and GSI of %s: %d mismatches", t->name, total(c));
            clock_sleep_ms(500);
        }
        out->repl = st;
        streamread_free(&s);
    }
    free(c);
}
