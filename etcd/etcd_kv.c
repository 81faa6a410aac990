/*
 * etcd_kv.c: keys and transactions through /v3/kv (etcd.h).
 *
 * Every read is linearizable (the gateway's default, "serializable" never
 * set), so what it returns may fence or assign.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "etcd_int.h"

/* ------------------------------------------------------------------------
 * Request bodies, shared by the plain calls and a txn's ops
 * ---------------------------------------------------------------------- */

static json_t *range_req(const char *key, int prefix, int64_t rev, int64_t limit)
{
    json_t *r = json_object();
    if (r == NULL || etcd_json_set_range(r, key, prefix) != 0 ||
        (rev > 0 && etcd_json_set_i64(r, "revision", rev) != 0) ||
        (limit > 0 && etcd_json_set_i64(r, "limit", limit) != 0)) {
        json_decref(r);
        return NULL;
    }
    return r;
}

/* The range read of a prefix, oldest key (create revision) first. */
static json_t *range_by_create_req(const char *prefix)
{
    json_t *r = range_req(prefix, 1, 0, 0);
    if (r != NULL && (json_object_set_new(r, "sort_order", json_string("ASCEND")) != 0 ||
                      json_object_set_new(r, "sort_target", json_string("CREATE")) != 0)) {
        json_decref(r);
        return NULL;
    }
    return r;
}

static json_t *put_req(const char *key, const void *value, size_t len, int64_t lease)
{
    json_t *r = json_object();
    if (r == NULL || etcd_json_set_b64(r, "key", key, strlen(key)) != 0 ||
        etcd_json_set_b64(r, "value", value != NULL ? value : "", len) != 0 ||
        (lease != 0 && etcd_json_set_i64(r, "lease", lease) != 0)) {
        json_decref(r);
        return NULL;
    }
    return r;
}

static json_t *delete_req(const char *key, int prefix)
{
    json_t *r = json_object();
    if (r == NULL || etcd_json_set_range(r, key, prefix) != 0) {
        json_decref(r);
        return NULL;
    }
    return r;
}

/* Sends req (consumed) to path. */
static int call_owned(etcd *ec, const char *path, json_t *req, enum etcd_call_kind kind,
                      json_t **resp, char *err, size_t errlen)
{
    if (req == NULL) {
        return LAPSE_ENOMEM;
    }
    int rv = etcd_call(ec, path, req, kind, 0, resp, err, errlen);
    json_decref(req);
    return rv;
}

/* ------------------------------------------------------------------------
 * Keys
 * ---------------------------------------------------------------------- */

/* Sends a range request (consumed) and decodes the answer into *out. */
static int range_call(etcd *ec, const char *key, json_t *req, etcd_kvs *out, char *err,
                      size_t errlen)
{
    memset(out, 0, sizeof(*out));
    json_t *resp;
    int rv = call_owned(ec, "/v3/kv/range", req, ETCD_READ, &resp, err, errlen);
    if (rv != 0) {
        return rv;
    }
    rv = etcd_json_kvs(resp, out);
    if (rv == LAPSE_EPROTO) {
        snprintf(err, errlen, "etcd: a range answer for \"%s\" does not decode", key);
    }
    json_decref(resp);
    return rv;
}

int etcd_range(etcd *ec, const char *key, int prefix, int64_t rev, int64_t limit, etcd_kvs *out,
               char *err, size_t errlen)
{
    return range_call(ec, key, range_req(key, prefix, rev, limit), out, err, errlen);
}

int etcd_range_by_create(etcd *ec, const char *prefix, etcd_kvs *out, char *err, size_t errlen)
{
    return range_call(ec, prefix, range_by_create_req(prefix), out, err, errlen);
}

int etcd_get(etcd *ec, const char *key, etcd_kv *out, int64_t *revision, char *err,
             size_t errlen)
{
    memset(out, 0, sizeof(*out));
    etcd_kvs kvs;
    int rv = etcd_range(ec, key, 0, 0, 1, &kvs, err, errlen);
    if (rv != 0) {
        return rv;
    }
    if (revision != NULL) {
        *revision = kvs.revision;
    }
    if (kvs.n == 0) {
        etcd_kvs_fini(&kvs);
        snprintf(err, errlen, "etcd: no key \"%s\"", key);
        return LAPSE_ENOTFOUND;
    }
    *out = kvs.kv[0];
    memset(&kvs.kv[0], 0, sizeof(kvs.kv[0])); /* moved to *out */
    etcd_kvs_fini(&kvs);
    return 0;
}

int etcd_put(etcd *ec, const char *key, const void *value, size_t len, int64_t lease,
             int64_t *revision, char *err, size_t errlen)
{
    json_t *resp;
    int rv = call_owned(ec, "/v3/kv/put", put_req(key, value, len, lease), ETCD_MUTATION, &resp,
                        err, errlen);
    if (rv != 0) {
        return rv;
    }
    if (revision != NULL) {
        *revision = etcd_json_i64(json_object_get(resp, "header"), "revision");
    }
    json_decref(resp);
    return 0;
}

int etcd_delete(etcd *ec, const char *key, int prefix, int64_t *deleted, char *err, size_t errlen)
{
    json_t *resp;
    int rv = call_owned(ec, "/v3/kv/deleterange", delete_req(key, prefix), ETCD_MUTATION, &resp,
                        err, errlen);
    if (rv != 0) {
        return rv;
    }
    if (deleted != NULL) {
        *deleted = etcd_json_i64(resp, "deleted");
    }
    json_decref(resp);
    return 0;
}

int etcd_compact(etcd *ec, int64_t rev, char *err, size_t errlen)
{
    json_t *req = json_object();
    if (req == NULL || etcd_json_set_i64(req, "revision", rev) != 0 ||
        json_object_set_new(req, "physical", json_true()) != 0) {
        json_decref(req);
        return LAPSE_ENOMEM;
    }
    json_t *resp;
    /* Compacting twice to one revision is harmless: any member will do. */
    int rv = call_owned(ec, "/v3/kv/compaction", req, ETCD_READ, &resp, err, errlen);
    if (rv == 0) {
        json_decref(resp);
    }
    return rv;
}

/* ------------------------------------------------------------------------
 * Transactions
 * ---------------------------------------------------------------------- */

static const char *const target_names[] = {"VERSION", "CREATE", "MOD", "VALUE", "LEASE"};
static const char *const op_names[] = {"EQUAL", "NOT_EQUAL", "LESS", "GREATER"};
/* The field of a compare that holds its operand, by target. */
static const char *const target_fields[] = {"version", "create_revision", "mod_revision", NULL,
                                            "lease"};

static json_t *cmp_json(const etcd_cmp *c)
{
    json_t *o = json_object();
    if (o == NULL || (unsigned)c->target > ETCD_LEASE || (unsigned)c->op > ETCD_GT ||
        etcd_json_set_b64(o, "key", c->key, strlen(c->key)) != 0 ||
        json_object_set_new(o, "target", json_string(target_names[c->target])) != 0 ||
        json_object_set_new(o, "result", json_string(op_names[c->op])) != 0) {
        json_decref(o);
        return NULL;
    }
    int rv = c->target == ETCD_VALUE
                 ? etcd_json_set_b64(o, "value", c->value != NULL ? c->value : "", c->value_len)
                 : etcd_json_set_i64(o, target_fields[c->target], c->num);
    if (rv != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *op_json(const etcd_op *op)
{
    json_t *inner = NULL;
    const char *name = NULL;
    switch (op->kind) {
    case ETCD_OP_PUT:
        inner = put_req(op->key, op->value, op->value_len, op->lease);
        name = "request_put";
        break;
    case ETCD_OP_DELETE:
        inner = delete_req(op->key, op->prefix);
        name = "request_delete_range";
        break;
    case ETCD_OP_RANGE:
        inner = range_req(op->key, op->prefix, 0, 0);
        name = "request_range";
        break;
    }
    json_t *o = json_object();
    if (inner == NULL || o == NULL || json_object_set_new(o, name, inner) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Appends ops[0..n) to a new array named name in req. */
static int add_ops(json_t *req, const char *name, const etcd_op *ops, size_t n)
{
    json_t *arr = json_array();
    if (arr == NULL || json_object_set_new(req, name, arr) != 0) {
        return LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (json_array_append_new(arr, op_json(&ops[i])) != 0) {
            return LAPSE_ENOMEM;
        }
    }
    return 0;
}

void etcd_txn_result_fini(etcd_txn_result *res)
{
    if (res == NULL) {
        return;
    }
    for (size_t i = 0; i < res->n; i++) {
        etcd_kvs_fini(&res->ranges[i]);
    }
    free(res->ranges);
    memset(res, 0, sizeof(*res));
}

/* Fills res from a txn answer; n is the op count of the branch that ran. */
static int txn_result(json_t *resp, size_t n, etcd_txn_result *res)
{
    res->succeeded = json_is_true(json_object_get(resp, "succeeded"));
    res->revision = etcd_json_i64(json_object_get(resp, "header"), "revision");
    if (n == 0) {
        return 0;
    }
    if ((res->ranges = calloc(n, sizeof(*res->ranges))) == NULL) {
        return LAPSE_ENOMEM;
    }
    res->n = n;
    json_t *arr = json_object_get(resp, "responses");
    for (size_t i = 0; i < n && i < json_array_size(arr); i++) {
        json_t *range = json_object_get(json_array_get(arr, i), "response_range");
        int rv = range != NULL ? etcd_json_kvs(range, &res->ranges[i]) : 0;
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

int etcd_txn(etcd *ec, const etcd_cmp *cmp, size_t ncmp, const etcd_op *success, size_t nsuccess,
             const etcd_op *failure, size_t nfailure, etcd_txn_result *res, char *err,
             size_t errlen)
{
    memset(res, 0, sizeof(*res));
    json_t *req = json_object();
    json_t *cmps = json_array();
    int rv = req == NULL || cmps == NULL || json_object_set_new(req, "compare", cmps) != 0
                 ? LAPSE_ENOMEM
                 : 0;
    for (size_t i = 0; rv == 0 && i < ncmp; i++) {
        json_t *c = cmp_json(&cmp[i]);
        rv = c == NULL || json_array_append_new(cmps, c) != 0 ? LAPSE_EINVAL : 0;
    }
    if (rv == 0) {
        rv = add_ops(req, "success", success, nsuccess);
    }
    if (rv == 0) {
        rv = add_ops(req, "failure", failure, nfailure);
    }
    if (rv != 0) {
        json_decref(req);
        snprintf(err, errlen, "etcd: cannot build a transaction (%s)", lapse_strerror(rv));
        return rv;
    }
    json_t *resp;
    rv = call_owned(ec, "/v3/kv/txn", req, ETCD_MUTATION, &resp, err, errlen);
    if (rv != 0) {
        return rv;
    }
    int ok = json_is_true(json_object_get(resp, "succeeded"));
    rv = txn_result(resp, ok ? nsuccess : nfailure, res);
    json_decref(resp);
    if (rv != 0) {
        etcd_txn_result_fini(res);
        snprintf(err, errlen, "etcd: a txn answer does not decode");
    }
    return rv;
}
