/*
 * etcd.h: Lapse's client of etcd v3 (the cluster's agreement: leadership,
 * epochs, membership, configuration), through etcd's HTTP/JSON gateway
 * (/v3/kv, /v3/lease, /v3/watch, /v3/election) with libcurl and jansson.
 * This module is the only includer of curl; the gateway's JSON (keys and
 * values base64, int64 as strings, default values left out) stays inside it.
 *
 * A client holds a list of member endpoints ("http://127.0.0.1:2379,...").
 * Each call goes to the member that answered last and moves on to the next
 * member when one cannot be reached, so a client survives the loss of any
 * minority of members. Reads are linearizable (never serializable): a value
 * read here may fence or assign.
 *
 * Thread-safety: an etcd client may be used from any number of threads at
 * once (a small pool of curl handles under a mutex keeps connections open).
 * A watch and a lease keeper each run on a thread of their own and call their
 * callback there, never two calls of one callback at once.
 *
 * Invariants:
 *  1. A call that returns 0 was answered by a member that had a leader; every
 *     read it returns is at least as new as every write acknowledged before it
 *     started.
 *  2. A mutation (put, delete, txn, lease grant and revoke) is sent to a
 *     second member only when the first one refused the connection, i.e. when
 *     it cannot have been applied. Any other failure of a mutation leaves its
 *     outcome unknown (LAPSE_EUNAVAILABLE or LAPSE_ETIMEDOUT; "outcome
 *     unknown" in err): the caller reads again before acting on it.
 *  3. A watch delivers every change of its range once, in revision order,
 *     across disconnects and member failures (it resumes from the revision
 *     after the last one delivered); when etcd has compacted that history it
 *     says so (ETCD_WATCH_COMPACTED) instead of skipping silently.
 *
 * Errors name etcd and the member ("etcd http://127.0.0.1:2379: ...").
 * gRPC codes map onto Lapse's: NotFound -> ENOTFOUND, InvalidArgument ->
 * EINVAL, FailedPrecondition and OutOfRange (a compacted revision) -> ESTATE,
 * Unavailable -> EUNAVAILABLE, DeadlineExceeded -> ETIMEDOUT, others -> EIO.
 */
#ifndef LAPSE_ETCD_H
#define LAPSE_ETCD_H

#include <stddef.h>
#include <stdint.h>

typedef struct etcd etcd;

/* One key-value pair as etcd stores it. key and value are malloc'd and
 * NUL-terminated (the NUL not counted), owned by whatever holds the kv. */
typedef struct etcd_kv {
    char *key;
    size_t key_len;
    char *value;
    size_t value_len;
    int64_t create_rev; /* revision that created the key; 0 for no key */
    int64_t mod_rev;    /* revision of its last change */
    int64_t version;    /* changes since its creation, 1 after the first */
    int64_t lease;      /* the lease it is attached to, 0 for none */
} etcd_kv;

/* The result of a range read. */
typedef struct etcd_kvs {
    etcd_kv *kv;      /* n pairs in key order */
    size_t n;
    int64_t revision; /* the store's revision the read saw */
    int more;         /* more keys matched than the limit allowed */
} etcd_kvs;

/* Frees what a kvs owns and zeroes it. Accepts NULL and zeroed kvs. */
void etcd_kvs_fini(etcd_kvs *kvs);
void etcd_kv_fini(etcd_kv *kv);

/* Opens a client of the members in endpoints, a comma-separated list of
 * http://HOST:PORT URLs. timeout_ms bounds each call (campaigns take their
 * own). Nothing is sent: a client opens while every member is down. On
 * success *out is the caller's (etcd_close). Returns 0, LAPSE_EINVAL (bad
 * list) or LAPSE_ENOMEM. */
int etcd_open(etcd **out, const char *endpoints, int timeout_ms, char *err, size_t errlen);
/* A test hook (the chaos harness's etcd-cut fault, through a node's
 * --debug-fault-dir): while cut is set, every call of ec fails at once as an
 * unreachable cluster would (LAPSE_EUNAVAILABLE), and its watches lose
 * their streams and open none: the process is cut off from etcd while
 * everything else still reaches it. Thread-safe. */
void etcd_debug_cut(etcd *ec, int cut);
void etcd_close(etcd *ec); /* accepts NULL; REQUIRES: its watches and keepers stopped */
/* The endpoint list as given to etcd_open. */
const char *etcd_endpoints(const etcd *ec);

/* ------------------------------------------------------------------------
 * Keys
 * ---------------------------------------------------------------------- */

/* Reads key, or every key starting with key when prefix is set, at the
 * current revision (rev 0) or at rev; at most limit pairs (0: no limit).
 * *out is the caller's (etcd_kvs_fini) on success; a missing key is an empty
 * result, not an error. Returns 0 or an error (LAPSE_ESTATE: rev compacted). */
int etcd_range(etcd *ec, const char *key, int prefix, int64_t rev, int64_t limit, etcd_kvs *out,
               char *err, size_t errlen);
/* Reads one key into *out (caller frees with etcd_kv_fini). Returns 0,
 * LAPSE_ENOTFOUND when it does not exist (*out zeroed) or an error. When
 * revision is not NULL it gets the store's revision the read saw. */
int etcd_get(etcd *ec, const char *key, etcd_kv *out, int64_t *revision, char *err,
             size_t errlen);
/* Writes key = value[0..len), attached to lease (0: none). *revision, when
 * not NULL, gets the revision of the write. */
int etcd_put(etcd *ec, const char *key, const void *value, size_t len, int64_t lease,
             int64_t *revision, char *err, size_t errlen);
/* Deletes key (every key under it when prefix is set); *deleted, when not
 * NULL, gets how many went. */
int etcd_delete(etcd *ec, const char *key, int prefix, int64_t *deleted, char *err, size_t errlen);

/* Compacts the history before rev (physically, before it returns): a watch
 * or read at an older revision then fails with ESTATE / COMPACTED. For
 * operations and tests; etcd also compacts by itself when so configured. */
int etcd_compact(etcd *ec, int64_t rev, char *err, size_t errlen);

/* ------------------------------------------------------------------------
 * Transactions: if every compare holds, the success ops run, else the
 * failure ops, all at one revision.
 * ---------------------------------------------------------------------- */

enum etcd_target { ETCD_VERSION, ETCD_CREATE, ETCD_MOD, ETCD_VALUE, ETCD_LEASE };
enum etcd_cmp_op { ETCD_EQ, ETCD_NE, ETCD_LT, ETCD_GT };

typedef struct etcd_cmp {
    const char *key;
    enum etcd_target target;
    enum etcd_cmp_op op;
    int64_t num;       /* the revision, version or lease compared against */
    const void *value; /* ETCD_VALUE: the bytes compared against */
    size_t value_len;
} etcd_cmp;

enum etcd_op_kind { ETCD_OP_PUT, ETCD_OP_DELETE, ETCD_OP_RANGE };

typedef struct etcd_op {
    enum etcd_op_kind kind;
    const char *key;
    int prefix;        /* DELETE and RANGE: every key under key */
    const void *value; /* PUT */
    size_t value_len;
    int64_t lease;     /* PUT: attach to this lease (0: none) */
} etcd_op;

typedef struct etcd_txn_result {
    int succeeded;    /* every compare held: the success ops ran */
    int64_t revision; /* the store's revision after the txn */
    etcd_kvs *ranges; /* one per op of the branch that ran; filled for RANGE ops */
    size_t n;
} etcd_txn_result;

/* Runs the transaction. *res is the caller's (etcd_txn_result_fini) on
 * success. A false compare is not an error: res->succeeded is 0. */
int etcd_txn(etcd *ec, const etcd_cmp *cmp, size_t ncmp, const etcd_op *success, size_t nsuccess,
             const etcd_op *failure, size_t nfailure, etcd_txn_result *res, char *err,
             size_t errlen);
void etcd_txn_result_fini(etcd_txn_result *res); /* accepts zeroed */

/* ------------------------------------------------------------------------
 * Leases
 * ---------------------------------------------------------------------- */

/* Grants a lease of ttl_s seconds; *id gets its id. */
int etcd_lease_grant(etcd *ec, int64_t ttl_s, int64_t *id, char *err, size_t errlen);
/* Renews lease id once; *ttl_s, when not NULL, gets the seconds it now has.
 * Returns 0, LAPSE_ENOTFOUND when the lease has expired or was revoked (its
 * keys are gone), or an error. */
int etcd_lease_keepalive(etcd *ec, int64_t id, int64_t *ttl_s, char *err, size_t errlen);
/* Revokes lease id, deleting every key attached to it. LAPSE_ENOTFOUND when
 * it had expired already. */
int etcd_lease_revoke(etcd *ec, int64_t id, char *err, size_t errlen);

/* A lease kept alive by a thread of its own. The keeper grants a lease, calls
 * fn(arg, lease, ETCD_LEASE_GRANTED) (put the keys that live with it there),
 * and renews it every interval_ms. When renewals have failed for as long as
 * the lease had left, or etcd says it is gone, it calls
 * fn(arg, lease, ETCD_LEASE_LOST) and grants a new one as soon as etcd
 * answers. fn runs on the keeper's thread. */
enum etcd_lease_event { ETCD_LEASE_GRANTED, ETCD_LEASE_LOST };
typedef void (*etcd_lease_fn)(void *arg, int64_t lease, enum etcd_lease_event ev);
typedef struct etcd_keeper etcd_keeper;

/* Starts the keeper (the first grant happens on its thread). *out is the
 * caller's (etcd_keeper_stop). Returns 0, LAPSE_EINVAL or LAPSE_ENOMEM. */
int etcd_keeper_start(etcd_keeper **out, etcd *ec, int64_t ttl_s, int64_t interval_ms,
                      etcd_lease_fn fn, void *arg, char *err, size_t errlen);
/* The lease held now, or 0 while none is. */
int64_t etcd_keeper_lease(etcd_keeper *k);
/* How many ms the lease held now (into *lease, may be NULL; 0 for none) is
 * certain to live: the keeper counts its expiry from before sending the
 * grant or renewal etcd last confirmed, so etcd's own expiry comes later
 * (by that call's time, on a clock of the same rate). 0 when none is held
 * or that instant has passed (renewals are failing). A caller that acts only
 * while this exceeds its own margin never acts after etcd could have given
 * the lease's keys up (docs/replication.md, "Leases and fencing"). */
int64_t etcd_keeper_valid_ms(etcd_keeper *k, int64_t *lease);
/* Stops the thread (no fn call after it returns) and, when revoke is set,
 * revokes the lease so its keys go at once. Accepts NULL. */
void etcd_keeper_stop(etcd_keeper *k, int revoke);

/* ------------------------------------------------------------------------
 * Elections (etcd's election recipe: keys NAME/<lease hex>, the oldest
 * leads; compatible with etcd's v3election service and `etcdctl elect`)
 * ---------------------------------------------------------------------- */

/* The key that proves leadership: it exists, with this create revision, only
 * while its holder leads. A leader fences a change by comparing
 * ETCD_CREATE of key == rev in the change's transaction. */
typedef struct etcd_leader {
    char *name; /* the election */
    char *key;  /* the leader's key, under name */
    int64_t rev;
    int64_t lease;
} etcd_leader;
void etcd_leader_fini(etcd_leader *l); /* accepts zeroed */

/* Campaigns in election name with lease, proclaiming value, and waits until
 * this campaigner leads or wait_ms passes. The campaign's key lives with the
 * lease: after a timeout it keeps its place in the queue, and campaigning
 * again with the same lease waits on in that place. On success *out is the
 * caller's (etcd_leader_fini). Returns 0, LAPSE_ETIMEDOUT (another leads),
 * LAPSE_ENOTFOUND (the key went: the lease expired) or an error. */
int etcd_campaign(etcd *ec, const char *name, int64_t lease, const void *value, size_t len,
                  int64_t wait_ms, etcd_leader *out, char *err, size_t errlen);
/* Reads the current leader's key-value pair into *out (caller frees).
 * Returns 0, LAPSE_ENOTFOUND when nobody leads, or an error. */
int etcd_election_leader(etcd *ec, const char *name, etcd_kv *out, char *err, size_t errlen);
/* Gives up leadership, or a place in the queue: deletes l's key if it is
 * still the one created at l->rev. */
int etcd_resign(etcd *ec, const etcd_leader *l, char *err, size_t errlen);

/* ------------------------------------------------------------------------
 * Watches
 * ---------------------------------------------------------------------- */

typedef struct etcd_event {
    int deleted; /* 1: DELETE (kv has key and mod_rev only); 0: PUT */
    etcd_kv kv;
} etcd_event;

enum etcd_watch_kind {
    ETCD_WATCH_EVENTS,    /* ev[0..n): changes, in revision order */
    ETCD_WATCH_CONNECTED, /* the stream (re)started; nothing was missed */
    ETCD_WATCH_COMPACTED, /* etcd lost the history from the resume revision:
                             read the range again and return the revision
                             after that read's */
    ETCD_WATCH_LOST       /* the stream broke; the watch reconnects by itself */
};

/* Called on the watch's thread. ev and its kvs are borrowed for the call.
 * revision: the newest revision the stream has shown. Returns 0 to go on,
 * or (after COMPACTED) the revision to resume from. */
typedef int64_t (*etcd_watch_fn)(void *arg, enum etcd_watch_kind kind, const etcd_event *ev,
                                 size_t n, int64_t revision);
typedef struct etcd_watch etcd_watch;

/* Watches key (every key under it when prefix is set) from start_rev (0:
 * from now on). *out is the caller's (etcd_watch_stop). Returns 0,
 * LAPSE_EINVAL or LAPSE_ENOMEM; connection trouble is reported to fn. */
int etcd_watch_start(etcd_watch **out, etcd *ec, const char *key, int prefix, int64_t start_rev,
                     etcd_watch_fn fn, void *arg, char *err, size_t errlen);
/* Stops the watch: no fn call after it returns. Accepts NULL. */
void etcd_watch_stop(etcd_watch *w);

#endif
