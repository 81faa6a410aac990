/*
 * model.c: the chaos model. See model.h and docs/chaos.md.
 */
#include "model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

/* ============================== tables ============================== */

int model_add_table(model *m, const char *name, int nkeys, int ttl)
{
    if (m->ntables >= MODEL_MAX_TABLES) {
        return -1;
    }
    mtable *t = &m->t[m->ntables];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->ttl = ttl;
    t->nkeys = nkeys;
    t->spare_lo = nkeys;
    t->keys = calloc((size_t)(nkeys > 0 ? nkeys : 1), sizeof(mkey));
    if (t->keys == NULL) {
        return -1;
    }
    return m->ntables++;
}

void model_fini(model *m)
{
    for (int i = 0; i < m->ntables; i++) {
        for (int k = 0; m->t[i].keys != NULL && k < m->t[i].nkeys; k++) {
            free(m->t[i].keys[k].log);
        }
        free(m->t[i].keys);
        m->t[i].keys = NULL;
    }
    m->ntables = 0;
}

void model_key_name(int idx, char *buf, size_t len)
{
    snprintf(buf, len, "k%d", idx);
}

/* ============================== TTL values ============================== */

void model_gen_ttl(uint64_t *rng, int cls, int64_t now_ms, int64_t until_ms, char *json, size_t len,
                   mstate *st)
{
    int64_t now_s = now_ms / 1000;
    int64_t year = 31557600; /* 365.25 days */
    int64_t v;
    st->kind = TK_NUM;
    st->ttl_s = 0;
    json[0] = '\0';
    switch (cls) {
    case TC_PAST:
        v = now_s - rng_range(rng, 1, 900);
        break;
    case TC_DURING: {
        int64_t span = (until_ms - now_ms) / 1000;
        v = now_s + rng_range(rng, 0, span > 1 ? span : 1);
        if (rng_next(rng) % 2 == 0) {
            /* A fraction is truncated: due at v.000. */
            int frac = (int)rng_range(rng, 1, 999);
            snprintf(json, len, "{\"N\":\"%" PRId64 ".%03d\"}", v, frac);
            st->ttl_s = v;
            return;
        }
        break;
    }
    case TC_NOW:
        v = now_s - rng_range(rng, 0, 1);
        break;
    case TC_SOON:
        v = now_s + rng_range(rng, 0, 2);
        break;
    case TC_FUTURE:
        v = now_s + rng_range(rng, 86400, year);
        break;
    case TC_TOO_OLD:
        switch (rng_next(rng) % 3) {
        case 0:
            v = 0;
            break;
        case 1:
            v = -rng_range(rng, 1, 100000);
            break;
        default:
            /* Half a year or more past the guard: far from its edge. */
            v = now_s - MODEL_GUARD_S - rng_range(rng, year / 2, 30 * year);
            break;
        }
        snprintf(json, len, "{\"N\":\"%" PRId64 "\"}", v);
        st->kind = TK_OTHER; /* never expires */
        return;
    case TC_OLD_OK:
        v = now_s - rng_range(rng, year, 4 * year);
        break;
    case TC_STRING:
        snprintf(json, len, "{\"S\":\"%" PRId64 "\"}", now_s - rng_range(rng, 1, 900));
        st->kind = TK_OTHER;
        return;
    case TC_OTHER_TYPE:
        if (rng_next(rng) % 2 == 0) {
            snprintf(json, len, "{\"BOOL\":true}");
        } else {
            snprintf(json, len, "{\"L\":[{\"N\":\"%" PRId64 "\"}]}", now_s - 10);
        }
        st->kind = TK_OTHER;
        return;
    case TC_MILLIS:
        v = now_ms; /* due in tens of thousands of years */
        break;
    case TC_HUGE:
        snprintf(json, len, "{\"N\":\"99999999999999999999\"}");
        st->kind = TK_OTHER;
        return;
    default:
        st->kind = TK_NONE;
        return;
    }
    snprintf(json, len, "{\"N\":\"%" PRId64 "\"}", v);
    st->ttl_s = v;
}

int model_expires(const mtable *t, const mstate *s, int64_t now_ms, int64_t *due_ms)
{
    if (!t->ttl || !s->present || s->kind != TK_NUM) {
        return 0;
    }
    if (s->ttl_s < now_ms / 1000 - MODEL_GUARD_S) {
        return 0; /* too old: ignored */
    }
    *due_ms = s->ttl_s * 1000;
    return 1;
}

/* ============================== recording calls ============================== */

static int same_state(const mstate *a, const mstate *b)
{
    if (a->present != b->present) {
        return 0;
    }
    if (!a->present) {
        return 1;
    }
    return a->kind == b->kind && a->ttl_s == b->ttl_s && a->ver == b->ver;
}

static void add_cand(mstate *set, int *n, const mstate *s)
{
    for (int i = 0; i < *n; i++) {
        if (same_state(&set[i], s)) {
            set[i].extended |= s->extended;
            return;
        }
    }
    if (*n < MODEL_CANDS) {
        set[(*n)++] = *s;
    }
}

static void log_call(mkey *k, const mstate *next, model_mode mode, int rv, int resent)
{
    if (k->nlog == k->caplog) {
        uint32_t cap = k->caplog ? k->caplog * 2 : 4;
        mwrite *v = realloc(k->log, cap * sizeof(*v));
        if (v == NULL) {
            abort();
        }
        k->log = v;
        k->caplog = cap;
    }
    mwrite *w = &k->log[k->nlog++];
    w->del = mode == MM_REPLACE && !next->present;
    w->ver = w->del ? 0 : next->ver;
    w->acked = rv == 0;
    w->resent = (uint8_t)(resent != 0);
}

void model_record(const mtable *t, mkey *k, const mstate *next, model_mode mode, int rv, int resent,
                  int64_t ack_wall_ms, const char *what)
{
    log_call(k, next, mode, rv, resent);
    mstate out[MODEL_CANDS];
    int n = 0;
    if (mode == MM_REPLACE) {
        add_cand(out, &n, next);
    } else {
        /* A payload update keeps the TTL of the item it finds; if the item
         * was TTL-deleted first, the update re-creates it without one. */
        int nold = k->ncand;
        mstate absent = {0};
        const mstate *old = nold > 0 ? k->cand : &absent;
        for (int i = 0; i < (nold > 0 ? nold : 1); i++) {
            mstate s = old[i];
            int64_t due;
            if (s.present) {
                mstate kept = s;
                kept.ver = next->ver;
                add_cand(out, &n, &kept);
            }
            if (!s.present || (model_expires(t, &s, ack_wall_ms, &due) &&
                               (rv != 0 || due <= ack_wall_ms + 1000))) {
                mstate fresh = {0};
                fresh.present = 1;
                fresh.kind = TK_NONE;
                fresh.ver = next->ver;
                add_cand(out, &n, &fresh);
            }
        }
    }
    if (rv != 0) {
        /* Uncertain: it may not have applied at all, or apply later. */
        mstate absent = {0};
        if (k->ncand == 0) {
            add_cand(out, &n, &absent);
        }
        for (int i = 0; i < k->ncand; i++) {
            add_cand(out, &n, &k->cand[i]);
        }
        k->frozen = 1;
    }
    memcpy(k->cand, out, sizeof(mstate) * (size_t)n);
    k->ncand = (uint8_t)n;
    if (n >= MODEL_FREEZE_AT) {
        k->frozen = 1;
    }
    k->nops++;
    k->last_wall_ms = ack_wall_ms;
    snprintf(k->last_op, sizeof(k->last_op), "%s%s", what, rv != 0 ? " (uncertain)" : "");
}

/* ============================== judging ============================== */

static int describe(const mtable *t, const mstate *s, int64_t settle_ms, int64_t read_end_ms,
                    char *buf, size_t len)
{
    int64_t due;
    if (!s->present) {
        return snprintf(buf, len, "absent");
    }
    if (model_expires(t, s, settle_ms, &due)) {
        const char *what = due < settle_ms             ? "gone"
                           : due <= read_end_ms + 1500 ? "present or gone"
                                                       : "present";
        return snprintf(buf, len, "%s (ver %" PRIu64 ", TTL due %+.3f s from the settle instant%s)",
                        what, s->ver, (double)(due - settle_ms) / 1000.0,
                        s->extended ? ", extended while due" : "");
    }
    const char *why = s->kind == TK_NONE ? "no TTL"
                      : s->kind == TK_OTHER
                          ? "TTL never eligible (non-number, too old or out of range)"
                      : !t->ttl ? "TTL not enabled on the table"
                                : "TTL too old";
    return snprintf(buf, len, "present with ver %" PRIu64 " (%s%s)", s->ver, why,
                    s->extended ? ", TTL extended or removed before it could be deleted" : "");
}

int model_judge(const mtable *t, const mkey *k, int found, uint64_t found_ver, int64_t settle_ms,
                int64_t read_end_ms, char *expected, size_t len)
{
    mstate absent = {0};
    int n = k->ncand > 0 ? k->ncand : 1;
    const mstate *c = k->ncand > 0 ? k->cand : &absent;
    for (int i = 0; i < n; i++) {
        int64_t due;
        int ok;
        if (!c[i].present) {
            ok = !found;
        } else if (model_expires(t, &c[i], settle_ms, &due)) {
            if (due < settle_ms) {
                ok = !found;
            } else if (due <= read_end_ms + 1500) {
                ok = !found || found_ver == c[i].ver;
            } else {
                ok = found && found_ver == c[i].ver;
            }
        } else {
            ok = found && found_ver == c[i].ver;
        }
        if (ok) {
            return 0;
        }
    }
    /* Broken: name the newest candidate (the last call's outcome). */
    size_t off = 0;
    for (int i = 0; i < n && off < len; i++) {
        if (i > 0) {
            off += (size_t)snprintf(expected + off, len - off, " or ");
        }
        if (off < len) {
            off += (size_t)describe(t, &c[i], settle_ms, read_end_ms, expected + off, len - off);
        }
    }
    const mstate *last = &c[0];
    int64_t due;
    if (!last->present) {
        return 1; /* an acknowledged delete came back */
    }
    int expires = model_expires(t, last, settle_ms, &due);
    if (expires && due < settle_ms && found) {
        return 2; /* due, still there */
    }
    if (last->extended) {
        return 3; /* its TTL was extended or removed while due, yet gone or changed */
    }
    if (expires) {
        return 1; /* gone before its due instant, or changed */
    }
    if (last->kind == TK_OTHER || (t->ttl && last->kind == TK_NUM)) {
        return 3; /* an ineligible TTL, yet gone or changed */
    }
    return 1;
}

int model_must_be_gone(const mtable *t, const mkey *k, int64_t settle_ms)
{
    if (k->ncand == 0) {
        return 0;
    }
    for (int i = 0; i < k->ncand; i++) {
        int64_t due;
        if (k->cand[i].present &&
            !(model_expires(t, &k->cand[i], settle_ms, &due) && due < settle_ms)) {
            return 0;
        }
    }
    return 1;
}

int model_stable_present(const mtable *t, const mkey *k, int64_t now_ms)
{
    int64_t due;
    return k->ncand == 1 && !k->frozen && k->cand[0].present &&
           (!model_expires(t, &k->cand[0], now_ms, &due) || due > now_ms + 86400000LL);
}

const char *const model_class_names[MC_COUNT] = {
    "never written (absent)",
    "deleted by the user (absent)",
    "TTL due before the settle instant (gone)",
    "TTL due later (present)",
    "TTL extended or removed while due (present)",
    "TTL never eligible: non-number, too old, out of range (present)",
    "no TTL, or TTL off on the table (present)",
    "uncertain: more than one allowed outcome",
};

int model_classify(const mtable *t, const mkey *k, int64_t settle_ms)
{
    int64_t due;
    if (k->ncand == 0) {
        return MC_UNWRITTEN;
    }
    if (k->ncand > 1) {
        return MC_UNCERTAIN;
    }
    const mstate *s = &k->cand[0];
    if (!s->present) {
        return MC_DELETED;
    }
    if (s->extended) {
        return MC_PROTECTED;
    }
    if (model_expires(t, s, settle_ms, &due)) {
        return due < settle_ms ? MC_DUE_GONE : MC_DUE_LATER;
    }
    if (s->kind == TK_OTHER || (t->ttl && s->kind == TK_NUM)) {
        return MC_NEVER_ELIGIBLE;
    }
    return MC_NO_TTL;
}
