/*
 * indexcfg.h: the client side of secondary indexes and streams
 * (docs/replication.md): turning a lapse_table_def's LSIs, GSIs and stream
 * settings into a CreateTable request, and describing them in
 * describe-table's JSON. Used by admin.c (lapse_create_table_json,
 * lapse_describe_table); pure, so they are tested without a cluster.
 *
 * Thread-safety: pure functions of their arguments.
 *
 * Invariants of the JSON built:
 *  1. Key order is fixed (JSON_PRESERVE_ORDER), so output is stable.
 *  2. "LocalSecondaryIndexes" and "GlobalSecondaryIndexes" are present only
 *     when the table has such indexes, as in DynamoDB;
 *     "StreamSpecification" is always present.
 *  3. An index key's attribute appears once in "AttributeDefinitions", like
 *     the table's keys.
 */
#ifndef LAPSE_CLIENT_INDEXCFG_H
#define LAPSE_CLIENT_INDEXCFG_H

#include <jansson.h>

#include "client.h"

/* Sets s's lsi, gsi and stream from def, allocating from a (strings are
 * borrowed from def, which must outlive the request). Checks what the
 * coordinator cannot see or reports less clearly: arrays given with their
 * counts, index names and key names present, key types S/N/B, counts within
 * SCHEMA_MAX_LSI and SCHEMA_MAX_GSI, stream settings only with a stream.
 * Returns 0, LAPSE_EINVAL (reason in err) or LAPSE_ENOMEM. */
int indexcfg_to_pb(arena *a, const lapse_table_def *def, Lapse__TableSchema *s, lapse_error *err);

/* Adds tm's indexes and stream to describe-table's "Table" object t
 * (lapse.h, lapse_describe_table), appending index key attributes to t's
 * "AttributeDefinitions" array. Returns 0, or -1 on OOM (t then partly
 * filled; the caller drops it). */
int indexcfg_describe(json_t *t, const Lapse__TableMap *tm);

/* The key type of DynamoDB's letter t ('S', 'N', 'B'; KEY_NONE for
 * another): the reverse of indexcfg_key_type_name. */
Lapse__KeyType indexcfg_key_type(char t);
/* DynamoDB's letter of a key type ("S", "N", "B"; "?" for another), as
 * describe-table's AttributeDefinitions and KeySchema say it. */
const char *indexcfg_key_type_name(Lapse__KeyType t);

#endif
