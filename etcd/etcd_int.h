/*
 * etcd_int.h: what the etcd module's files share (etcd_http.c holds it): the
 * client struct, one gateway call, and the gateway's JSON conventions.
 * Not for use outside etcd/.
 *
 * Files and their one-way calls:
 *   etcd_kv.c, etcd_lease.c, etcd_watch.c  -->  etcd_http.c
 *   etcd_election.c  -->  etcd_kv.c (txn, sorted range), etcd_http.c
 */
#ifndef LAPSE_ETCD_INT_H
#define LAPSE_ETCD_INT_H

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "etcd.h"

#define ETCD_MAX_ENDPOINTS 16
#define ETCD_POOL 8

struct etcd {
    char *endpoint_list;                  /* as given to etcd_open */
    char *endpoints[ETCD_MAX_ENDPOINTS];  /* "http://host:port", no trailing '/' */
    int n;                                /* endpoints in use */
    atomic_int preferred;                 /* index of the member that answered last */
    int timeout_ms;                       /* per call */
    pthread_mutex_t pool_lock;            /* guards pool and npool */
    CURL *pool[ETCD_POOL];                /* idle easy handles, connections kept */
    int npool;
    atomic_int cut; /* etcd_debug_cut */
};

/* How a call may be retried on another member (invariant 2 of etcd.h). */
enum etcd_call_kind {
    ETCD_READ,    /* any failure moves on to the next member */
    ETCD_MUTATION /* only a refused connection moves on */
};

/* POSTs req (borrowed) to path ("/v3/kv/range") and parses the answer into
 * *resp (caller json_decref's). timeout_ms 0 means the client's. Returns 0
 * or an error with err naming the member. */
int etcd_call(etcd *ec, const char *path, json_t *req, enum etcd_call_kind kind,
              int64_t timeout_ms, json_t **resp, char *err, size_t errlen);

/* Reads every key starting with prefix, oldest (create revision) first:
 * an election's queue (etcd_election.c). As etcd_range otherwise. */
int etcd_range_by_create(etcd *ec, const char *prefix, etcd_kvs *out, char *err, size_t errlen);

/* Maps a gRPC status code from the gateway's error body to a Lapse code. */
int etcd_grpc_status(int64_t code);

/* An easy handle from the pool (or a new one), reset for a new request; and
 * back into the pool (or cleaned up when it is full). */
CURL *etcd_handle_take(etcd *ec);
void etcd_handle_give(etcd *ec, CURL *h);

/* JSON: int64 fields are strings ("12"); absent fields are their zero. */
int64_t etcd_json_i64(json_t *obj, const char *name);
/* Sets obj[name] to the base64 of p[0..n). Returns 0 or LAPSE_ENOMEM. */
int etcd_json_set_b64(json_t *obj, const char *name, const void *p, size_t n);
/* Decodes the base64 field name of obj (absent: empty) into a malloc'd,
 * NUL-terminated *out (caller frees). Returns 0, LAPSE_EPROTO or
 * LAPSE_ENOMEM. */
int etcd_json_b64(json_t *obj, const char *name, char **out, size_t *len);
/* Sets obj[name] to the int64 v as a string. Returns 0 or LAPSE_ENOMEM. */
int etcd_json_set_i64(json_t *obj, const char *name, int64_t v);
/* Sets "key" to key and, for a prefix, "range_end" to the first key after
 * every key starting with it ("\0" for the empty prefix: every key). */
int etcd_json_set_range(json_t *obj, const char *key, int prefix);
/* Decodes one gateway kv object into *out (caller frees with etcd_kv_fini).
 * Returns 0, LAPSE_EPROTO or LAPSE_ENOMEM; on error *out is zeroed. */
int etcd_json_kv(json_t *obj, etcd_kv *out);
/* Decodes a range response ({"header":..,"kvs":[..],"more":..}). */
int etcd_json_kvs(json_t *obj, etcd_kvs *out);

#endif
