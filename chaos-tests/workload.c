/*
 * workload.c: the chaos workload. See workload.h.
 */
#include "workload.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/item.h"
#include "../placement/hash.h"

int wl_random_class(uint64_t *rng)
{
    static const int weights[TC_COUNT] = {
        [TC_PAST] = 14,   [TC_DURING] = 20, [TC_SOON] = 10,  [TC_FUTURE] = 14,
        [TC_TOO_OLD] = 6, [TC_OLD_OK] = 6,  [TC_STRING] = 6, [TC_OTHER_TYPE] = 4,
        [TC_MILLIS] = 4,  [TC_HUGE] = 2,    [TC_NONE] = 14,  [TC_NOW] = 0,
    };
    int total = 0;
    for (int i = 0; i < TC_COUNT; i++) {
        total += weights[i];
    }
    int x = (int)rng_range(rng, 0, total - 1);
    for (int i = 0; i < TC_COUNT; i++) {
        if (x < weights[i]) {
            return i;
        }
        x -= weights[i];
    }
    return TC_NONE;
}

/* Whether some candidate of k is expiring and due by now + 2 s: an update
 * that extends or removes its TTL races the scanner or beats it. */
static int nearly_due(const mtable *t, const mkey *k, int64_t now)
{
    for (int i = 0; i < k->ncand; i++) {
        int64_t due;
        if (model_expires(t, &k->cand[i], now, &due) && due <= now + 2000) {
            return 1;
        }
    }
    return 0;
}

void wl_table_def(const mtable *t, lapse_table_def *d)
{
    static const lapse_index_def lsi[] = {
        {.name = WL_LSI, .sort_key = "pay", .sort_key_type = 'S'}};
    static const lapse_index_def gsi[] = {{.name = WL_GSI,
                                           .partition_key = "Grp",
                                           .partition_key_type = 'S',
                                           .sort_key = "ver",
                                           .sort_key_type = 'N',
                                           .projection = LAPSE_PROJECT_ALL,
                                           .partitions = WL_GSI_PARTITIONS}};
    memset(d, 0, sizeof(*d));
    d->name = t->name;
    d->partition_key = "Id";
    d->partition_key_type = 'S';
    d->partitions = WL_PARTITIONS;
    if (t->indexed) {
        d->sort_key = WL_SK;
        d->sort_key_type = 'N';
        d->lsi = lsi;
        d->nlsi = 1;
        d->gsi = gsi;
        d->ngsi = 1;
        d->stream = 1;
    }
}

static lapse_item *parse_item(const char *json)
{
    lapse_item *it = NULL;
    lapse_error e;
    if (lapse_item_from_json(&it, json, &e) != 0) {
        fprintf(stderr, "chaos: bad item JSON %s: %s\n", json, e.message);
        abort(); /* a harness bug, not a Lapse one */
    }
    return it;
}

/* The key attributes of idx in t, as JSON members (no braces). */
static void key_json(const mtable *t, int idx, char *buf, size_t len)
{
    char key[24];
    model_key_name(idx, key, sizeof(key));
    snprintf(buf, len, "\"Id\":{\"S\":\"%s\"}%s", key,
             t->indexed ? ",\"" WL_SK "\":{\"N\":\"0\"}" : "");
}

lapse_item *wl_key(const mtable *t, int idx)
{
    char k[96], json[128];
    key_json(t, idx, k, sizeof(k));
    snprintf(json, sizeof(json), "{%s}", k);
    return parse_item(json);
}

lapse_item *wl_item(const mtable *t, int idx, uint64_t ver, const char *ttl_json, int grp)
{
    char k[96], g[48] = "", json[512];
    key_json(t, idx, k, sizeof(k));
    if (grp >= 0 && grp < WL_GROUPS) {
        snprintf(g, sizeof(g), ",\"Grp\":{\"S\":\"g%d\"}", grp);
    }
    snprintf(json, sizeof(json),
             "{%s,\"ver\":{\"N\":\"%" PRIu64 "\"},\"pay\":{\"S\":\"payload-%" PRIu64 "\"}%s%s%s}",
             k, ver, ver, g, ttl_json[0] ? ",\"" MODEL_TTL_ATTR "\":" : "", ttl_json);
    return parse_item(json);
}

uint32_t wl_partition(const char *id)
{
    attr_value v;
    uint32_t part = 0;
    if (item_value_init_bytes(&v, ATTR_S, id, strlen(id)) != 0) {
        abort();
    }
    hash_partition(&v, WL_PARTITIONS, &part);
    item_value_fini(&v);
    return part;
}

/* A Grp for a new item: one of the WL_GROUPS values, or none (-1) a
 * quarter of the time. */
static int draw_group(uint64_t *rng)
{
    int g = (int)rng_range(rng, 0, WL_GROUPS + 1);
    return g < WL_GROUPS ? g : -1;
}

static void count(run *r, int kind, int rv)
{
    atomic_fetch_add(&r->ops[kind], 1);
    if (rv != 0) {
        atomic_fetch_add(&r->errors, 1);
    }
}

int wl_call(run *r, lapse_client *c, int ti, int idx, wl_kind kind, int cls, uint64_t *rng)
{
    mtable *t = &r->m.t[ti];
    mkey *k = &t->keys[idx];
    char ttl[128] = "", what[112];
    if (kind == WK_GET) {
        lapse_item *kit = wl_key(t, idx), *got = NULL;
        lapse_error e;
        int rv = lapse_get(c, t->name, kit, &got, &e);
        lapse_item_free(got);
        lapse_item_free(kit);
        count(r, OP_GET, rv);
        return rv;
    }
    if (k->frozen) {
        return -1;
    }
    int64_t now = clock_wall_now().ms;
    mstate next = {0};
    next.ver = run_ver(r);
    next.present = kind != WK_DELETE;
    model_mode mode = MM_REPLACE;
    lapse_error e = {0};
    int rv;
    if (kind == WK_PUT) {
        model_gen_ttl(rng, cls, now, r->end_wall_ms, ttl, sizeof(ttl), &next);
        lapse_item *it = wl_item(t, idx, next.ver, ttl, draw_group(rng));
        rv = lapse_put(c, t->name, it, NULL, &e);
        lapse_item_free(it);
        snprintf(what, sizeof(what), "put ver %" PRIu64 " TTL %.48s", next.ver,
                 ttl[0] ? ttl : "none");
        count(r, OP_PUT, rv);
    } else if (kind == WK_DELETE) {
        lapse_item *kit = wl_key(t, idx);
        rv = lapse_delete(c, t->name, kit, NULL, &e);
        lapse_item_free(kit);
        snprintf(what, sizeof(what), "delete");
        count(r, OP_DELETE, rv);
    } else {
        lapse_update *u = lapse_update_new();
        char ver[48];
        snprintf(ver, sizeof(ver), "{\"N\":\"%" PRIu64 "\"}", next.ver);
        if (u == NULL || lapse_update_set(u, "ver", ver, &e) != 0) {
            abort();
        }
        if (kind == WK_UPD_TTL) {
            model_gen_ttl(rng, cls, now, r->end_wall_ms, ttl, sizeof(ttl), &next);
            if (ttl[0] != '\0') {
                if (lapse_update_set(u, MODEL_TTL_ATTR, ttl, &e) != 0) {
                    abort();
                }
            } else {
                lapse_update_remove(u, MODEL_TTL_ATTR);
            }
            next.extended = nearly_due(t, k, now) && cls != TC_PAST && cls != TC_NOW;
            snprintf(what, sizeof(what), "update ver %" PRIu64 " set TTL %.48s", next.ver,
                     ttl[0] ? ttl : "none");
        } else if (kind == WK_UPD_RM) {
            lapse_update_remove(u, MODEL_TTL_ATTR);
            next.kind = TK_NONE;
            next.extended = nearly_due(t, k, now);
            snprintf(what, sizeof(what), "update ver %" PRIu64 " remove TTL", next.ver);
        } else {
            char pay[64];
            snprintf(pay, sizeof(pay), "{\"S\":\"touched-%" PRIu64 "\"}", next.ver);
            lapse_update_set(u, "pay", pay, &e);
            /* A third of them move the item to another GSI partition key
             * or out of the GSI (the TTL stays as it is). */
            int g = (int)rng_range(rng, 0, 5);
            char grp[48] = "";
            if (g < 2) {
                snprintf(grp, sizeof(grp), "{\"S\":\"g%d\"}",
                         (int)rng_range(rng, 0, WL_GROUPS - 1));
                lapse_update_set(u, "Grp", grp, &e);
            } else if (g == 2) {
                lapse_update_remove(u, "Grp");
            }
            mode = MM_PAYLOAD;
            snprintf(what, sizeof(what), "update ver %" PRIu64 " payload only%s%s", next.ver,
                     g < 2    ? ", Grp "
                     : g == 2 ? ", Grp removed"
                              : "",
                     grp);
        }
        lapse_item *kit = wl_key(t, idx);
        rv = lapse_update_item(c, t->name, kit, u, NULL, NULL, &e);
        lapse_item_free(kit);
        lapse_update_free(u);
        count(r, OP_UPDATE, rv);
    }
    model_record(t, k, &next, mode, rv, kind == WK_PUT || kind == WK_DELETE, clock_wall_now().ms,
                 what);
    if (rv != 0) {
        atomic_fetch_add(&r->uncertain, 1);
    }
    return rv;
}

int wl_batch_put(run *r, lapse_client *c, int ti, const int *idx, int n, int64_t due_s,
                 uint64_t *rng)
{
    mtable *t = &r->m.t[ti];
    lapse_item **items = calloc(LAPSE_BATCH_MAX, sizeof(*items));
    int *which = calloc(LAPSE_BATCH_MAX, sizeof(*which));
    mstate *next = calloc(LAPSE_BATCH_MAX, sizeof(*next));
    char(*whats)[112] = calloc(LAPSE_BATCH_MAX, sizeof(*whats));
    int first_rv = 0;
    if (items == NULL || which == NULL || next == NULL || whats == NULL) {
        abort();
    }
    for (int at = 0; at < n;) {
        int m = 0;
        int64_t now = clock_wall_now().ms;
        for (; at < n && m < LAPSE_BATCH_MAX; at++) {
            mkey *k = &t->keys[idx[at]];
            if (k->frozen) {
                continue;
            }
            char ttl[128];
            mstate s = {0};
            s.present = 1;
            s.ver = run_ver(r);
            if (due_s > 0) {
                snprintf(ttl, sizeof(ttl), "{\"N\":\"%" PRId64 "\"}", due_s);
                s.kind = TK_NUM;
                s.ttl_s = due_s;
            } else {
                model_gen_ttl(rng, wl_random_class(rng), now, r->end_wall_ms, ttl, sizeof(ttl), &s);
            }
            items[m] = wl_item(t, idx[at], s.ver, ttl, draw_group(rng));
            snprintf(whats[m], sizeof(whats[m]), "batch put ver %" PRIu64 " TTL %.48s", s.ver,
                     ttl[0] ? ttl : "none");
            which[m] = idx[at];
            next[m] = s;
            m++;
        }
        if (m == 0) {
            break;
        }
        lapse_error e = {0};
        int rv = lapse_batch_write(c, t->name, items, (size_t)m, NULL, 0, &e);
        count(r, OP_BATCH, rv);
        int64_t ack = clock_wall_now().ms;
        for (int i = 0; i < m; i++) {
            model_record(t, &t->keys[which[i]], &next[i], MM_REPLACE, rv, 1, ack, whats[i]);
            lapse_item_free(items[i]);
        }
        if (rv != 0) {
            atomic_fetch_add(&r->uncertain, m);
            if (first_rv == 0) {
                first_rv = rv;
            }
        }
    }
    free(items);
    free(which);
    free(next);
    free(whats);
    return first_rv;
}

/* ---- the workload threads ---- */

int wl_spare_keys(const chaos_opts *o)
{
    /* Short runs fail a few hundred calls; the long profile's 540 s about
     * 10,000 on a quiet machine, and 34,000 (27,500 keys frozen) while two
     * builds shared its cores (docs/chaos.md), four fifths on table 0. A
     * model key is about 550 bytes, so ten times 4,000 keys a table costs
     * some 45 MB, and the final reads of never-written keys a few seconds. */
    return o->items * (o->profile_long ? 10 : 1);
}

typedef struct worker_arg {
    run *r;
    int tid, nthreads;
    int per;      /* keys this thread writes in each table at a time */
    int *slot[2]; /* [per]: which key each is, per workload table */
    int fresh[2]; /* reserve keys of each table taken so far */
} worker_arg;

/* The thread's next reserve key of table ti, or -1 when it has used them
 * all. The reserve key's own history starts empty (never written). */
static int take_spare(worker_arg *a, int ti)
{
    mtable *t = &a->r->m.t[ti];
    int idx = t->spare_lo + a->tid + a->nthreads * a->fresh[ti];
    if (idx >= t->nkeys) {
        return -1;
    }
    a->fresh[ti]++;
    atomic_fetch_add(&a->r->replaced, 1);
    return idx;
}

/* A key this thread owns in table ti, not frozen (a frozen one is replaced
 * by a reserve key while any is left); prefer_due: among a few, one whose
 * TTL is (nearly) due. Returns -1 when none was found. */
static int pick_key(worker_arg *a, int ti, uint64_t *rng, int prefer_due)
{
    mtable *t = &a->r->m.t[ti];
    int best = -1;
    int64_t now = clock_wall_now().ms;
    for (int tries = 0; tries < 8; tries++) {
        int *slot = &a->slot[ti][rng_range(rng, 0, a->per - 1)];
        if (t->keys[*slot].frozen) {
            int idx = take_spare(a, ti);
            if (idx < 0) {
                continue;
            }
            *slot = idx;
        }
        if (!prefer_due || nearly_due(t, &t->keys[*slot], now)) {
            return *slot;
        }
        if (best < 0) {
            best = *slot;
        }
    }
    return best;
}

static void *worker(void *p)
{
    worker_arg *a = p;
    run *r = a->r;
    uint64_t rng = r->seed ^ (0x51ed27eULL * (uint64_t)(a->tid + 1));
    while (!atomic_load(&r->stop)) {
        int ti = rng_range(&rng, 0, 9) < 8 ? 0 : 1;
        int x = (int)rng_range(&rng, 0, 99);
        int prefer_due = x >= 32 && x < 48;
        int idx = pick_key(a, ti, &rng, prefer_due);
        if (idx < 0) {
            /* Eight frozen keys in a row and no reserve left: the run is
             * losing its workload (the report says when). */
            long long zero = 0, at = clock_mono_now().ms - r->start_mono_ms;
            atomic_compare_exchange_strong(&r->reserve_out_ms, &zero, at > 0 ? at : 1);
            clock_sleep_ms(1);
            continue;
        }
        static const int ext[] = {TC_FUTURE, TC_DURING, TC_MILLIS, TC_FUTURE};
        int rv;
        if (r->opt->idle & CHAOS_IDLE_WRITES) {
            /* A run that must fail for lack of writes (chaos_plant_test). */
            rv = wl_call(r, r->client, ti, idx, WK_GET, 0, &rng);
        } else if (x < 32) {
            rv = wl_call(r, r->client, ti, idx, WK_PUT, wl_random_class(&rng), &rng);
        } else if (x < 42) {
            rv = wl_call(r, r->client, ti, idx, WK_UPD_TTL, ext[rng_next(&rng) % 4], &rng);
        } else if (x < 48) {
            rv = wl_call(r, r->client, ti, idx, WK_UPD_RM, 0, &rng);
        } else if (x < 52) {
            rv = wl_call(r, r->client, ti, idx, WK_UPD_TTL, TC_PAST, &rng);
        } else if (x < 60) {
            rv = wl_call(r, r->client, ti, idx, WK_UPD_PAY, 0, &rng);
        } else if (x < 68) {
            rv = wl_call(r, r->client, ti, idx, WK_DELETE, 0, &rng);
        } else if (x < 80) {
            /* Racing the scanner: due now, then at once extended or removed. */
            if ((rv = wl_call(r, r->client, ti, idx, WK_PUT, TC_NOW, &rng)) == 0) {
                if (rng_next(&rng) % 2 == 0) {
                    rv = wl_call(r, r->client, ti, idx, WK_UPD_TTL, TC_FUTURE, &rng);
                } else {
                    rv = wl_call(r, r->client, ti, idx, WK_UPD_RM, 0, &rng);
                }
            }
        } else {
            rv = wl_call(r, r->client, ti, idx, WK_GET, 0, &rng);
        }
        if (rv != 0 && rv != -1) {
            /* A failed call freezes its key, and one that fails fast (no
             * in-sync copy, a refused connection) would otherwise burn
             * through the reserve at thousands a second: back off as a
             * client would. */
            clock_sleep_ms(20);
        }
    }
    free(a->slot[0]);
    free(a->slot[1]);
    free(a);
    return NULL;
}

int wl_start(run *r, pthread_t *threads, int n)
{
    for (int i = 0; i < n; i++) {
        worker_arg *a = calloc(1, sizeof(*a));
        int per = r->opt->items / n;
        if (a != NULL && per > 0) {
            a->slot[0] = malloc(sizeof(int) * (size_t)per);
            a->slot[1] = malloc(sizeof(int) * (size_t)per);
        }
        if (a == NULL || per < 1 || a->slot[0] == NULL || a->slot[1] == NULL) {
            if (a != NULL) {
                free(a->slot[0]);
                free(a->slot[1]);
            }
            free(a);
            atomic_store(&r->stop, 1);
            wl_join(threads, i);
            return 12;
        }
        a->r = r;
        a->tid = i;
        a->nthreads = n;
        a->per = per;
        for (int j = 0; j < per; j++) {
            a->slot[0][j] = a->slot[1][j] = i + n * j;
        }
        int rv = pthread_create(&threads[i], NULL, worker, a);
        if (rv != 0) {
            free(a);
            atomic_store(&r->stop, 1);
            wl_join(threads, i);
            return rv;
        }
    }
    return 0;
}

void wl_join(pthread_t *threads, int n)
{
    for (int i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
    }
}
