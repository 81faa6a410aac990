/*
 * reads_steps.h: the steps the read calls share, reads.c (base reads) and
 * reads_index.c (index queries): hiding expired items, the page reply, the
 * query's key conditions. Not used outside those two files; it calls
 * neither.
 *
 * Thread-safety: as request.h (one request_ctx per call).
 *
 * Invariants:
 *  1. Expiry is judged by ttl_eval at the one wall-clock snapshot the
 *     caller passes (taken after the store read), as the scanners judge it.
 */
#ifndef LAPSE_READS_STEPS_H
#define LAPSE_READS_STEPS_H

#include "../common/clock.h"
#include "../partition/store.h"
#include "request.h"

/* Whether the call hides expired items: the table's TTL is enabled and the
 * request asks for it (requested) or the table hides them by default. */
int reads_hide_expired(const request_ctx *c, int requested);
/* Returns 1 when ttl_eval finds it (an item of the call's table) expired
 * at now. */
int reads_is_expired(const request_ctx *c, const item *it, clock_wall now);
/* Frees and removes the items of page that ttl_eval finds expired at now
 * (index entries carry the TTL attribute: docs/replication.md), keeping
 * the order and last_key. */
void reads_filter_page(const request_ctx *c, store_page *page, clock_wall now);
/* Builds the PageResponse from a store page (or sets ENOMEM). */
void reads_reply_page(request_ctx *c, const store_page *page);
/* The query's partition key pb (the request's partition_key) as *pk,
 * required and of pkd's type. 0, or the error set in c->resp. */
int reads_pk_from_pb(request_ctx *c, const Lapse__AttributeValue *pb, const key_def *pkd,
                     attr_value *pk);
/* Converts an optional SortKeyCondition on sort key skd (owner names the
 * table or index in messages: "table \"T\"", "index \"I\""). v1 and v2 must
 * be item_value_init_null'd by the caller, who finis them; sk points into
 * them. Returns 0 or EINVAL set on the reply. */
int reads_sk_from_pb(request_ctx *c, const Lapse__SortKeyCondition *pb, const key_def *skd,
                     const char *owner, store_sk_cond *sk, attr_value *v1, attr_value *v2);

#endif
