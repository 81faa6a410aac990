/*
 * etcd_lease.c: leases and the lease keeper (etcd.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "etcd_int.h"

/* ------------------------------------------------------------------------
 * Leases
 * ---------------------------------------------------------------------- */

/* Sends {"ID": id} or {"TTL": ttl} bodies: one int64 field. */
static int call_i64(etcd *ec, const char *path, const char *field, int64_t v,
                    enum etcd_call_kind kind, int64_t timeout_ms, json_t **resp, char *err,
                    size_t errlen)
{
    json_t *req = json_object();
    if (req == NULL || etcd_json_set_i64(req, field, v) != 0) {
        json_decref(req);
        return LAPSE_ENOMEM;
    }
    int rv = etcd_call(ec, path, req, kind, timeout_ms, resp, err, errlen);
    json_decref(req);
    return rv;
}

int etcd_lease_grant(etcd *ec, int64_t ttl_s, int64_t *id, char *err, size_t errlen)
{
    json_t *resp;
    int rv = call_i64(ec, "/v3/lease/grant", "TTL", ttl_s, ETCD_MUTATION, 0, &resp, err, errlen);
    if (rv != 0) {
        return rv;
    }
    *id = etcd_json_i64(resp, "ID");
    json_decref(resp);
    if (*id == 0) {
        snprintf(err, errlen, "etcd: a lease grant answered no ID");
        return LAPSE_EPROTO;
    }
    return 0;
}

/* etcd_lease_keepalive with a timeout of its own. */
static int keepalive(etcd *ec, int64_t id, int64_t timeout_ms, int64_t *ttl_s, char *err,
                     size_t errlen)
{
    json_t *resp;
    /* A renewal is idempotent: any member will do. */
    int rv = call_i64(ec, "/v3/lease/keepalive", "ID", id, ETCD_READ, timeout_ms, &resp, err,
                      errlen);
    if (rv != 0) {
        return rv;
    }
    /* A stream of one answer: {"result":{"ID":..,"TTL":..}}; no TTL means
     * the lease is gone. */
    int64_t ttl = etcd_json_i64(json_object_get(resp, "result"), "TTL");
    json_decref(resp);
    if (ttl_s != NULL) {
        *ttl_s = ttl;
    }
    if (ttl <= 0) {
        snprintf(err, errlen, "etcd: lease %llx has expired", (unsigned long long)id);
        return LAPSE_ENOTFOUND;
    }
    return 0;
}

int etcd_lease_keepalive(etcd *ec, int64_t id, int64_t *ttl_s, char *err, size_t errlen)
{
    return keepalive(ec, id, 0, ttl_s, err, errlen);
}

int etcd_lease_revoke(etcd *ec, int64_t id, char *err, size_t errlen)
{
    json_t *resp;
    int rv = call_i64(ec, "/v3/lease/revoke", "ID", id, ETCD_MUTATION, 0, &resp, err, errlen);
    if (rv == 0) {
        json_decref(resp);
    }
    return rv;
}

/* ------------------------------------------------------------------------
 * The keeper
 *
 * One thread per keeper. Each round, at most one call and then a wait of
 * interval_ms (stop ends the wait at once):
 *   no lease  -> grant; on success GRANTED
 *   lease     -> renew; the lease is LOST when etcd says it is gone, or when
 *                renewals have failed past the expiry the last good one
 *                promised (counted from before that renewal was sent, so
 *                the keeper never believes in a lease longer than etcd does).
 * After LOST the next round grants at once.
 * ---------------------------------------------------------------------- */

struct etcd_keeper {
    etcd *ec;
    int64_t ttl_s;
    int64_t interval_ms;
    etcd_lease_fn fn;
    void *arg;
    pthread_t thread;
    pthread_mutex_t lock; /* guards stop, held and expires_ms */
    pthread_cond_t cond;  /* signalled on stop */
    int stop;
    int64_t held;         /* the lease held now, 0 for none */
    int64_t expires_ms;   /* monotonic instant before which etcd cannot expire it */
};

/* Publishes the lease held (0: none) and when it could expire. */
static void set_held(etcd_keeper *k, int64_t lease, int64_t expires_ms)
{
    pthread_mutex_lock(&k->lock);
    k->held = lease;
    k->expires_ms = expires_ms;
    pthread_mutex_unlock(&k->lock);
}

/* Waits ms unless stopped; returns whether to stop. */
static int keeper_wait(etcd_keeper *k, int64_t ms)
{
    struct timespec until = clock_mono_abstime(ms);
    pthread_mutex_lock(&k->lock);
    while (!k->stop && pthread_cond_timedwait(&k->cond, &k->lock, &until) == 0) {
    }
    int stop = k->stop;
    pthread_mutex_unlock(&k->lock);
    return stop;
}

static void *keeper_main(void *arg)
{
    etcd_keeper *k = arg;
    clock_mono expires = {0};
    char err[256];
    int64_t lease = 0;
    do {
        if (lease == 0) {
            clock_mono sent = clock_mono_now();
            if (etcd_lease_grant(k->ec, k->ttl_s, &lease, err, sizeof(err)) == 0) {
                expires.ms = sent.ms + k->ttl_s * 1000;
                set_held(k, lease, expires.ms);
                k->fn(k->arg, lease, ETCD_LEASE_GRANTED);
            }
            continue;
        }
        clock_mono sent = clock_mono_now();
        int64_t ttl = 0;
        int rv = keepalive(k->ec, lease, k->interval_ms > 200 ? k->interval_ms : 200, &ttl, err,
                           sizeof(err));
        if (rv == 0) {
            expires.ms = sent.ms + ttl * 1000;
            set_held(k, lease, expires.ms);
        } else if (rv == LAPSE_ENOTFOUND || clock_mono_remaining_ms(expires) == 0) {
            set_held(k, 0, 0);
            k->fn(k->arg, lease, ETCD_LEASE_LOST);
            lease = 0;
            continue; /* grant again at once */
        }
    } while (!keeper_wait(k, k->interval_ms));
    return NULL;
}

int etcd_keeper_start(etcd_keeper **out, etcd *ec, int64_t ttl_s, int64_t interval_ms,
                      etcd_lease_fn fn, void *arg, char *err, size_t errlen)
{
    *out = NULL;
    if (ttl_s < 1 || interval_ms < 1 || interval_ms >= ttl_s * 1000 || fn == NULL) {
        snprintf(err, errlen, "etcd: a lease keeper needs ttl >= 1 s and an interval below it");
        return LAPSE_EINVAL;
    }
    etcd_keeper *k = calloc(1, sizeof(*k));
    if (k == NULL) {
        return LAPSE_ENOMEM;
    }
    k->ec = ec;
    k->ttl_s = ttl_s;
    k->interval_ms = interval_ms;
    k->fn = fn;
    k->arg = arg;
    pthread_mutex_init(&k->lock, NULL);
    clock_cond_init_mono(&k->cond);
    if (pthread_create(&k->thread, NULL, keeper_main, k) != 0) {
        pthread_cond_destroy(&k->cond);
        pthread_mutex_destroy(&k->lock);
        free(k);
        snprintf(err, errlen, "etcd: cannot start the lease keeper's thread");
        return LAPSE_ENOMEM;
    }
    *out = k;
    return 0;
}

int64_t etcd_keeper_lease(etcd_keeper *k)
{
    pthread_mutex_lock(&k->lock);
    int64_t lease = k->held;
    pthread_mutex_unlock(&k->lock);
    return lease;
}

int64_t etcd_keeper_valid_ms(etcd_keeper *k, int64_t *lease)
{
    pthread_mutex_lock(&k->lock);
    int64_t held = k->held, left = k->expires_ms - clock_mono_now().ms;
    pthread_mutex_unlock(&k->lock);
    if (lease != NULL) {
        *lease = held;
    }
    return held == 0 || left < 0 ? 0 : left;
}

void etcd_keeper_stop(etcd_keeper *k, int revoke)
{
    if (k == NULL) {
        return;
    }
    pthread_mutex_lock(&k->lock);
    k->stop = 1;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->lock);
    pthread_join(k->thread, NULL);
    int64_t lease = k->held;
    if (revoke && lease != 0) {
        char err[256];
        (void)etcd_lease_revoke(k->ec, lease, err, sizeof(err)); /* expires anyway */
    }
    pthread_cond_destroy(&k->cond);
    pthread_mutex_destroy(&k->lock);
    free(k);
}
