/*
 * handlers.h: the coordinator's RPC calls (proto/lapse.proto, "Coordinator
 * calls"): RegisterNode, Heartbeat, CreateTable, DeleteTable, DescribeTable,
 * ListTables, GetPartitionMap, ClusterStatus, and the TTL calls
 * UpdateTimeToLive and DescribeTimeToLive (ttlcalls.c). Node-only calls
 * answer EINVAL "not a coordinator call". When the server has an admin
 * token, CreateTable, DeleteTable and UpdateTimeToLive answer EPERM unless
 * Request.admin_token equals it (compared in constant time).
 *
 * Thread-safety: handlers_dispatch runs on the rpc worker threads, several
 * at once, and takes server.ddl_lock/server.lock as server.h orders.
 *
 * Invariants:
 *  1. Every reply carries pmap_version: the version the handler saw, or the
 *     current one when it failed before looking.
 *  2. A change is durable (server_commit) before its reply is sent, and
 *     pushed (CreateTable, DeleteTable, UpdateTimeToLive) before its reply
 *     is sent; a failed push never fails the call.
 *  3. Everything put into a reply is allocated from the request's arena.
 */
#ifndef LAPSE_COORD_HANDLERS_H
#define LAPSE_COORD_HANDLERS_H

#include <stdint.h>

#include "../rpc/rpc.h"
#include "server.h"

/* The rpc_handler of the coordinator; arg is the server (server.h). */
void handlers_dispatch(void *arg, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                       int64_t deadline_mono_ms);

/* The addresses of the UP nodes, and their ids in *ids, copied into a (for a
 * push after the lock is released). Returns the array (n entries), or NULL
 * with *n = 0 on OOM. REQUIRES: s->lock held. */
const char **handlers_up_nodes(server *s, arena *a, uint32_t **ids, size_t *n);

/* Pushes map (borrowed) to urls[0..n) (node ids ids[0..n)) at once, records
 * the TTL progress in the replies, and logs how many took it. No-op when map
 * or urls is NULL or n is 0. REQUIRES: ddl_lock held, lock not held. */
void handlers_push_map(server *s, Lapse__PartitionMap *map, const char **urls,
                       const uint32_t *ids, size_t n);

#endif
