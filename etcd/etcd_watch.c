/*
 * etcd_watch.c: watches through /v3/watch (etcd.h).
 *
 * A watch is one thread driving one streaming POST at a time with a curl
 * multi handle, so etcd_watch_stop can wake it (curl_multi_wakeup) however
 * quiet the stream is. The gateway streams one JSON object per line:
 *   {"result":{"created":true,...}}               the stream is set up
 *   {"result":{"events":[...],"header":{...}}}    changes
 *   {"result":{"canceled":true,"compact_revision":"R"}}  history gone
 *   {"error":{...}}                                 the stream failed
 * Every stream asks etcd to cancel it when its member loses its leader
 * (gRPC metadata hasleader=true), so a member cut off from the others cannot
 * keep a watch quiet while the cluster moves on. After any end the watch
 * opens a new stream on the next member, from the revision after the last
 * one delivered (invariant 3 of etcd.h); a stream that ends without showing
 * anything waits 100 ms, doubling to at most 1 s, before the next.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "../common/log.h"
#include "etcd_int.h"

struct etcd_watch {
    etcd *ec;
    char *key;
    int prefix;
    etcd_watch_fn fn;
    void *arg;
    pthread_t thread;
    CURLM *multi;
    atomic_int stop;
    int64_t next_rev; /* the stream resumes here; 0 before the first one */
    int64_t seen_rev; /* the newest revision shown so far */
    buf line;         /* a partial line of the current stream */
    int ended;        /* the current stream is to be dropped */
    int progressed;   /* the current stream showed something */
    char why[256];    /* why the last stream ended */
};

/* ------------------------------------------------------------------------
 * One line of the stream
 * ---------------------------------------------------------------------- */

static void deliver_events(etcd_watch *w, json_t *events, int64_t rev)
{
    size_t n = json_array_size(events);
    etcd_event *ev = calloc(n, sizeof(*ev));
    if (ev == NULL) {
        w->ended = 1; /* resume from next_rev on a new stream */
        snprintf(w->why, sizeof(w->why), "out of memory");
        return;
    }
    size_t k = 0;
    for (; k < n; k++) {
        json_t *e = json_array_get(events, k);
        const char *type = json_string_value(json_object_get(e, "type"));
        ev[k].deleted = type != NULL && strcmp(type, "DELETE") == 0;
        if (etcd_json_kv(json_object_get(e, "kv"), &ev[k].kv) != 0) {
            break;
        }
    }
    if (k < n) {
        w->ended = 1;
        snprintf(w->why, sizeof(w->why), "an event does not decode");
    } else if (n > 0) {
        w->fn(w->arg, ETCD_WATCH_EVENTS, ev, n, rev);
        w->next_rev = ev[n - 1].kv.mod_rev + 1;
    }
    for (size_t i = 0; i < k; i++) {
        etcd_kv_fini(&ev[i].kv);
    }
    free(ev);
}

static void on_line(etcd_watch *w, const char *p, size_t n)
{
    json_error_t jerr;
    json_t *root = json_loadb(p, n, 0, &jerr);
    json_t *r = json_object_get(root, "result");
    if (r == NULL) {
        json_t *e = json_object_get(root, "error");
        const char *msg = json_string_value(json_object_get(e, "message"));
        snprintf(w->why, sizeof(w->why), "%s", msg != NULL ? msg : "a line is not a result");
        w->ended = 1;
        json_decref(root);
        return;
    }
    int64_t rev = etcd_json_i64(json_object_get(r, "header"), "revision");
    if (rev > w->seen_rev) {
        w->seen_rev = rev;
    }
    int64_t compacted = etcd_json_i64(r, "compact_revision");
    if (compacted > 0) {
        w->progressed = 1;
        int64_t resume = w->fn(w->arg, ETCD_WATCH_COMPACTED, NULL, 0, compacted);
        w->next_rev = resume > 0 ? resume : compacted;
        w->ended = 1;
        snprintf(w->why, sizeof(w->why), "history compacted at revision %lld",
                 (long long)compacted);
    } else if (json_is_true(json_object_get(r, "canceled"))) {
        const char *reason = json_string_value(json_object_get(r, "cancel_reason"));
        snprintf(w->why, sizeof(w->why), "canceled: %s", reason != NULL ? reason : "no reason");
        w->ended = 1;
    } else if (json_is_true(json_object_get(r, "created"))) {
        w->progressed = 1;
        if (w->next_rev == 0) {
            w->next_rev = rev + 1; /* "from now on" is fixed once */
        }
        w->fn(w->arg, ETCD_WATCH_CONNECTED, NULL, 0, w->seen_rev);
    } else {
        deliver_events(w, json_object_get(r, "events"), w->seen_rev);
    }
    json_decref(root);
}

static size_t on_stream(char *p, size_t size, size_t n, void *arg)
{
    etcd_watch *w = arg;
    size_t len = size * n;
    if (w->ended || buf_append(&w->line, p, len) != 0) {
        return 0; /* ends this stream */
    }
    for (;;) {
        uint8_t *nl = memchr(w->line.data, '\n', w->line.len);
        if (nl == NULL || w->ended) {
            break;
        }
        size_t k = (size_t)(nl - w->line.data);
        if (k > 0) {
            on_line(w, (const char *)w->line.data, k);
        }
        memmove(w->line.data, nl + 1, w->line.len - k - 1);
        w->line.len -= k + 1;
    }
    return w->ended ? 0 : len;
}

/* ------------------------------------------------------------------------
 * Streams
 * ---------------------------------------------------------------------- */

static char *create_body(etcd_watch *w)
{
    json_t *c = json_object();
    json_t *req = json_pack("{s:o}", "create_request", c);
    if (req == NULL || etcd_json_set_range(c, w->key, w->prefix) != 0 ||
        (w->next_rev > 0 && etcd_json_set_i64(c, "start_revision", w->next_rev) != 0)) {
        json_decref(req);
        return NULL;
    }
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    return body;
}

/* Runs one stream on member i until it ends or the watch stops. */
static void run_stream(etcd_watch *w, int i)
{
    char url[512];
    if (atomic_load(&w->ec->cut)) {
        snprintf(w->why, sizeof(w->why), "cut off (debug fault)");
        return;
    }
    snprintf(url, sizeof(url), "%s/v3/watch", w->ec->endpoints[i]);
    char *body = create_body(w);
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    hdrs = hdrs != NULL ? curl_slist_append(hdrs, "Grpc-Metadata-hasleader: true") : NULL;
    if (body == NULL || h == NULL || hdrs == NULL) {
        snprintf(w->why, sizeof(w->why), "out of memory");
        goto done;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
    buf_clear(&w->line);
    w->ended = 0;
    w->progressed = 0;
    snprintf(w->why, sizeof(w->why), "the stream ended");
    curl_multi_add_handle(w->multi, h);
    int running = 1;
    while (running && !atomic_load(&w->stop)) {
        if (atomic_load(&w->ec->cut)) {
            snprintf(w->why, sizeof(w->why), "cut off (debug fault)");
            break;
        }
        if (curl_multi_perform(w->multi, &running) != CURLM_OK) {
            break;
        }
        if (running) {
            curl_multi_poll(w->multi, NULL, 0, 1000, NULL);
        }
    }
    int left;
    CURLMsg *m;
    while ((m = curl_multi_info_read(w->multi, &left)) != NULL) {
        if (m->msg == CURLMSG_DONE && m->data.result != CURLE_OK && !w->ended) {
            snprintf(w->why, sizeof(w->why), "%s", curl_easy_strerror(m->data.result));
        }
    }
    curl_multi_remove_handle(w->multi, h);
done:
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    free(body);
}

static void *watch_main(void *arg)
{
    etcd_watch *w = arg;
    int i = atomic_load(&w->ec->preferred);
    int64_t backoff_ms = 100;
    while (!atomic_load(&w->stop)) {
        run_stream(w, i);
        if (atomic_load(&w->stop)) {
            break;
        }
        log_msg(LOG_DEBUG, "etcd watch %s on %s: %s", w->key, w->ec->endpoints[i], w->why);
        w->fn(w->arg, ETCD_WATCH_LOST, NULL, 0, w->seen_rev);
        if (w->progressed) {
            backoff_ms = 100;
            if (strncmp(w->why, "history compacted", 17) == 0) {
                continue; /* same member, at once */
            }
        } else {
            curl_multi_poll(w->multi, NULL, 0, (int)backoff_ms, NULL); /* stop wakes it */
            backoff_ms = backoff_ms * 2 < 1000 ? backoff_ms * 2 : 1000;
        }
        i = (i + 1) % w->ec->n;
    }
    return NULL;
}

int etcd_watch_start(etcd_watch **out, etcd *ec, const char *key, int prefix, int64_t start_rev,
                     etcd_watch_fn fn, void *arg, char *err, size_t errlen)
{
    *out = NULL;
    if (key == NULL || fn == NULL || start_rev < 0) {
        snprintf(err, errlen, "etcd: a watch needs a key, a callback and a revision >= 0");
        return LAPSE_EINVAL;
    }
    etcd_watch *w = calloc(1, sizeof(*w));
    if (w == NULL || (w->key = strdup(key)) == NULL || (w->multi = curl_multi_init()) == NULL) {
        if (w != NULL) {
            free(w->key);
        }
        free(w);
        return LAPSE_ENOMEM;
    }
    w->ec = ec;
    w->prefix = prefix;
    w->fn = fn;
    w->arg = arg;
    w->next_rev = start_rev;
    buf_init(&w->line);
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        curl_multi_cleanup(w->multi);
        free(w->key);
        free(w);
        snprintf(err, errlen, "etcd: cannot start a watch thread");
        return LAPSE_ENOMEM;
    }
    *out = w;
    return 0;
}

void etcd_watch_stop(etcd_watch *w)
{
    if (w == NULL) {
        return;
    }
    atomic_store(&w->stop, 1);
    curl_multi_wakeup(w->multi);
    pthread_join(w->thread, NULL);
    curl_multi_cleanup(w->multi);
    buf_fini(&w->line);
    free(w->key);
    free(w);
}
