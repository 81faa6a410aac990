/*
 * expiry_testutil.h: the harness of expiry_test and expiry_backfill_test,
 * on top of store_testutil.h: two TTL tables, items with a TTL value of
 * every kind, the expiry column family read directly (white-box: the
 * expected index keys are built by hand from the documented layout,
 * docs/storage-format.md, not with the code under test), and sweeps.
 * Implemented in expiry_testutil.c.
 */
#ifndef LAPSE_EXPIRY_TESTUTIL_H
#define LAPSE_EXPIRY_TESTUTIL_H

#include "../common/clock.h"
#include "expiry.h"
#include "store_testutil.h"
#include "../common/ttl.h"

extern table_schema sess; /* Pk S, Sk N, 4 partitions, TTL on "Exp" */
extern table_schema solo; /* Pk S, 2 partitions, TTL on "Exp" */
extern int64_t base_s;    /* real now, seconds, at setup: TTL values are relative to it */

/* A table with Pk S (and Sk N when with_sk), TTL enabled on "Exp". */
table_schema ttl_table(uint32_t id, const char *name, int with_sk, uint32_t parts);
/* Gives t a change stream with TTL deletes: its sweeps read each item (the
 * delete's old image), so they judge it, where a plain table's trust the
 * expiry entry. */
void with_stream(table_schema *t);
/* cmocka setup: sess, solo, base_s, then store_testutil's setup. */
int esetup(void **state);
clock_wall at_ms(int64_t ms);

enum ttl_kind { K_NUM, K_FRAC, K_STR, K_MISSING, K_KINDS };

/* A Sessions item; Exp is v as N (K_NUM), v.75 (K_FRAC), v as S, or absent. */
item *sitem(const table_schema *t, const char *pk, int sk, int kind, int64_t v);
item *skey(const table_schema *t, const char *pk, int sk);

/* A growable list of keys. */
typedef struct keylist {
    buf *k;
    size_t n, cap;
} keylist;

void kl_push(keylist *l, const uint8_t *p, size_t n);
void kl_fini(keylist *l);
int buf_cmp(const void *a, const void *b); /* for qsort of bufs */
/* Adds the expected entry of it under t at now (none when not eligible). */
void expect_entry(const table_schema *t, const item *it, clock_wall now, keylist *l);
/* Every entry of table_id in the expiry column family, in key order. */
void index_of(fixture *f, uint32_t table_id, keylist *l);
/* How many index entries table_id has. */
size_t index_count(fixture *f, uint32_t table_id);
void dump(const char *what, const keylist *l);
/* Fails unless the index of t is exactly want (sorted here). */
void assert_index(fixture *f, const table_schema *t, keylist *want);
/* The expected index of every item stored in t now (via scans). */
void expect_stored(fixture *f, const table_schema *t, clock_wall now, keylist *l);
uint64_t count_items(fixture *f, const table_schema *t);
int exists(fixture *f, const table_schema *t, const char *pk, int sk);

/* expiry_sweep that fails the test on error. */
void sweep(fixture *f, const table_schema *t, uint32_t part, int64_t now_ms, size_t max,
           expiry_sweep_result *res);
/* Sweeps every partition of t until nothing is due; returns items deleted. */
size_t sweep_all(fixture *f, const table_schema *t, int64_t now_ms, size_t max);
/* Overwrites the stored value of the item with key (freed) with bytes that
 * do not decode, leaving its index entry. */
void corrupt(fixture *f, const table_schema *t, item *key);

#endif
