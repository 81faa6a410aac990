/*
 * telemetry.c: the node's metrics registry, collector, RPC counters and the
 * GET /metrics endpoint (contract in telemetry.h).
 */
#include "telemetry.h"

#include <stdio.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "copydrop.h"
#include "logship.h"
#include "shipper.h"

/* Stable label values for lapse.Status codes (the enum's names). */
static const char *status_label(int code)
{
    static const char *names[] = {
        [LAPSE_OK] = "OK",
        [LAPSE_EINVAL] = "EINVAL",
        [LAPSE_ENOMEM] = "ENOMEM",
        [LAPSE_ENOTFOUND] = "ENOTFOUND",
        [LAPSE_EEXISTS] = "EEXISTS",
        [LAPSE_ECONDITION] = "ECONDITION",
        [LAPSE_EWRONGNODE] = "EWRONGNODE",
        [LAPSE_ETIMEDOUT] = "ETIMEDOUT",
        [LAPSE_EUNAVAILABLE] = "EUNAVAILABLE",
        [LAPSE_ETOOBIG] = "ETOOBIG",
        [LAPSE_EIO] = "EIO",
        [LAPSE_EPROTO] = "EPROTO",
        [LAPSE_EPERM] = "EPERM",
        [LAPSE_ESTATE] = "ESTATE",
        [LAPSE_EINTERNAL] = "EINTERNAL",
        [LAPSE_ECORRUPT] = "ECORRUPT",
        [LAPSE_EUSAGE] = "EUSAGE",
    };
    if (code < 0 || (size_t)code >= sizeof(names) / sizeof(names[0]) || names[code] == NULL) {
        return "OTHER";
    }
    return names[code];
}

static const char *call_label(const Lapse__Request *req)
{
    switch (req->body_case) {
    case LAPSE__REQUEST__BODY_PUT_ITEM:
        return "PutItem";
    case LAPSE__REQUEST__BODY_GET_ITEM:
        return "GetItem";
    case LAPSE__REQUEST__BODY_DELETE_ITEM:
        return "DeleteItem";
    case LAPSE__REQUEST__BODY_UPDATE_ITEM:
        return "UpdateItem";
    case LAPSE__REQUEST__BODY_QUERY:
        return "Query";
    case LAPSE__REQUEST__BODY_SCAN:
        return "Scan";
    case LAPSE__REQUEST__BODY_BATCH_WRITE:
        return "BatchWrite";
    case LAPSE__REQUEST__BODY_BATCH_GET:
        return "BatchGet";
    case LAPSE__REQUEST__BODY_PUSH_PARTITION_MAP:
        return "PushPartitionMap";
    case LAPSE__REQUEST__BODY_TTL_PREVIEW:
        return "TtlPreview";
    case LAPSE__REQUEST__BODY_REPLICATE:
        return "Replicate";
    case LAPSE__REQUEST__BODY_GET_STREAM_RECORDS:
        return "GetStreamRecords";
    case LAPSE__REQUEST__BODY_REPLICATE_LOG:
        return "ReplicateLog";
    case LAPSE__REQUEST__BODY_PARTITION_DIGEST:
        return "PartitionDigest";
    case LAPSE__REQUEST__BODY_PARTITION_ITEMS:
        return "PartitionItems";
    case LAPSE__REQUEST__BODY_TABLE_STATS:
        return "TableStats";
    default:
        return "other";
    }
}

void telemetry_count_rpc(node_server *ns, const Lapse__Request *req, const Lapse__Response *resp)
{
    char labels[96];
    metrics_labels(labels, sizeof(labels), "call", call_label(req), "status",
                   status_label((int)resp->status), NULL);
    metrics_counter_add(ns->metrics, "lapse_rpc_requests_total",
                        "RPC calls answered by this node, by call and status" METRICS_SINCE_START,
                        labels, 1);
}

/* The RPC server's frames and calls since the last collect. */
static void collect_rpc(node_server *ns, metrics *m)
{
    if (ns->srv == NULL) {
        return;
    }
    rpc_server_count n;
    rpc_server_counts(ns->srv, &n);
    const uint64_t now[4] = {n.frames, n.coalesced, n.calls, n.quick};
    static const char *const name[4] = {"lapse_rpc_frames_total",
                                        "lapse_rpc_coalesced_frames_total", "lapse_rpc_calls_total",
                                        "lapse_rpc_quick_calls_total"};
    static const char *const help[4] = {
        "Requests received, a coalesced frame of several calls counting once" METRICS_SINCE_START,
        "Of them, coalesced frames (docs/wire-protocol.md)" METRICS_SINCE_START,
        "Calls served, each call of a coalesced frame counting once" METRICS_SINCE_START,
        "Of them, calls served on the thread that received them, with no hand-off to a "
        "worker (quick calls, and those served on their connection's thread)" METRICS_SINCE_START};
    for (int i = 0; i < 4; i++) {
        uint64_t was = atomic_exchange(&ns->rpc_seen[i], now[i]);
        metrics_counter_add(m, name[i], help[i], NULL, now[i] >= was ? (double)(now[i] - was) : 0);
    }
}

static void collect(void *arg, metrics *m)
{
    node_server *ns = arg;
    collect_rpc(ns, m);
    if (ns->ttl != NULL) {
        expiry_engine_collect(ns->ttl, m);
    }
    if (ns->shipper != NULL) {
        shipper_collect(ns->shipper, m);
    }
    if (ns->logship != NULL) {
        logship_collect(ns->logship, m);
    }
    metrics_counter_add(m, "lapse_failover_promotions_total",
                        "Replicated partitions this node became the primary of by a failover "
                        "(a map naming it primary at a higher epoch)" METRICS_SINCE_START,
                        NULL, (double)atomic_exchange(&ns->promotions, 0));
    metrics_counter_add(m, "lapse_former_copies_dropped_total",
                        "Copies of replicated partitions this node dropped after a map took "
                        "them out of their sets (a drain, a rebalance)" METRICS_SINCE_START,
                        NULL, (double)atomic_exchange(&ns->copies_dropped, 0));
    metrics_gauge_set(m, "lapse_former_copies_pending",
                      "Copies out of their sets whose keys are not dropped yet (dropped "
                      "COPYDROP_DELAY_MS after the map)",
                      NULL, (double)copydrop_pending(ns));
}

static int render(void *arg, buf *body)
{
    node_server *ns = arg;
    return metrics_render(ns->metrics, body);
}

int telemetry_init(node_server *ns, char *err, size_t errlen)
{
    if ((ns->metrics = metrics_new()) == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    metrics_set_collector(ns->metrics, collect, ns);
    return 0;
}

int telemetry_serve(node_server *ns, char *err, size_t errlen)
{
    if (ns->metrics_listen[0] == 0) {
        return 0;
    }
    char why[256] = "";
    int rv =
        http_server_open(&ns->http, ns->metrics_listen, "/metrics",
                         "text/plain; version=0.0.4; charset=utf-8", render, ns, why, sizeof(why));
    if (rv != 0) {
        ns->http = NULL;
        snprintf(err, errlen, "cannot serve metrics on %s: %s", ns->metrics_listen, why);
        return rv;
    }
    log_info("metrics served at http://%s/metrics", ns->metrics_listen);
    return 0;
}

void telemetry_stop(node_server *ns)
{
    http_server_close(ns->http);
    ns->http = NULL;
}

void telemetry_fini(node_server *ns)
{
    metrics_free(ns->metrics);
    ns->metrics = NULL;
}
