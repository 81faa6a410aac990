/*
 * ddb_tags.h: DynamoDB's table tags (TagResource, UntagResource,
 * ListTagsOfResource, CreateTable's Tags), kept in the gateway's document of
 * the table (ddb_meta.h) as "Tags": {key: value}.
 *
 * Thread-safety: as ddb_tables.h.
 *
 * Invariants:
 *  1. Each returns as ddb_req.h's invariant 1 says; req is borrowed.
 *  2. A table has at most DDB_TAGS_MAX tags; keys are 1-128 characters not
 *     starting with "aws:", values 0-256 (DynamoDB's limits); a refused
 *     request changes no tag.
 *  3. A tag change is written only over the document it read
 *     (ddb_meta_update), so two concurrent calls both take effect.
 */
#ifndef LAPSE_DDB_TAGS_H
#define LAPSE_DDB_TAGS_H

#include "ddb_req.h"

#define DDB_TAGS_MAX 50

int ddb_tags_tag(ddb_ctx *x, json_t *req);
int ddb_tags_untag(ddb_ctx *x, json_t *req);
int ddb_tags_list(ddb_ctx *x, json_t *req);
/* CreateTable's Tags (an array of {Key, Value}, borrowed) checked and added
 * to tags (an object). Returns 0 or -1 with x's error set. */
int ddb_tags_read(ddb_ctx *x, json_t *arr, json_t *tags);

#endif
