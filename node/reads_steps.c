/*
 * reads_steps.c: the steps the read calls share (reads_steps.h).
 */
#include "reads_steps.h"

#include <string.h>

#include "../common/lapse_err.h"
#include "../common/ttl.h"
#include "../rpc/wire.h"

void reads_query_state_init(reads_query_state *q)
{
    memset(q, 0, sizeof(*q));
    item_value_init_null(&q->pk);
    item_value_init_null(&q->v1);
    item_value_init_null(&q->v2);
}

void reads_query_state_fini(reads_query_state *q)
{
    store_page_fini(&q->page);
    item_free(q->start);
    item_value_fini(&q->pk);
    item_value_fini(&q->v1);
    item_value_fini(&q->v2);
}

int reads_hide_expired(const request_ctx *c, int requested)
{
    const table_schema *t = &c->table->schema;
    return t->ttl.enabled && (requested || t->hide_expired);
}

int reads_is_expired(const request_ctx *c, const item *it, clock_wall now)
{
    int64_t due_ms = 0;
    return ttl_eval(&c->table->schema.ttl, it, now, &due_ms) == TTL_ELIGIBLE &&
           ttl_is_expired(due_ms, now);
}

/* Frees and removes the items of page that ttl_eval finds expired at now
 * (index entries carry the TTL attribute: docs/replication.md), keeping
 * the order and last_key. */
static void filter_page(const request_ctx *c, store_page *page, clock_wall now)
{
    size_t kept = 0;
    for (size_t i = 0; i < page->n; i++) {
        if (reads_is_expired(c, page->items[i], now)) {
            item_free(page->items[i]);
        } else {
            page->items[kept++] = page->items[i];
        }
    }
    page->n = kept;
}

void reads_reply_page(request_ctx *c, int rv, const char *err, store_page *page, int hide_requested)
{
    if (rv != 0) {
        request_store_error(c, rv, err);
        return;
    }
    if (reads_hide_expired(c, hide_requested)) {
        filter_page(c, page, clock_wall_now());
    }
    Lapse__PageResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        goto oom;
    }
    lapse__page_response__init(out);
    if (page->n > 0) {
        out->items = arena_alloc(c->a, page->n * sizeof(*out->items));
        if (out->items == NULL) {
            goto oom;
        }
        for (size_t i = 0; i < page->n; i++) {
            if ((out->items[i] = wire_item_to_pb(c->a, page->items[i])) == NULL) {
                goto oom;
            }
        }
        out->n_items = page->n;
    }
    if (page->last_key != NULL &&
        (out->last_evaluated_key = wire_item_to_pb(c->a, page->last_key)) == NULL) {
        goto oom;
    }
    c->resp->body_case = LAPSE__RESPONSE__BODY_PAGE;
    c->resp->page = out;
    return;
oom:
    rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
}

/* Converts a sort-key operand and checks it against the sort key skd. */
static int sk_value(request_ctx *c, const Lapse__AttributeValue *pb, const key_def *sk,
                    const char *what, attr_value *out)
{
    char err[256] = "";
    if (pb == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "sort key condition: %s is required", what);
        return LAPSE_EINVAL;
    }
    int rv = wire_value_from_pb(pb, out, err, sizeof(err));
    if (rv != 0) {
        rpc_set_error(c->resp, c->a, rv, "sort key condition %s: %s", what, err);
        return rv;
    }
    if (out->type != sk->type) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "sort key condition %s: sort key \"%s\" is of type %s, not %s", what,
                      sk->name, item_type_name(sk->type), item_type_name(out->type));
        return LAPSE_EINVAL;
    }
    return 0;
}

int reads_sk_from_pb(request_ctx *c, const Lapse__SortKeyCondition *pb, const key_def *skd,
                     const char *owner, store_sk_cond *sk, attr_value *v1, attr_value *v2)
{
    static const store_sk_op ops[] = {
        [LAPSE__SORT_KEY_CONDITION__OP__NONE] = STORE_SK_NONE,
        [LAPSE__SORT_KEY_CONDITION__OP__EQ] = STORE_SK_EQ,
        [LAPSE__SORT_KEY_CONDITION__OP__LT] = STORE_SK_LT,
        [LAPSE__SORT_KEY_CONDITION__OP__LE] = STORE_SK_LE,
        [LAPSE__SORT_KEY_CONDITION__OP__GT] = STORE_SK_GT,
        [LAPSE__SORT_KEY_CONDITION__OP__GE] = STORE_SK_GE,
        [LAPSE__SORT_KEY_CONDITION__OP__BETWEEN] = STORE_SK_BETWEEN,
        [LAPSE__SORT_KEY_CONDITION__OP__BEGINS_WITH] = STORE_SK_BEGINS_WITH,
    };
    memset(sk, 0, sizeof(*sk));
    if (pb == NULL || pb->op == LAPSE__SORT_KEY_CONDITION__OP__NONE) {
        return 0;
    }
    if ((unsigned)pb->op >= sizeof(ops) / sizeof(ops[0])) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "sort key condition: unknown op %d",
                      (int)pb->op);
        return LAPSE_EINVAL;
    }
    if (skd->name[0] == 0) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "%s has no sort key: a sort key condition is not allowed", owner);
        return LAPSE_EINVAL;
    }
    sk->op = ops[pb->op];
    if (sk->op == STORE_SK_BEGINS_WITH && skd->type == ATTR_N) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "begins_with needs a sort key of type S or B; \"%s\" is N", skd->name);
        return LAPSE_EINVAL;
    }
    if (sk_value(c, pb->value, skd, "value", v1) != 0) {
        return LAPSE_EINVAL;
    }
    sk->v1 = v1;
    if (sk->op == STORE_SK_BETWEEN) {
        if (sk_value(c, pb->value2, skd, "value2", v2) != 0) {
            return LAPSE_EINVAL;
        }
        sk->v2 = v2;
    }
    return 0;
}

int reads_pk_from_pb(request_ctx *c, const Lapse__AttributeValue *pb, const key_def *pkd,
                     attr_value *pk)
{
    char err[256] = "";
    if (pb == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "partition_key is required");
        return LAPSE_EINVAL;
    }
    int rv = wire_value_from_pb(pb, pk, err, sizeof(err));
    if (rv != 0) {
        rpc_set_error(c->resp, c->a, rv, "partition_key: %s", err);
        return rv;
    }
    if (pk->type != pkd->type) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "partition key \"%s\" is of type %s, not %s",
                      pkd->name, item_type_name(pkd->type), item_type_name(pk->type));
        return LAPSE_EINVAL;
    }
    return 0;
}
