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

/* What a Query (reads.c, reads_index.c) holds from its parse to its reply:
 * the partition key, the sort key condition (sk points into v1 and v2),
 * the start key and the page read. */
typedef struct reads_query_state {
    attr_value pk, v1, v2;
    store_sk_cond sk;
    item *start;
    store_page page;
} reads_query_state;

void reads_query_state_init(reads_query_state *q);
void reads_query_state_fini(reads_query_state *q);

/* Whether the call hides expired items: the table's TTL is enabled and the
 * request asks for it (requested) or the table hides them by default. */
int reads_hide_expired(const request_ctx *c, int requested);
/* Returns 1 when ttl_eval finds it (an item of the call's table) expired
 * at now. */
int reads_is_expired(const request_ctx *c, const item *it, clock_wall now);
/* Replies to a query or scan with the store's outcome rv: its error (err),
 * or the PageResponse of page, without the items found expired when
 * reads_hide_expired(c, hide_requested) (or ENOMEM). */
void reads_reply_page(request_ctx *c, int rv, const char *err, store_page *page,
                      int hide_requested);
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
