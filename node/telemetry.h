/*
 * telemetry.h: the node's metrics: the registry every module counts into
 * (ns->metrics, always present), the GET /metrics endpoint served on
 * --metrics-listen (rpc/http.h), the collector that refreshes the gauges
 * computed on demand (TTL backlog and ages: expiry_engine_collect), and the RPC
 * counters lapse_rpc_requests_total{call,status}. docs/node.md lists the
 * series.
 *
 * Thread-safety: telemetry_open/telemetry_close run on the main thread
 * (node_open/node_close); telemetry_count_rpc from any RPC worker.
 *
 * Invariants:
 *  1. Without --metrics-listen no HTTP server runs; the registry still
 *     counts (cheap), so a later feature can read it.
 *  2. The endpoint is closed before the expiry engine and the store it reads.
 */
#ifndef LAPSE_TELEMETRY_H
#define LAPSE_TELEMETRY_H

#include <stddef.h>

#include "../rpc/rpc.h"
#include "node.h"

/* Creates ns->metrics and registers the collector. Returns 0 or
 * LAPSE_ENOMEM. REQUIRES: ns zeroed apart from the fixed fields. */
int telemetry_init(node_server *ns, char *err, size_t errlen);
/* Serves GET /metrics on ns->metrics_listen when set. Returns 0,
 * LAPSE_EINVAL (bad address) or LAPSE_EUNAVAILABLE (in use) with a reason.
 * REQUIRES: telemetry_init and the expiry engine are up. */
int telemetry_serve(node_server *ns, char *err, size_t errlen);
/* Closes the endpoint (safe when never opened). */
void telemetry_stop(node_server *ns);
/* Frees the registry. Accepts a node whose telemetry_init never ran. */
void telemetry_fini(node_server *ns);

/* Counts one answered call: lapse_rpc_requests_total{call,status}. */
void telemetry_count_rpc(node_server *ns, const Lapse__Request *req, const Lapse__Response *resp);

#endif
