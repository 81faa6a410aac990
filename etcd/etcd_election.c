/*
 * etcd_election.c: elections (etcd.h), by etcd's own recipe (its Go
 * client's concurrency.Election, and the keys its v3election service and
 * `etcdctl elect` use):
 *
 *   - a campaigner puts NAME/<lease in hex> = value with its lease, once
 *     (a transaction: only if that key does not exist yet);
 *   - the campaigner whose key under NAME/ has the lowest create revision
 *     leads; the others wait for the keys before theirs to go (resigned,
 *     or their lease expired);
 *   - resigning deletes the key, only if it is still the one created then.
 *
 * Waiting is a poll of the NAME/ range every 50 ms, bounded by the caller's
 * wait: no request stays open on the server, so a campaign that times out
 * leaves nothing behind but its key, which keeps its place in the queue
 * (the gateway's /v3/election/campaign instead withdraws a campaign whose
 * request ends, which can race with the next one of the same lease).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "etcd_int.h"

#define POLL_MS 50

void etcd_leader_fini(etcd_leader *l)
{
    if (l != NULL) {
        free(l->name);
        free(l->key);
        memset(l, 0, sizeof(*l));
    }
}

/* The keys under "name/" oldest first (by create revision). */
static int queue(etcd *ec, const char *name, etcd_kvs *out, char *err, size_t errlen)
{
    char prefix[512];
    snprintf(prefix, sizeof(prefix), "%s/", name);
    return etcd_range_by_create(ec, prefix, out, err, errlen);
}

int etcd_campaign(etcd *ec, const char *name, int64_t lease, const void *value, size_t len,
                  int64_t wait_ms, etcd_leader *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    clock_mono deadline = clock_mono_after_ms(wait_ms);
    char key[512];
    snprintf(key, sizeof(key), "%s/%" PRIx64, name, (uint64_t)lease);
    /* Join the queue, or find the place taken earlier with this lease. */
    etcd_cmp absent = {.key = key, .target = ETCD_CREATE, .op = ETCD_EQ, .num = 0};
    etcd_op put = {
        .kind = ETCD_OP_PUT, .key = key, .value = value, .value_len = len, .lease = lease};
    etcd_op get = {.kind = ETCD_OP_RANGE, .key = key};
    etcd_txn_result res;
    int rv = etcd_txn(ec, &absent, 1, &put, 1, &get, 1, &res, err, errlen);
    if (rv != 0) {
        return rv;
    }
    int64_t rev = res.succeeded ? res.revision
                  : res.n == 1 && res.ranges[0].n == 1 ? res.ranges[0].kv[0].create_rev
                                                       : 0;
    etcd_txn_result_fini(&res);
    if (rev == 0) {
        snprintf(err, errlen, "etcd: campaign key %s vanished as it was read", key);
        return LAPSE_EUNAVAILABLE;
    }
    for (;;) {
        etcd_kvs q;
        if ((rv = queue(ec, name, &q, err, errlen)) != 0) {
            return rv;
        }
        int mine = -1;
        for (size_t i = 0; i < q.n && mine < 0; i++) {
            if (strcmp(q.kv[i].key, key) == 0 && q.kv[i].create_rev == rev) {
                mine = (int)i;
            }
        }
        etcd_kvs_fini(&q);
        if (mine < 0) {
            snprintf(err, errlen, "etcd: campaign key %s is gone (lease %" PRIx64 " expired?)",
                     key, (uint64_t)lease);
            return LAPSE_ENOTFOUND;
        }
        if (mine == 0) {
            out->name = strdup(name);
            out->key = strdup(key);
            out->rev = rev;
            out->lease = lease;
            if (out->name == NULL || out->key == NULL) {
                etcd_leader_fini(out);
                return LAPSE_ENOMEM;
            }
            return 0;
        }
        int64_t left = clock_mono_remaining_ms(deadline);
        if (left == 0) {
            snprintf(err, errlen, "etcd: %s is led by another; still queued after %lld ms", name,
                     (long long)wait_ms);
            return LAPSE_ETIMEDOUT;
        }
        clock_sleep_ms(left < POLL_MS ? left : POLL_MS);
    }
}

int etcd_election_leader(etcd *ec, const char *name, etcd_kv *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    etcd_kvs q;
    int rv = queue(ec, name, &q, err, errlen);
    if (rv != 0) {
        return rv;
    }
    if (q.n == 0) {
        etcd_kvs_fini(&q);
        snprintf(err, errlen, "etcd: nobody leads %s", name);
        return LAPSE_ENOTFOUND;
    }
    *out = q.kv[0];
    memset(&q.kv[0], 0, sizeof(q.kv[0])); /* moved to *out */
    etcd_kvs_fini(&q);
    return 0;
}

int etcd_resign(etcd *ec, const etcd_leader *l, char *err, size_t errlen)
{
    /* Only the key this leadership was won with: never a later one of the
     * same lease's name. */
    etcd_cmp same = {.key = l->key, .target = ETCD_CREATE, .op = ETCD_EQ, .num = l->rev};
    etcd_op del = {.kind = ETCD_OP_DELETE, .key = l->key};
    etcd_txn_result res;
    int rv = etcd_txn(ec, &same, 1, &del, 1, NULL, 0, &res, err, errlen);
    if (rv == 0) {
        etcd_txn_result_fini(&res);
    }
    return rv;
}
