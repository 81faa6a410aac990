/*
 * repl_testutil.h: the harness of lsi_test, outbox_test and apply_test, on
 * top of store_testutil.h: two tables with indexes and a stream, and
 * white-box readers of the new column families. Expected index keys are
 * built by hand from the documented layouts (docs/replication.md) with
 * keycodec and hash directly, not with itemkey.c. Implemented in
 * repl_testutil.c.
 */
#ifndef LAPSE_PARTITION_REPL_TESTUTIL_H
#define LAPSE_PARTITION_REPL_TESTUTIL_H

#include "apply.h"
#include "../common/change.h"
#include "store_testutil.h"

/* Cust S, Order S, 4 partitions; LSI ByDate (id 1, Date N) and ByStatus
 * (id 2, Status S); TTL enabled on Exp; no outbox. */
extern table_schema orders;
/* Pk S, Sk N, 4 partitions; GSI ByUser (id 3, User S + At N, projection
 * all, 4 partitions) and ByKind (id 4, Kind S, keys only, 2 partitions);
 * stream on with TTL deletes; TTL enabled on Exp. */
extern table_schema feed;
extern int64_t now_s; /* real now at setup, seconds */

/* setup/teardown: the tables, then store_testutil's fixture; teardown also
 * restores the wall clock. */
int rsetup(void **state);
int rteardown(void **state);

/* Key/value pairs read from a family. */
typedef struct kv {
    buf k, v;
} kv;
typedef struct kvlist {
    kv *v;
    size_t n, cap;
} kvlist;

void kv_push(kvlist *l, const void *k, size_t klen, const void *v, size_t vlen);
void kv_fini(kvlist *l);
void kv_sort(kvlist *l);
/* Every pair of table_id in family cf of st, in key order (appended). */
void cf_dump(store *st, int cf, uint32_t table_id, kvlist *out);
/* Fails unless got equals want pair by pair (both sorted), naming what. */
void assert_kv_equal(const kvlist *got, const kvlist *want, const char *what);
size_t cf_count(store *st, int cf, uint32_t table_id);

/* The partition of an S partition key under n partitions. */
uint32_t part_of_s(const char *pk, uint32_t n);
/* Appends the order-preserving encoding of v (keycodec). */
void enc(buf *b, const attr_value *v);

/* An Orders item; date/status NULL: absent. status "#n": an N (wrong
 * type). okey: just the keys. */
item *order(const char *cust, const char *ord, const char *date, const char *status);
item *okey(const char *cust, const char *ord);
/* Appends the LSI entries item it of t must have, built by hand from the
 * layout: table | part | index id | enc(pk) | enc(lsi sk) | enc(sk) -> item. */
void expect_lsi(const table_schema *t, const item *it, kvlist *want);
/* Fails unless t's lsi family holds exactly the entries of model[0..n)
 * (NULL entries: absent items). */
void assert_lsi(fixture *f, const table_schema *t, item *const *model, size_t n);

/* Every record of the outbox of (table_id, part), via outbox_read in small
 * pages; checks the seqs are consecutive. */
void outbox_all(fixture *f, uint32_t table_id, uint32_t part, change_list *out);
/* Decodes an entry, failing the test on error. */
change_record decode_ok(const change_entry *e);
/* The item of an image, or NULL when absent (caller frees). */
item *image_of(change_bytes b);

/* A Feed item: Pk, Sk N, and optional User, At N, Kind, Exp N (NULL:
 * absent). */
item *fitem(const char *pk, int sk, const char *user, const char *at, const char *kind,
            const char *exp);

/* Opens a second store beside the fixture's (removed with it): a
 * destination node. Caller closes. */
store *open_dst(fixture *f, const char *tag);
/* An apply_filter owns_gsi that owns every GSI partition. */
int owns_all(void *arg, uint32_t gsi, uint32_t part);
/* Ships partition part's whole outbox in f's store (never trimmed in these
 * tests) to dst with apply_batch, checking each result. With chaos, batches
 * start anywhere from a few records below applied to one past applied + 1:
 * resent, overlapping and early (refused) batches. */
void ship_part(fixture *f, store *dst, const table_schema *t, uint32_t part,
               const apply_filter *flt, unsigned *seed, int chaos);
void ship_all(fixture *f, store *dst, const table_schema *t, const apply_filter *flt,
              unsigned *seed, int chaos);

#endif
