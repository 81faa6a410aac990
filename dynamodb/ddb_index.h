/*
 * ddb_index.h: what the gateway knows of one secondary index of a table
 * (its keys with their types, the table's keys, its projection), read from
 * liblapse's cached map (lapse_index_describe: no coordinator call) and,
 * for an index the nodes keep whole, the projections the gateway's document
 * of the table records (ddb_meta.h; cached per table and creation time, as
 * ddb_index.c says), and the per-item steps Scan of an index and reads
 * from an index share: whether an item is in the index, its index key (the
 * table's keys and the index's, DynamoDB's LastEvaluatedKey of an index),
 * and the item as the index's projection shows it.
 *
 * Thread-safety: a ddb_index belongs to the call that read it; the
 * projection cache behind ddb_index_info is shared by the workers, under
 * its own lock.
 *
 * Invariants:
 *  1. Every string of a ddb_index is borrowed from its li or meta (meta is
 *     released by ddb_index_fini; a ddb_index is never copied); tsk and isk are NULL when there is
 * no such key. An index the nodes keep as ALL has its projection from the gateway's document when
 * one is recorded there (INCLUDE).
 *  2. An item is in the index exactly when it has every index key attribute
 *     with the type AttributeDefinitions gives it (DynamoDB's sparse
 *     indexes: an LSI holds the items with its sort key, a GSI those with
 *     its partition key and, when it has one, its sort key).
 */
#ifndef LAPSE_DDB_INDEX_H
#define LAPSE_DDB_INDEX_H

#include "ddb_req.h"

typedef struct ddb_index {
    lapse_index_info li;     /* the cached map's description */
    json_t *meta;            /* owned: {"Projections": ...} of the gateway's document of the
                                table (ddb_meta.h), or {} */
    const char *tpk, *tsk;   /* the table's keys (tsk NULL: none) */
    const char *ipk, *isk;   /* the index's keys (an LSI's ipk is tpk; isk NULL: none) */
    char ipk_type, isk_type; /* 'S', 'N' or 'B' */
    const char *name;        /* the index's name (borrowed from the caller) */
    int gsi;                 /* 1: a GSI, 0: an LSI */
    const char *projection;  /* "ALL", "KEYS_ONLY" or "INCLUDE" */
    json_t *non_key;         /* borrowed: INCLUDE's NonKeyAttributes (NULL otherwise) */
} ddb_index;

/* Reads index of table into *ix. Returns 0, or -1 with x's error set
 * (ResourceNotFoundException for the table, ValidationException "The table
 * does not have the specified index" for the index, or the meta read's).
 * Call ddb_index_fini either way. */
int ddb_index_info(ddb_ctx *x, const char *table, const char *index, ddb_index *ix);
void ddb_index_fini(ddb_index *ix);

/* 1 when item doc (DynamoDB JSON) is in the index, else 0 (invariant 2). */
int ddb_index_holds(const ddb_index *ix, json_t *doc);
/* The table's and the index's key attributes of doc, a new object (NULL on
 * OOM). */
json_t *ddb_index_key(const ddb_index *ix, json_t *doc);
/* doc as the index's projection shows it: a new reference (doc itself for
 * ALL; the keys, plus INCLUDE's attributes, for the others). */
json_t *ddb_index_project(const ddb_index *ix, json_t *doc);

#endif
