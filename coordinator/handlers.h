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

#endif
