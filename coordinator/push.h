/*
 * push.h: calls from the coordinator to nodes: one rpc_client per node
 * address, created lazily and kept until push_free, and a broadcast that
 * sends one request to many nodes in parallel.
 *
 * Pushes are an optimisation of propagation, never its only path: a push that
 * fails is logged and forgotten, because nodes compare their map version on
 * every heartbeat and pull (GetPartitionMap) when they are behind. So a push
 * never makes a coordinator call fail. A table's TTL config travels inside
 * the map, so UpdateTimeToLive pushes the map too. The map goes to the UP
 * nodes after a change is durable: copied under the lock that guards it,
 * pushed after (push_plan_copy, push_plan_send).
 *
 * Thread-safety: every function may be called from any thread; the client
 * cache has its own mutex (never held during a call), and rpc_client itself
 * is thread-safe.
 *
 * Invariants:
 *  1. At most one client per distinct address.
 *  2. Clients are closed only by push_free, after every broadcast returned.
 */
#ifndef LAPSE_COORD_PUSH_H
#define LAPSE_COORD_PUSH_H

#include <stddef.h>
#include <stdint.h>

#include "../common/arena.h"
#include "../placement/pmap.h"
#include "../rpc/rpc.h"

typedef struct push push;

/* Returns a new, empty client cache in *out. 0 or LAPSE_ENOMEM. */
int push_new(push **out);
/* Closes every client and frees. Accepts NULL.
 * REQUIRES: no push_* call is running. */
void push_free(push *p);

/* Returns in *out the client for url, creating it on first use. The client
 * is borrowed until push_free. Returns 0, LAPSE_EINVAL (bad URL) or
 * LAPSE_ENOMEM with a reason in err. */
int push_client(push *p, const char *url, rpc_client **out, char *err, size_t errlen);

/* Called with the OK reply of the call to urls[i]; resp is borrowed for the
 * call. Runs on the thread of that call, so several run at once. */
typedef void (*push_reply_fn)(void *arg, size_t i, const Lapse__Response *resp);

/*
 * Sends one request to each of urls[0..n) at once and waits for all of them
 * (each up to timeout_ms). tmpl gives the body (body_case and its pointer,
 * shared read-only by all calls); each call gets its own envelope. Failures
 * are logged at WARN with what and the address. on_reply (NULL: none) sees
 * every OK reply before this returns. Returns how many calls answered OK.
 */
size_t push_broadcast(push *p, const char *const *urls, size_t n, const Lapse__Request *tmpl,
                      int timeout_ms, const char *what, push_reply_fn on_reply, void *arg);

/*
 * One map and where to push it. The map message and the UP nodes are
 * copied out of the map under the lock that guards it (push_plan_copy), so
 * the push itself runs with that lock released (push_plan_send). A zeroed
 * plan, or one whose copy ran out of memory, pushes nothing: the nodes pull
 * the version on their next heartbeat.
 */
typedef struct push_plan {
    Lapse__PartitionMap *map; /* the map message (arena), NULL: push nothing */
    uint64_t version;         /* of the map copied */
    const char **urls;        /* the UP nodes' addresses (arena) */
    uint32_t *ids;            /* their ids: urls[i] is node ids[i] (arena) */
    char *ok;                 /* push_plan_send sets ok[i] once urls[i] took the map (arena; NULL
                                 when out of memory) */
    size_t n;                 /* entries of urls, ids and ok */
} push_plan;

/* Fills *pl with pm as a message and pm's UP nodes, copied into a (borrowed
 * by pl until a is freed). Out of memory leaves a plan that pushes nothing.
 * REQUIRES: pm is not changed meanwhile (the caller holds the lock that
 * guards it). */
void push_plan_copy(push_plan *pl, const pmap *pm, arena *a);

/* push_broadcast of PushPartitionMap carrying pl->map to pl's nodes, then
 * logs how many took it and sets pl->ok; the replies carry the nodes' TTL
 * progress (PushPartitionMapResponse.ttl), which on_reply (NULL: none) may
 * record. Returns how many took it; no-op returning 0 for a plan that
 * pushes nothing. REQUIRES: no lock a reply's handling takes is held. */
size_t push_plan_send(push *p, push_plan *pl, int timeout_ms, push_reply_fn on_reply, void *arg);

#endif
