/*
 * scan.c: query (one partition, routed by its partition key) and scan (a
 * range of partitions walked in order), and the pages they return.
 *
 * Index queries (docs/replication.md): an LSI query goes where a base query
 * of the same partition key goes (the LSI lives beside its items); a GSI
 * query goes to the owner of the GSI partition hash(pk) mod the GSI's
 * partitions, named in the request, and is eventually consistent. Either
 * pages like a base query: the node's last key carries the table's keys and
 * the index keys, and comes back as the next call's exclusive start key.
 *
 * Scan paging: segment s of n covers partitions [s*P/n, (s+1)*P/n). One
 * lapse_scan call pages through partitions in order, continuing into the
 * next partition until the limit is reached, a node stops a page early (its
 * 1 MiB page size), or PAGE_MAX_BYTES have been gathered. The page's last key
 * is the key from which the next call continues; its partition is found by
 * hashing it, which is why a continuation key is always a real item key.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/arena.h"
#include "../common/ddbjson.h"
#include "../common/lapse_err.h"
#include "../placement/hash.h"
#include "../rpc/wire.h"
#include "client.h"

#define PAGE_MAX_BYTES (1024u * 1024)

/* ------------------------------------------------------------------------ */
/* Pages                                                                     */
/* ------------------------------------------------------------------------ */

size_t lapse_page_count(const lapse_page *p)
{
    return p != NULL ? p->n : 0;
}

const lapse_item *lapse_page_item(const lapse_page *p, size_t i)
{
    return p != NULL && i < p->n ? &p->items[i] : NULL;
}

const lapse_item *lapse_page_last_key(const lapse_page *p)
{
    return p != NULL ? p->last_key : NULL;
}

void lapse_page_free(lapse_page *p)
{
    if (p == NULL) {
        return;
    }
    for (size_t i = 0; i < p->n; i++) {
        item_free(p->items[i].it);
    }
    free(p->items);
    lapse_item_free(p->last_key);
    free(p);
}

/* Appends the items of a reply page; adds their sizes to *bytes. */
static int page_append(lapse_page *p, const Lapse__PageResponse *pr, size_t *bytes,
                       lapse_error *err)
{
    char msg[256] = "";
    int rv;

    if (p->n + pr->n_items > p->cap) {
        size_t cap = p->cap ? p->cap : 16;
        while (cap < p->n + pr->n_items) {
            cap *= 2;
        }
        struct lapse_item *v = realloc(p->items, cap * sizeof *v);
        if (v == NULL) {
            return client_err(err, LAPSE_ENOMEM, "out of memory");
        }
        p->items = v;
        p->cap = cap;
    }
    for (size_t i = 0; i < pr->n_items; i++) {
        item *it = NULL;
        if ((rv = wire_item_from_pb(pr->items[i], &it, msg, sizeof msg)) != 0) {
            return client_err(err, rv == LAPSE_EINVAL ? LAPSE_EPROTO : rv, "bad item in reply: %s",
                              msg);
        }
        p->items[p->n++].it = it;
        *bytes += item_size(it);
    }
    return 0;
}

/* Sets p's last key to a copy of key (an item from the wire or a page). */
static int page_set_last_pb(lapse_page *p, const Lapse__Item *pb, lapse_error *err)
{
    char msg[256] = "";
    item *it = NULL;
    int rv = wire_item_from_pb(pb, &it, msg, sizeof msg);
    if (rv != 0) {
        return client_err(err, rv == LAPSE_EINVAL ? LAPSE_EPROTO : rv, "bad last key in reply: %s",
                          msg);
    }
    if ((p->last_key = client_item_wrap(it)) == NULL) {
        item_free(it);
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    return 0;
}

static int page_set_last_item(lapse_page *p, const table_schema *t, const item *last,
                              lapse_error *err)
{
    item *key = NULL;
    if (schema_key_of(t, last, &key) != 0 || (p->last_key = client_item_wrap(key)) == NULL) {
        item_free(key);
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    return 0;
}

static int expect_page(const Lapse__Response *resp, lapse_error *err)
{
    if (resp->body_case != LAPSE__RESPONSE__BODY_PAGE || resp->page == NULL) {
        return client_err(err, LAPSE_EPROTO, "reply has no page body");
    }
    return 0;
}

static int parse_value(const char *what, const char *json, attr_value *out, lapse_error *err)
{
    char msg[256] = "";
    int rv = ddbjson_parse_value(json, strlen(json), out, msg, sizeof msg);
    if (rv != 0) {
        return client_err(err, rv, "%s: %s", what, msg);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Query                                                                     */
/* ------------------------------------------------------------------------ */

static const Lapse__SortKeyCondition__Op sk_ops[] = {
    [LAPSE_SK_NONE] = LAPSE__SORT_KEY_CONDITION__OP__NONE,
    [LAPSE_SK_EQ] = LAPSE__SORT_KEY_CONDITION__OP__EQ,
    [LAPSE_SK_LT] = LAPSE__SORT_KEY_CONDITION__OP__LT,
    [LAPSE_SK_LE] = LAPSE__SORT_KEY_CONDITION__OP__LE,
    [LAPSE_SK_GT] = LAPSE__SORT_KEY_CONDITION__OP__GT,
    [LAPSE_SK_GE] = LAPSE__SORT_KEY_CONDITION__OP__GE,
    [LAPSE_SK_BETWEEN] = LAPSE__SORT_KEY_CONDITION__OP__BETWEEN,
    [LAPSE_SK_BEGINS_WITH] = LAPSE__SORT_KEY_CONDITION__OP__BEGINS_WITH,
};

/* Checks the sort key condition against the key it is on (the table's or
 * an index's sort key); fills *sk. */
static int query_sk(const client_query_keys *k, const lapse_query_opts *o, arena *a, attr_value *v1,
                    attr_value *v2, Lapse__SortKeyCondition **sk, lapse_error *err)
{
    int rv;
    *sk = NULL;
    if (o->sk_op == LAPSE_SK_NONE) {
        return 0;
    }
    if ((unsigned)o->sk_op > LAPSE_SK_BEGINS_WITH) {
        return client_err(err, LAPSE_EINVAL, "unknown sort key operator %d", (int)o->sk_op);
    }
    if (k->sk->name[0] == '\0') {
        return client_err(err, LAPSE_EINVAL, "%s \"%s\" has no sort key", k->what, k->name);
    }
    if (o->sk_json == NULL || (o->sk_op == LAPSE_SK_BETWEEN && o->sk2_json == NULL)) {
        return client_err(err, LAPSE_EINVAL, "sort key condition: missing value%s",
                          o->sk_op == LAPSE_SK_BETWEEN ? " (BETWEEN needs two)" : "");
    }
    if ((rv = parse_value("sort key value", o->sk_json, v1, err)) != 0) {
        return rv;
    }
    if (o->sk_op == LAPSE_SK_BETWEEN &&
        (rv = parse_value("sort key upper bound", o->sk2_json, v2, err)) != 0) {
        return rv;
    }
    const attr_value *bad = v1->type != k->sk->type ? v1 : NULL;
    if (o->sk_op == LAPSE_SK_BETWEEN && v2->type != k->sk->type) {
        bad = v2;
    }
    if (bad != NULL) {
        return client_err(err, LAPSE_EINVAL, "sort key \"%s\" is of type %s, not %s", k->sk->name,
                          item_type_name(k->sk->type), item_type_name(bad->type));
    }
    if (o->sk_op == LAPSE_SK_BEGINS_WITH && k->sk->type == ATTR_N) {
        return client_err(err, LAPSE_EINVAL, "begins_with needs an S or B sort key");
    }
    Lapse__SortKeyCondition *pc = arena_alloc(a, sizeof *pc);
    if (pc == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    lapse__sort_key_condition__init(pc);
    pc->op = sk_ops[o->sk_op];
    if ((pc->value = wire_value_to_pb(a, v1)) == NULL ||
        (o->sk_op == LAPSE_SK_BETWEEN && (pc->value2 = wire_value_to_pb(a, v2)) == NULL)) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    *sk = pc;
    return 0;
}

int client_query_route(const table_schema *t, const char *index, const attr_value *pk,
                       client_target *tg, client_query_keys *keys, lapse_error *err)
{
    uint32_t parts = t->partitions;
    memset(keys, 0, sizeof *keys);
    keys->what = "table";
    keys->name = t->name;
    keys->pk = &t->pk;
    keys->sk = &t->sk;
    keys->index = "";
    tg->kind = CLIENT_ROUTE_BASE;
    tg->gsi = 0;
    if (index != NULL && index[0] != '\0') {
        const index_def *d = NULL;
        for (uint32_t i = 0; i < t->nlsi && d == NULL; i++) {
            d = strcmp(t->lsi[i].name, index) == 0 ? &t->lsi[i] : NULL;
        }
        for (uint32_t i = 0; i < t->ngsi && d == NULL; i++) {
            if (strcmp(t->gsi[i].name, index) == 0) {
                d = &t->gsi[i];
                keys->is_gsi = 1;
                keys->pk = &d->pk;
                tg->kind = CLIENT_ROUTE_GSI;
                tg->gsi = i;
                parts = d->partitions;
            }
        }
        if (d == NULL) {
            return client_err(err, LAPSE_ENOTFOUND, "table \"%s\" has no index \"%s\"", t->name,
                              index);
        }
        keys->what = "index";
        keys->name = d->name;
        keys->sk = &d->sk;
        keys->index = d->name;
    }
    if (pk->type != keys->pk->type) {
        return client_err(err, LAPSE_EINVAL, "partition key \"%s\" must be of type %s, not %s",
                          keys->pk->name, item_type_name(keys->pk->type), item_type_name(pk->type));
    }
    int rv = hash_partition(pk, parts, &tg->part);
    if (rv != 0) {
        return client_err(err, rv, "partition key \"%s\": cannot hash (%s)", keys->pk->name,
                          lapse_strerror(rv));
    }
    return 0;
}

int lapse_query(lapse_client *c, const char *table, const lapse_query_opts *o, lapse_page **out,
                lapse_error *err)
{
    return lapse_query_index(c, table, NULL, o, out, err);
}

/* Routes o's query of table t (index: NULL or "" for the table itself):
 * parses its partition key into *pk and fills *tg and *k; a base or LSI
 * query gets *pk_item, the key it re-routes by if the table is re-created
 * (caller frees, set even on failure). Returns 0 or a LAPSE_E* code. */
static int route_query(const table_schema *t, const char *index, const lapse_query_opts *o,
                       attr_value *pk, client_target *tg, client_query_keys *k, item **pk_item,
                       lapse_error *err)
{
    int rv;
    if ((rv = parse_value("partition key value", o->partition_key_json, pk, err)) != 0 ||
        (rv = client_query_route(t, index, pk, tg, k, err)) != 0) {
        return rv;
    }
    if (o->partition_key_name != NULL && strcmp(o->partition_key_name, k->pk->name) != 0) {
        return client_err(err, LAPSE_EINVAL, "the partition key of %s \"%s\" is \"%s\", not \"%s\"",
                          k->what, k->name, k->pk->name, o->partition_key_name);
    }
    /* A base or LSI query re-routes by its key if the table is re-created;
     * a GSI query has no table key to hash and fails instead. */
    if (!k->is_gsi &&
        ((*pk_item = item_new()) == NULL || item_set_copy(*pk_item, t->pk.name, pk) != 0)) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    return 0;
}

/* Fills body (its sort key condition aside), the Query of table on k and
 * tg with partition key pk, from o; what it points to lives in a. Returns
 * 0 or a LAPSE_E* code. */
static int fill_query(lapse_client *c, const char *table, const client_query_keys *k,
                      const client_target *tg, const lapse_query_opts *o, arena *a,
                      const attr_value *pk, Lapse__QueryRequest *body, lapse_error *err)
{
    body->table = (char *)table;
    body->index = (char *)k->index;
    body->index_partition = k->is_gsi ? tg->part : 0;
    body->limit = o->limit;
    body->reverse = o->reverse != 0;
    body->hide_expired = client_hide_expired(c, o->hide_expired);
    body->eventually_consistent = o->eventually_consistent != 0;
    if ((body->partition_key = wire_value_to_pb(a, pk)) == NULL ||
        (o->exclusive_start_key != NULL &&
         (body->exclusive_start_key = wire_item_to_pb(a, o->exclusive_start_key->it)) == NULL)) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    return 0;
}

/* The page a Query's reply carries into *out (caller frees with
 * lapse_page_free). Returns 0 or a LAPSE_E* code; on error *out is
 * untouched. REQUIRES: expect_page(resp) succeeded. */
static int page_of_reply(const Lapse__Response *resp, lapse_page **out, lapse_error *err)
{
    size_t bytes = 0;
    int rv;
    lapse_page *p = calloc(1, sizeof *p);
    if (p == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    if ((rv = page_append(p, resp->page, &bytes, err)) != 0 ||
        (resp->page->last_evaluated_key != NULL &&
         (rv = page_set_last_pb(p, resp->page->last_evaluated_key, err)) != 0)) {
        lapse_page_free(p);
        return rv;
    }
    *out = p;
    return 0;
}

int lapse_query_index(lapse_client *c, const char *table, const char *index,
                      const lapse_query_opts *o, lapse_page **out, lapse_error *err)
{
    Lapse__QueryRequest body = LAPSE__QUERY_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    table_schema t;
    client_query_keys k;
    client_target tg = {0};
    attr_value pk, v1, v2;
    item *pk_item = NULL;
    arena a;
    int rv;

    if (out == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    *out = NULL;
    if (c == NULL || table == NULL || o == NULL || o->partition_key_json == NULL) {
        return client_err(err, LAPSE_EINVAL, "query: table and partition key value required");
    }
    if ((rv = client_table(c, table, &t, err)) != 0) {
        return rv;
    }
    arena_init(&a);
    item_value_init_null(&pk);
    item_value_init_null(&v1);
    item_value_init_null(&v2);
    if ((rv = route_query(&t, index, o, &pk, &tg, &k, &pk_item, err)) != 0 ||
        (rv = query_sk(&k, o, &a, &v1, &v2, &body.sort_key, err)) != 0 ||
        (rv = fill_query(c, table, &k, &tg, o, &a, &pk, &body, err)) != 0) {
        goto out;
    }
    req.body_case = LAPSE__REQUEST__BODY_QUERY;
    req.query = &body;
    tg.table = table;
    tg.table_id = t.id;
    tg.key = pk_item;
    tg.eventual = o->eventually_consistent != 0;
    if ((rv = client_call_part(c, &tg, &req, 1, &resp, err)) != 0 ||
        (rv = expect_page(resp, err)) != 0 || (rv = page_of_reply(resp, out, err)) != 0) {
        goto out;
    }
    rv = client_ok(err);
out:
    rpc_response_free(resp);
    item_free(pk_item);
    item_value_fini(&pk);
    item_value_fini(&v1);
    item_value_fini(&v2);
    arena_fini(&a);
    return rv;
}

/* ------------------------------------------------------------------------ */
/* Scan                                                                      */
/* ------------------------------------------------------------------------ */

/* How a scan reads: lapse_scan_opts' flags, the client's default applied. */
typedef struct scan_how {
    int hide_expired;
    int eventual;
} scan_how;

/* One ScanRequest for partition part, appended to p. *last receives a copy
 * of the key the node stopped at (caller frees), or NULL when it finished the
 * partition. */
static int scan_one(lapse_client *c, const table_schema *t, uint32_t part, uint32_t limit,
                    scan_how how, const item *start, lapse_page *p, size_t *bytes, item **last,
                    lapse_error *err)
{
    Lapse__ScanRequest body = LAPSE__SCAN_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__Response *resp = NULL;
    char msg[256] = "";
    arena a;
    int rv;

    *last = NULL;
    arena_init(&a);
    body.table = (char *)t->name;
    body.partition = part;
    body.limit = limit;
    body.hide_expired = how.hide_expired != 0;
    body.eventually_consistent = how.eventual != 0;
    if (start != NULL && (body.exclusive_start_key = wire_item_to_pb(&a, start)) == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    req.body_case = LAPSE__REQUEST__BODY_SCAN;
    req.scan = &body;
    client_target tg = {
        .table = t->name, .table_id = t->id, .part = part, .key = NULL, .eventual = how.eventual};
    if ((rv = client_call_part(c, &tg, &req, 1, &resp, err)) != 0 ||
        (rv = expect_page(resp, err)) != 0 || (rv = page_append(p, resp->page, bytes, err)) != 0) {
        goto out;
    }
    if (resp->page->last_evaluated_key != NULL &&
        (rv = wire_item_from_pb(resp->page->last_evaluated_key, last, msg, sizeof msg)) != 0) {
        rv = client_err(err, rv == LAPSE_EINVAL ? LAPSE_EPROTO : rv, "bad last key in reply: %s",
                        msg);
    }
out:
    rpc_response_free(resp);
    arena_fini(&a);
    return rv;
}

int lapse_scan(lapse_client *c, const char *table, const lapse_scan_opts *o, lapse_page **out,
               lapse_error *err)
{
    lapse_page *p = NULL;
    item *start = NULL;
    table_schema t;
    size_t bytes = 0;
    int rv;

    if (out == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    *out = NULL;
    if (c == NULL || table == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    if ((rv = client_table(c, table, &t, err)) != 0) {
        return rv;
    }
    uint64_t nparts = t.partitions, first = 0, end = nparts;
    if (o != NULL && o->total_segments > 0) {
        if (o->segment >= o->total_segments) {
            return client_err(err, LAPSE_EINVAL, "segment %u is not below total_segments %u",
                              o->segment, o->total_segments);
        }
        first = (uint64_t)o->segment * nparts / o->total_segments;
        end = ((uint64_t)o->segment + 1) * nparts / o->total_segments;
    }
    uint32_t part = (uint32_t)first;
    if (o != NULL && o->exclusive_start_key != NULL) {
        if ((rv = client_partition_of(&t, o->exclusive_start_key->it, &part, err)) != 0) {
            return rv;
        }
        if (part < first || part >= end) {
            return client_err(err, LAPSE_EINVAL,
                              "exclusive start key lies outside this scan segment");
        }
        if ((start = item_dup(o->exclusive_start_key->it)) == NULL) {
            return client_err(err, LAPSE_ENOMEM, "out of memory");
        }
    }
    if ((p = calloc(1, sizeof *p)) == NULL) {
        rv = client_err(err, LAPSE_ENOMEM, "out of memory");
        goto out;
    }
    unsigned limit = o != NULL ? o->limit : 0;
    scan_how how = {client_hide_expired(c, o != NULL ? o->hide_expired : 0),
                    o != NULL && o->eventually_consistent};
    while (part < end) {
        item *last = NULL;
        uint32_t want = limit > 0 ? (uint32_t)(limit - p->n) : 0;
        rv = scan_one(c, &t, part, want, how, start, p, &bytes, &last, err);
        item_free(start);
        start = NULL;
        if (rv != 0) {
            goto out;
        }
        int full = (limit > 0 && p->n >= limit) || bytes >= PAGE_MAX_BYTES;
        if (last != NULL) {
            /* The node stopped inside the partition: at our limit or at its
             * page size. Either way hand the caller its key. */
            if ((p->last_key = client_item_wrap(last)) == NULL) {
                item_free(last);
                rv = client_err(err, LAPSE_ENOMEM, "out of memory");
                goto out;
            }
            break;
        }
        part++;
        if (full && part < end && p->n > 0) {
            /* Partition done but the page is full: continue after the last
             * item returned, which hashes to the finished partition. */
            if ((rv = page_set_last_item(p, &t, p->items[p->n - 1].it, err)) != 0) {
                goto out;
            }
            break;
        }
    }
    *out = p;
    p = NULL;
    rv = client_ok(err);
out:
    item_free(start);
    lapse_page_free(p);
    return rv;
}

int lapse_partition_owners(lapse_client *c, const char *table, uint32_t **owners, size_t *n,
                           lapse_error *err)
{
    table_schema t;
    int rv;

    if (owners == NULL || n == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    *owners = NULL;
    *n = 0;
    if (c == NULL || table == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    if ((rv = client_table(c, table, &t, err)) != 0) {
        return rv;
    }
    pthread_mutex_lock(&c->mu);
    const pmap_table *pt = c->map != NULL ? pmap_table_find(c->map, table) : NULL;
    uint32_t parts = pt != NULL ? pt->schema.partitions : 0;
    uint32_t *v = pt != NULL ? malloc((parts ? parts : 1) * sizeof *v) : NULL;
    for (uint32_t p = 0; v != NULL && p < parts; p++) {
        v[p] = pmap_owner(pt, p);
    }
    pthread_mutex_unlock(&c->mu);
    if (pt == NULL) {
        return client_err(err, LAPSE_ENOTFOUND, "table \"%s\" does not exist", table);
    }
    if (v == NULL) {
        return client_err(err, LAPSE_ENOMEM, "out of memory");
    }
    *owners = v;
    *n = parts;
    return client_ok(err);
}

int lapse_key_schema(lapse_client *c, const char *table, const char *index, char *pk, char *sk,
                     int *is_gsi, lapse_error *err)
{
    table_schema t;
    int rv;

    if (pk == NULL || sk == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    pk[0] = sk[0] = '\0';
    if (is_gsi != NULL) {
        *is_gsi = 0;
    }
    if (c == NULL || table == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    if ((rv = client_table(c, table, &t, err)) != 0) {
        return rv;
    }
    _Static_assert(SCHEMA_MAX_KEY_NAME <= LAPSE_KEY_NAME_MAX, "key names fit");
    if (index == NULL || index[0] == '\0') {
        snprintf(pk, LAPSE_KEY_NAME_MAX + 1, "%s", t.pk.name);
        snprintf(sk, LAPSE_KEY_NAME_MAX + 1, "%s", t.sk.name);
        return 0;
    }
    for (uint32_t i = 0; i < t.nlsi; i++) {
        if (strcmp(t.lsi[i].name, index) == 0) {
            snprintf(pk, LAPSE_KEY_NAME_MAX + 1, "%s", t.pk.name);
            snprintf(sk, LAPSE_KEY_NAME_MAX + 1, "%s", t.lsi[i].sk.name);
            return 0;
        }
    }
    for (uint32_t i = 0; i < t.ngsi; i++) {
        if (strcmp(t.gsi[i].name, index) == 0) {
            snprintf(pk, LAPSE_KEY_NAME_MAX + 1, "%s", t.gsi[i].pk.name);
            snprintf(sk, LAPSE_KEY_NAME_MAX + 1, "%s", t.gsi[i].sk.name);
            if (is_gsi != NULL) {
                *is_gsi = 1;
            }
            return 0;
        }
    }
    return client_err(err, LAPSE_ENOTFOUND, "table \"%s\" has no index \"%s\"", table, index);
}

/* 'S', 'N' or 'B' of a key type; 0 for none. */
static char type_letter(attr_type t)
{
    return t == ATTR_S ? 'S' : t == ATTR_N ? 'N' : t == ATTR_B ? 'B' : 0;
}

int lapse_index_describe(lapse_client *c, const char *table, const char *index,
                         lapse_index_info *out, lapse_error *err)
{
    table_schema t;
    int rv;

    if (out == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    memset(out, 0, sizeof *out);
    if (c == NULL || table == NULL || index == NULL) {
        return client_err(err, LAPSE_EINVAL, "NULL argument");
    }
    if ((rv = client_table(c, table, &t, err)) != 0) {
        return rv;
    }
    const index_def *d = NULL;
    for (uint32_t i = 0; i < t.nlsi && d == NULL; i++) {
        d = strcmp(t.lsi[i].name, index) == 0 ? &t.lsi[i] : NULL;
    }
    for (uint32_t i = 0; i < t.ngsi && d == NULL; i++) {
        d = strcmp(t.gsi[i].name, index) == 0 ? &t.gsi[i] : NULL;
        out->is_gsi = d != NULL;
    }
    if (d == NULL) {
        out->is_gsi = 0;
        return client_err(err, LAPSE_ENOTFOUND, "table \"%s\" has no index \"%s\"", table, index);
    }
    const key_def *pk = out->is_gsi ? &d->pk : &t.pk;
    snprintf(out->table_pk, sizeof out->table_pk, "%s", t.pk.name);
    snprintf(out->table_sk, sizeof out->table_sk, "%s", t.sk.name);
    snprintf(out->pk, sizeof out->pk, "%s", pk->name);
    snprintf(out->sk, sizeof out->sk, "%s", d->sk.name);
    out->pk_type = type_letter(pk->type);
    out->sk_type = d->sk.name[0] != '\0' ? type_letter(d->sk.type) : 0;
    out->projection = d->projection == INDEX_PROJECT_KEYS ? LAPSE_PROJECT_KEYS : LAPSE_PROJECT_ALL;
    out->table_created_ms = t.created_ms;
    return client_ok(err);
}
