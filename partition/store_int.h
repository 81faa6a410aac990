/*
 * store_int.h: what store.c (point writes, batches, tables, metadata) and
 * store_query.c (queries, scans, counts) share. Not part of the store API:
 * only those two files include it.
 */
#ifndef LAPSE_STORE_INT_H
#define LAPSE_STORE_INT_H

#include <pthread.h>
#include <stddef.h>

#include "../storage/db.h"
#include "store.h"

/* Column families by index. New kinds of data (the TTL expiry index, the
 * outbox) are appended here and to the name list in store.c; existing
 * stores gain them at the next open (db_open creates missing families). */
enum store_cf { CF_ITEMS = 0, CF_META = 1, CF_COUNT };

struct store {
    db *db;                                    /* owned; NULL until opened */
    pthread_mutex_t locks[STORE_LOCK_STRIPES]; /* per-partition write locks */
    int locks_inited;                          /* how many of locks are initialized */
};

/* Writes a reason into err (when given) and returns code. */
int store_errf(int code, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
