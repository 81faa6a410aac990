/*
 * store_testutil.h: the harness of store_test and store_query_test: a
 * partition store in a fresh scratch directory per test (setup/teardown, for
 * cmocka_unit_test_setup_teardown), the three test tables, and builders for
 * items and attribute values. Implemented in store_testutil.c.
 *
 * Not thread-safe: one test thread drives the fixture (the store itself is
 * thread-safe, which the concurrency tests rely on).
 */
#ifndef LAPSE_STORE_TESTUTIL_H
#define LAPSE_STORE_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../common/lapse_err.h"
#include "../storage/storage_testutil.h"
#include "../placement/hash.h"
#include "store.h"

typedef struct fixture {
    char dir[512];
    char err[512];
    store *st;
} fixture;

/* Set by setup() before every test. */
extern table_schema music;  /* Artist S, Song S, 8 partitions */
extern table_schema events; /* Id S, Ts N, 4 partitions */
extern table_schema plain;  /* Pk N, no sort key, 16 partitions */

#define assert_ok(call, f) testdir_assert_ok(call, f)

#define assert_code(call, code, f)                                                                 \
    do {                                                                                           \
        int rv_ = (call);                                                                          \
        if (rv_ != (code)) {                                                                       \
            fail_msg("%s returned %d (%s), expected %s: %s", #call, rv_, lapse_strerror(rv_),      \
                     lapse_strerror(code), (f)->err);                                              \
        }                                                                                          \
    } while (0)

/* A schema with the given keys (sk NULL: none). */
table_schema mk_schema(uint32_t id, const char *name, const char *pk, attr_type pkt, const char *sk,
                       attr_type skt, uint32_t partitions);
/* Closes and reopens f->st on the same directory. */
void reopen(fixture *f);
/* cmocka setup/teardown: a fixture with an open store in a new directory. */
int setup(void **state);
int teardown(void **state);
/* An S/N/B value parsed from text; fails the test when invalid. */
attr_value val(attr_type t, const char *text);
/* itm(n, name1, type1, text1, ...): an item of n S/N/B attributes. */
item *itm(int n, ...);
/* A Music item (year NULL: no Year attribute) and a Music key. */
item *song(const char *artist, const char *title, const char *year);
item *song_key(const char *artist, const char *title);
/* store_put/store_get that fail the test on error; both take ownership of
 * their item argument. get returns the stored item (caller frees) or NULL. */
void put(fixture *f, const table_schema *t, item *it);
item *get(fixture *f, const table_schema *t, item *key);
/* Fails the test unless it has attribute name equal to (t, text). */
void assert_attr(const item *it, const char *name, attr_type t, const char *text);

#endif
