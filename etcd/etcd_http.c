/*
 * etcd_http.c: the client, its members, and one call to etcd's HTTP/JSON
 * gateway (etcd.h, etcd_int.h).
 *
 * A call is one POST of a JSON body to one member. Which member: the one that
 * answered last (ec->preferred), then the others in order, round after round.
 * How long: the client's timeout for the whole call; a read gives each member
 * it tries an equal share of what is left (at least 200 ms), so one stalled
 * member (SIGSTOP, a lost network) cannot spend the whole budget. A mutation moves on only when its
 * member refused the connection or answered that it has no leader, which
 * prove it was not applied (etcd's own client retries on just these).
 */
#include "etcd_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/base64.h"
#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/lapse_err.h"

/* ------------------------------------------------------------------------
 * The client
 * ---------------------------------------------------------------------- */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rv = CURLE_OK;

/* curl_global_init is not thread-safe: once per process, before any
 * handle. Never undone (curl_global_cleanup is not thread-safe either). */
static void global_init(void)
{
    global_rv = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Appends endpoint s[0..n) (whitespace trimmed, "http://" added when it has no
 * scheme, a trailing '/' dropped) to ec. */
static int add_endpoint(etcd *ec, const char *s, size_t n, char *err, size_t errlen)
{
    while (n > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '/')) {
        n--;
    }
    if (n == 0) {
        snprintf(err, errlen, "etcd: empty endpoint in \"%s\"", ec->endpoint_list);
        return LAPSE_EINVAL;
    }
    if (ec->n == ETCD_MAX_ENDPOINTS) {
        snprintf(err, errlen, "etcd: more than %d endpoints", ETCD_MAX_ENDPOINTS);
        return LAPSE_EINVAL;
    }
    int has_scheme = memmem(s, n, "://", 3) != NULL;
    if (has_scheme && !(n > 7 && memcmp(s, "http://", 7) == 0)) {
        snprintf(err, errlen, "etcd: endpoint \"%.*s\" is not http://HOST:PORT", (int)n, s);
        return LAPSE_EINVAL;
    }
    char *e = malloc(n + 8);
    if (e == NULL) {
        return LAPSE_ENOMEM;
    }
    snprintf(e, n + 8, "%s%.*s", has_scheme ? "" : "http://", (int)n, s);
    ec->endpoints[ec->n++] = e;
    return 0;
}

int etcd_open(etcd **out, const char *endpoints, int timeout_ms, char *err, size_t errlen)
{
    *out = NULL;
    pthread_once(&global_once, global_init);
    if (global_rv != CURLE_OK) {
        snprintf(err, errlen, "etcd: curl_global_init: %s", curl_easy_strerror(global_rv));
        return LAPSE_EINTERNAL;
    }
    if (endpoints == NULL || endpoints[0] == '\0') {
        snprintf(err, errlen, "etcd: no endpoints");
        return LAPSE_EINVAL;
    }
    if (timeout_ms <= 0) {
        snprintf(err, errlen, "etcd: timeout %d ms is not positive", timeout_ms);
        return LAPSE_EINVAL;
    }
    etcd *ec = calloc(1, sizeof(*ec));
    if (ec == NULL || (ec->endpoint_list = strdup(endpoints)) == NULL) {
        free(ec);
        return LAPSE_ENOMEM;
    }
    ec->timeout_ms = timeout_ms;
    pthread_mutex_init(&ec->pool_lock, NULL);
    int rv = 0;
    const char *p = endpoints;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
        if ((rv = add_endpoint(ec, p, n, err, errlen)) != 0) {
            etcd_close(ec);
            return rv;
        }
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
    *out = ec;
    return 0;
}

void etcd_close(etcd *ec)
{
    if (ec == NULL) {
        return;
    }
    for (int i = 0; i < ec->npool; i++) {
        curl_easy_cleanup(ec->pool[i]);
    }
    for (int i = 0; i < ec->n; i++) {
        free(ec->endpoints[i]);
    }
    pthread_mutex_destroy(&ec->pool_lock);
    free(ec->endpoint_list);
    free(ec);
}

const char *etcd_endpoints(const etcd *ec)
{
    return ec->endpoint_list;
}

CURL *etcd_handle_take(etcd *ec)
{
    CURL *h = NULL;
    pthread_mutex_lock(&ec->pool_lock);
    if (ec->npool > 0) {
        h = ec->pool[--ec->npool];
    }
    pthread_mutex_unlock(&ec->pool_lock);
    if (h == NULL) {
        return curl_easy_init();
    }
    curl_easy_reset(h); /* keeps the connection and DNS caches */
    return h;
}

void etcd_handle_give(etcd *ec, CURL *h)
{
    if (h == NULL) {
        return;
    }
    pthread_mutex_lock(&ec->pool_lock);
    if (ec->npool < ETCD_POOL) {
        ec->pool[ec->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&ec->pool_lock);
    if (h != NULL) {
        curl_easy_cleanup(h);
    }
}

/* ------------------------------------------------------------------------
 * One call
 * ---------------------------------------------------------------------- */

int etcd_grpc_status(int64_t code)
{
    switch (code) {
    case 3: /* InvalidArgument */
        return LAPSE_EINVAL;
    case 5: /* NotFound */
        return LAPSE_ENOTFOUND;
    case 6: /* AlreadyExists */
        return LAPSE_EEXISTS;
    case 9:  /* FailedPrecondition */
    case 11: /* OutOfRange: a compacted or future revision */
        return LAPSE_ESTATE;
    case 7:  /* PermissionDenied */
    case 16: /* Unauthenticated */
        return LAPSE_EPERM;
    case 1:  /* Canceled */
    case 14: /* Unavailable */
        return LAPSE_EUNAVAILABLE;
    case 4: /* DeadlineExceeded */
        return LAPSE_ETIMEDOUT;
    default:
        return LAPSE_EIO;
    }
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    buf *b = arg;
    return buf_append(b, p, size * n) == 0 ? size * n : 0;
}

/* Sends body to member i once. Returns 0 with *resp set, or an error; *retry
 * says whether another member may be tried (see the file comment). */
static int call_one(etcd *ec, int i, const char *path, const char *body, enum etcd_call_kind kind,
                    int64_t budget_ms, json_t **resp, int *retry, char *err, size_t errlen)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", ec->endpoints[i], path);
    CURL *h = etcd_handle_take(ec);
    if (h == NULL) {
        *retry = 0;
        return LAPSE_ENOMEM;
    }
    buf b;
    buf_init(&b);
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)budget_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(budget_ms < 1000 ? budget_ms : 1000));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    etcd_handle_give(ec, h);

    int rv;
    *retry = 0;
    if (cc != CURLE_OK) {
        /* A refused connection sent nothing; anything else may have. */
        *retry = kind == ETCD_READ || cc == CURLE_COULDNT_CONNECT;
        rv = cc == CURLE_OPERATION_TIMEDOUT ? LAPSE_ETIMEDOUT : LAPSE_EUNAVAILABLE;
        snprintf(err, errlen, "etcd %s: %s%s", ec->endpoints[i], curl_easy_strerror(cc),
                 *retry ? "" : " (outcome unknown)");
        buf_fini(&b);
        return rv;
    }
    json_error_t jerr;
    json_t *root = json_loadb(b.data != NULL ? (const char *)b.data : "", b.len, 0, &jerr);
    if (root == NULL || !json_is_object(root)) {
        snprintf(err, errlen, "etcd %s%s: HTTP %ld with a body that is not a JSON object",
                 ec->endpoints[i], path, status);
        json_decref(root);
        buf_fini(&b);
        return LAPSE_EPROTO;
    }
    buf_fini(&b);
    if (status == 200) {
        *resp = root;
        return 0;
    }
    const char *msg = json_string_value(json_object_get(root, "message"));
    if (msg == NULL) {
        msg = json_string_value(json_object_get(root, "error"));
    }
    if (msg == NULL) {
        msg = "no message";
    }
    rv = etcd_grpc_status(etcd_json_i64(root, "code"));
    int no_leader = strstr(msg, "no leader") != NULL;
    *retry = (rv == LAPSE_EUNAVAILABLE || rv == LAPSE_ETIMEDOUT) &&
             (kind == ETCD_READ || no_leader);
    snprintf(err, errlen, "etcd %s: %s%s", ec->endpoints[i], msg,
             kind == ETCD_MUTATION && !*retry && (rv == LAPSE_EUNAVAILABLE || rv == LAPSE_ETIMEDOUT)
                 ? " (outcome unknown)"
                 : "");
    json_decref(root);
    return rv;
}

void etcd_debug_cut(etcd *ec, int cut)
{
    atomic_store(&ec->cut, cut != 0);
}

int etcd_call(etcd *ec, const char *path, json_t *req, enum etcd_call_kind kind,
              int64_t timeout_ms, json_t **resp, char *err, size_t errlen)
{
    *resp = NULL;
    if (atomic_load(&ec->cut)) {
        snprintf(err, errlen, "etcd %s: cut off (debug fault)", ec->endpoint_list);
        return LAPSE_EUNAVAILABLE;
    }
    char *body = json_dumps(req, JSON_COMPACT);
    if (body == NULL) {
        return LAPSE_ENOMEM;
    }
    clock_mono deadline = clock_mono_after_ms(timeout_ms > 0 ? timeout_ms : ec->timeout_ms);
    int i = atomic_load(&ec->preferred);
    int rv = LAPSE_ETIMEDOUT;
    snprintf(err, errlen, "etcd %s: no member answered in time", ec->endpoint_list);
    /* Rounds over the members until one answers, a failure may not be
     * retried, or the time is up: a round that found no leader anywhere
     * (an election, ~0.5-1 s) waits 50 ms and goes again. */
    for (int k = 0;; k++) {
        int64_t left = clock_mono_remaining_ms(deadline);
        if (left <= 0) {
            break;
        }
        if (k > 0 && k % ec->n == 0) {
            clock_sleep_ms(left < 50 ? left : 50);
            if ((left = clock_mono_remaining_ms(deadline)) <= 0) {
                break;
            }
        }
        int64_t budget = left;
        if (kind == ETCD_READ) {
            budget = left / (ec->n - k % ec->n);
            if (budget < 200) {
                budget = left < 200 ? left : 200;
            }
        }
        int retry = 0;
        rv = call_one(ec, i, path, body, kind, budget, resp, &retry, err, errlen);
        if (rv == 0) {
            atomic_store(&ec->preferred, i);
            break;
        }
        /* Whatever happened, the next call starts at another member. */
        i = (i + 1) % ec->n;
        atomic_store(&ec->preferred, i);
        if (!retry) {
            break;
        }
    }
    free(body);
    return rv;
}

/* ------------------------------------------------------------------------
 * The gateway's JSON
 * ---------------------------------------------------------------------- */

int64_t etcd_json_i64(json_t *obj, const char *name)
{
    json_t *v = json_object_get(obj, name);
    if (json_is_integer(v)) {
        return (int64_t)json_integer_value(v);
    }
    const char *s = json_string_value(v);
    return s != NULL ? strtoll(s, NULL, 10) : 0;
}

int etcd_json_set_b64(json_t *obj, const char *name, const void *p, size_t n)
{
    char *s = base64_encode(p, n);
    if (s == NULL || json_object_set_new(obj, name, json_string(s)) != 0) {
        free(s);
        return LAPSE_ENOMEM;
    }
    free(s);
    return 0;
}

int etcd_json_set_i64(json_t *obj, const char *name, int64_t v)
{
    char s[24];
    snprintf(s, sizeof(s), "%lld", (long long)v);
    return json_object_set_new(obj, name, json_string(s)) == 0 ? 0 : LAPSE_ENOMEM;
}

int etcd_json_set_range(json_t *obj, const char *key, int prefix)
{
    size_t n = strlen(key);
    int rv = etcd_json_set_b64(obj, "key", key, n);
    if (rv != 0 || !prefix) {
        return rv;
    }
    /* The range end of a prefix: drop trailing 0xff bytes, then add one to
     * the last byte; when nothing is left, "\0" means "to the end". */
    unsigned char *end = malloc(n + 1);
    if (end == NULL) {
        return LAPSE_ENOMEM;
    }
    memcpy(end, key, n);
    while (n > 0 && end[n - 1] == 0xff) {
        n--;
    }
    if (n > 0) {
        end[n - 1]++;
        rv = etcd_json_set_b64(obj, "range_end", end, n);
    } else {
        rv = etcd_json_set_b64(obj, "range_end", "", 1);
    }
    free(end);
    return rv;
}

int etcd_json_b64(json_t *obj, const char *name, char **out, size_t *len)
{
    const char *s = json_string_value(json_object_get(obj, name));
    uint8_t *d = NULL;
    int rv = base64_decode(s != NULL ? s : "", s != NULL ? strlen(s) : 0, &d, len);
    *out = (char *)d;
    return rv == LAPSE_EINVAL ? LAPSE_EPROTO : rv;
}

void etcd_kv_fini(etcd_kv *kv)
{
    if (kv != NULL) {
        free(kv->key);
        free(kv->value);
        memset(kv, 0, sizeof(*kv));
    }
}

int etcd_json_kv(json_t *obj, etcd_kv *out)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(obj)) {
        return LAPSE_EPROTO;
    }
    int rv = etcd_json_b64(obj, "key", &out->key, &out->key_len);
    if (rv == 0) {
        rv = etcd_json_b64(obj, "value", &out->value, &out->value_len);
    }
    if (rv != 0) {
        etcd_kv_fini(out);
        return rv;
    }
    out->create_rev = etcd_json_i64(obj, "create_revision");
    out->mod_rev = etcd_json_i64(obj, "mod_revision");
    out->version = etcd_json_i64(obj, "version");
    out->lease = etcd_json_i64(obj, "lease");
    return 0;
}

void etcd_kvs_fini(etcd_kvs *kvs)
{
    if (kvs == NULL) {
        return;
    }
    for (size_t i = 0; i < kvs->n; i++) {
        etcd_kv_fini(&kvs->kv[i]);
    }
    free(kvs->kv);
    memset(kvs, 0, sizeof(*kvs));
}

int etcd_json_kvs(json_t *obj, etcd_kvs *out)
{
    memset(out, 0, sizeof(*out));
    out->revision = etcd_json_i64(json_object_get(obj, "header"), "revision");
    out->more = json_is_true(json_object_get(obj, "more"));
    json_t *arr = json_object_get(obj, "kvs");
    size_t n = json_array_size(arr);
    if (n == 0) {
        return 0;
    }
    if ((out->kv = calloc(n, sizeof(*out->kv))) == NULL) {
        return LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        int rv = etcd_json_kv(json_array_get(arr, i), &out->kv[i]);
        if (rv != 0) {
            etcd_kvs_fini(out);
            return rv;
        }
        out->n++;
    }
    return 0;
}
