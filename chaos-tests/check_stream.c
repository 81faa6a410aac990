/*
 * check_stream.c: invariant 4, the change stream of the indexed table
 * against the model and the base table. See check_int.h and docs/chaos.md.
 *
 * A key's records all lie in one shard (its base partition's), in commit
 * order, so replaying them one after the other must be a consistent story:
 * an INSERT when the stream's item is absent, a MODIFY or REMOVE whose old
 * image is exactly the previous record's new image. A missing record or a
 * repeated one (a second TTL REMOVE of the same item, say) breaks the chain;
 * the replay must end where the table is; and every REMOVE by lapse.ttl must
 * delete an image whose TTL was eligible and due. The model then says which
 * records must be there: one per acknowledged write (by its unique "ver"),
 * at most one per uncertain write, none for a write never made, no more
 * user REMOVEs than deletes sent. Keys the run planted a violation on
 * behind the model's back skip the model's part.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_int.h"
#include "workload.h"

static const char *const event_names[] = {"INSERT", "MODIFY", "REMOVE"};

/* A record and the model key it belongs to (-1: none). */
typedef struct keyrec {
    int idx;
    const lapse_stream_record *r;
} keyrec;

static int cmp_keyrec(const void *a, const void *b)
{
    const keyrec *x = a, *y = b;
    if (x->idx != y->idx) {
        return x->idx < y->idx ? -1 : 1;
    }
    if (x->r->shard != y->r->shard) {
        return x->r->shard < y->r->shard ? -1 : 1;
    }
    return x->r->sequence_number < y->r->sequence_number
               ? -1
               : x->r->sequence_number > y->r->sequence_number;
}

static int same(const lapse_item *a, const lapse_item *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && lapse_item_equal(a, b));
}

static void rec_name(const lapse_stream_record *r, char *buf, size_t len)
{
    snprintf(buf, len, "record %u-%" PRIu64 " (%s%s)", r->shard, r->sequence_number,
             event_names[r->event <= LAPSE_STREAM_REMOVE ? r->event : 0],
             r->ttl_delete ? " by lapse.ttl" : "");
}

/* ============================== shards ============================== */

/* Every shard holds records 1..last, where last is what its host reports.
 * One violation per broken shard. */
static void check_shards(const mtable *t, const streamread *s, check_out *out)
{
    size_t at = 0;
    for (size_t i = 0; i < s->nshards; i++) {
        uint32_t shard = s->shard[i];
        uint64_t want = 1;
        char what[48], found[256] = "";
        snprintf(what, sizeof(what), "shard %u", shard);
        for (; at < s->n && s->r[at]->shard < shard; at++) {
        }
        for (; at < s->n && s->r[at]->shard == shard; at++, want++) {
            if (found[0] == '\0' && s->r[at]->sequence_number != want) {
                snprintf(found, sizeof(found), "record %" PRIu64 " where %" PRIu64 " was due",
                         s->r[at]->sequence_number, want);
            }
        }
        if (found[0] == '\0' && want - 1 != s->last_seq[i]) {
            snprintf(found, sizeof(found), "records up to %" PRIu64 ", the host's last is %" PRIu64,
                     want - 1, s->last_seq[i]);
        }
        if (found[0] != '\0') {
            check_add_key(out, 4, t, -1, what, found,
                          "records numbered 1, 2, ... without a gap or a repeat, up to the last "
                          "sequence number its host reports");
        }
    }
}

/* ============================== one key ============================== */

/* Whether TTL REMOVE r deleted an image whose TTL attribute was eligible
 * and due (docs/ttl.md, offset 0), with the due instant recorded right.
 * Returns 1, or 0 with the reason in why. */
static int ttl_remove_ok(const lapse_stream_record *r, char *why, size_t len)
{
    const char *v = r->old_image ? lapse_item_get_n(r->old_image, MODEL_TTL_ATTR) : NULL;
    if (strcmp(r->ttl_attribute, MODEL_TTL_ATTR) != 0) {
        snprintf(why, len, "its TTL attribute is \"%.60s\"", r->ttl_attribute);
        return 0;
    }
    if (v == NULL) {
        snprintf(why, len, "the old image has no N %s", MODEL_TTL_ATTR);
        return 0;
    }
    long double x = strtold(v, NULL);
    if (!(fabsl(x) < 4.6e15L)) {
        snprintf(why, len, "its TTL %.40s is out of range", v);
        return 0;
    }
    int64_t due_s = (int64_t)truncl(x);
    if (due_s < r->ttl_deleted_at_ms / 1000 - MODEL_GUARD_S) {
        snprintf(why, len, "its TTL %.40s is more than five years old", v);
        return 0;
    }
    if (r->ttl_expires_at_ms != due_s * 1000) {
        snprintf(why, len, "expiresAt %" PRId64 ", but its TTL %.40s is due at %" PRId64,
                 r->ttl_expires_at_ms, v, due_s * 1000);
        return 0;
    }
    if (r->ttl_deleted_at_ms <= due_s * 1000) {
        snprintf(why, len, "deletedAt %" PRId64 " is not after its due instant %" PRId64,
                 r->ttl_deleted_at_ms, due_s * 1000);
        return 0;
    }
    return 1;
}

/* What record r should have been, given the item cur that the records
 * before it (the last one named prev, NULL: none) left. */
static void chain_expected(const lapse_stream_record *r, const lapse_item *cur, const char *prev,
                           char *buf, size_t len)
{
    char c[160], after[120];
    check_brief(cur, c, sizeof(c));
    snprintf(after, sizeof(after), "%s%s", prev != NULL ? "after " : "with no record before it",
             prev != NULL ? prev : "");
    if (r->event == LAPSE_STREAM_INSERT) {
        snprintf(buf, len,
                 "no INSERT while the item exists (%s, %s): a REMOVE is missing or the INSERT "
                 "repeated",
                 c, after);
    } else if (cur == NULL) {
        snprintf(buf, len,
                 "no %s of an absent item (%s): the record is repeated or an INSERT is missing",
                 event_names[r->event <= LAPSE_STREAM_REMOVE ? r->event : 0], after);
    } else {
        snprintf(buf, len,
                 "the old image to be the item as it was (%s, %s): a record is missing or "
                 "repeated",
                 c, after);
    }
}

/* The ver of an image, or 0. */
static uint64_t ver_of(const lapse_item *it)
{
    const char *v = it != NULL ? lapse_item_get_n(it, "ver") : NULL;
    return v != NULL ? strtoull(v, NULL, 10) : 0;
}

/* A user record that carried a new image: its ver, and whether it
 * re-applied the item it found (a MODIFY with equal images). */
typedef struct seen_ver {
    uint64_t ver;
    int reapply;
} seen_ver;

/* The model's part for key k: found[0..n) against k->log. Returns 1, or 0
 * with the problem in found/expected. */
static int model_ok(const mkey *k, const seen_ver *sv, size_t n, int user_removes, char *found,
                    size_t flen, char *expected, size_t elen)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t w = 0;
        while (w < k->nlog && (k->log[w].del || k->log[w].ver != sv[i].ver)) {
            w++;
        }
        if (w == k->nlog) {
            snprintf(found, flen, "a record of ver %" PRIu64, sv[i].ver);
            snprintf(expected, elen, "records of the run's own writes to the key only");
            return 0;
        }
    }
    int deletes = 0;
    for (uint32_t w = 0; w < k->nlog; w++) {
        const mwrite *m = &k->log[w];
        int first = 0, again = 0;
        deletes += m->del;
        for (size_t i = 0; !m->del && i < n; i++) {
            if (sv[i].ver == m->ver) {
                first += !sv[i].reapply;
                again += sv[i].reapply;
            }
        }
        /* A call the client may have resent may have applied more than
         * once, each apply with its own record (a re-apply of the item it
         * finds is a MODIFY with equal images); a stream that repeats a
         * record breaks the chain instead. */
        int ok = m->resent ? !m->acked || first + again >= 1
                           : again == 0 && (m->acked ? first == 1 : first <= 1);
        if (m->del || ok) {
            continue;
        }
        snprintf(found, flen, "%d record(s) of ver %" PRIu64 "%s", first + again, m->ver,
                 again > 0 ? ", re-applied" : "");
        snprintf(expected, elen, "%s for the %s %s ver %" PRIu64,
                 m->resent  ? "at least one record"
                 : m->acked ? "exactly one record"
                            : "at most one record",
                 m->acked ? "acknowledged" : "uncertain", m->resent ? "put" : "update", m->ver);
        return 0;
    }
    if (user_removes > deletes) {
        snprintf(found, flen, "%d REMOVEs by the user", user_removes);
        snprintf(expected, elen, "at most one per delete sent (%d)", deletes);
        return 0;
    }
    return 1;
}

/* Replays the records v[0..n) of key idx (n may be 0) and files the first
 * problem. sv is scratch space for n entries. */
static void check_key(const mtable *t, int idx, const keyrec *v, size_t n, const base_snap *b,
                      seen_ver *sv, check_out *out, repl_stats *st)
{
    char id[24], found[256] = "", expected[512] = "", name[80], prev[80] = "", a[160], c[160];
    const lapse_item *cur = NULL;
    const lapse_stream_record *last = NULL;
    size_t nsv = 0;
    int user_removes = 0;
    model_key_name(idx, id, sizeof(id));
    uint32_t part = wl_partition(id);
    for (size_t i = 0; i < n && found[0] == '\0'; i++) {
        const lapse_stream_record *r = v[i].r;
        char why[200];
        rec_name(r, name, sizeof(name));
        st->ttl_removes += r->ttl_delete && r->event == LAPSE_STREAM_REMOVE;
        if (r->shard != part) {
            snprintf(found, sizeof(found), "%s", name);
            snprintf(expected, sizeof(expected), "every record of the key in shard %u", part);
        } else if (r->event == LAPSE_STREAM_INSERT ? cur != NULL || r->old_image != NULL
                                                   : cur == NULL || !same(r->old_image, cur)) {
            check_brief(r->old_image, a, sizeof(a));
            snprintf(found, sizeof(found), "%s with old image %s", name, a);
            chain_expected(r, cur, last != NULL ? prev : NULL, expected, sizeof(expected));
        } else if (r->event != LAPSE_STREAM_REMOVE && r->new_image == NULL) {
            snprintf(found, sizeof(found), "%s without a new image", name);
            snprintf(expected, sizeof(expected), "a new image in every INSERT and MODIFY");
        } else if (r->ttl_delete && r->event != LAPSE_STREAM_REMOVE) {
            snprintf(found, sizeof(found), "%s", name);
            snprintf(expected, sizeof(expected), "lapse.ttl only on REMOVEs");
        } else if (r->ttl_delete && !ttl_remove_ok(r, why, sizeof(why))) {
            check_brief(r->old_image, a, sizeof(a));
            snprintf(found, sizeof(found), "%.60s of %.80s: %.90s", name, a, why);
            snprintf(expected, sizeof(expected),
                     "REMOVEs by lapse.ttl only of items whose TTL was eligible and due");
        }
        if (r->event == LAPSE_STREAM_REMOVE) {
            user_removes += !r->ttl_delete;
        } else if (r->new_image != NULL) {
            sv[nsv].ver = ver_of(r->new_image);
            sv[nsv].reapply = r->event == LAPSE_STREAM_MODIFY && same(r->old_image, r->new_image);
            nsv++;
        }
        cur = r->event == LAPSE_STREAM_REMOVE ? NULL : r->new_image;
        last = r;
        snprintf(prev, sizeof(prev), "%s", name);
    }
    if (found[0] == '\0' && !t->keys[idx].planted &&
        !model_ok(&t->keys[idx], sv, nsv, user_removes, found, sizeof(found), expected,
                  sizeof(expected))) {
        /* filed below */
    } else if (found[0] == '\0' && !same(cur, b->item[idx])) {
        check_brief(cur, c, sizeof(c));
        check_brief(b->item[idx], a, sizeof(a));
        snprintf(found, sizeof(found), "the stream leaves it %.140s%s%.79s", c,
                 last ? " after " : "", last ? prev : " (no record)");
        snprintf(expected, sizeof(expected),
                 "the stream to end where the table is: %s (a record is missing)", a);
    }
    if (found[0] != '\0') {
        check_add_key(out, 4, t, idx, NULL, found, expected);
    }
}

/* ============================== the whole stream ============================== */

void check_stream(const mtable *t, const streamread *s, const base_snap *b, check_out *out,
                  repl_stats *st)
{
    keyrec *v = calloc(s->n + 1, sizeof(*v));
    seen_ver *sv = calloc(s->n + 1, sizeof(*sv));
    if (v == NULL || sv == NULL) {
        abort();
    }
    st->records = (long)s->n;
    check_shards(t, s, out);
    for (size_t i = 0; i < s->n; i++) {
        v[i].r = s->r[i];
        v[i].idx = check_key_index(t, s->r[i]->keys);
        if (v[i].idx < 0) {
            char *keys = lapse_item_to_json(s->r[i]->keys), name[80];
            rec_name(s->r[i], name, sizeof(name));
            check_add_key(out, 4, t, -1, keys ? keys : "?", name,
                          "records of the items the run wrote only");
            lapse_free(keys);
        }
    }
    if (s->n > 1) {
        qsort(v, s->n, sizeof(*v), cmp_keyrec);
    }
    size_t at = 0;
    while (at < s->n && v[at].idx < 0) {
        at++;
    }
    for (int idx = 0; idx < t->nkeys; idx++) {
        size_t from = at;
        while (at < s->n && v[at].idx == idx) {
            at++;
        }
        check_key(t, idx, v + from, at - from, b, sv, out, st);
    }
    free(v);
    free(sv);
}
