/*
 * ttlcfg.h: the client side of time to live (docs/ttl.md): the
 * UpdateTimeToLive and DescribeTimeToLive calls to the coordinator, the
 * TtlPreview fan-out to every node holding a table, and the JSON forms of a
 * TTL description and of a table's TTL config. The public calls are
 * lapse_update_ttl, lapse_describe_ttl and lapse_ttl_preview (lapse.h); the
 * functions below are the pure shaping steps, separate so that they can be
 * tested without a cluster.
 *
 * Thread-safety: the ttlcfg_* functions are pure (no shared state).
 *
 * Invariants of the JSON they build:
 *  1. Key order is fixed (JSON_PRESERVE_ORDER), so output is stable.
 *  2. "AttributeName" is present exactly when an attribute was ever set,
 *     as DynamoDB omits it for a table that never had TTL.
 *  3. A guard of 0 on the wire is shown as its meaning, 5 years.
 */
#ifndef LAPSE_CLIENT_TTLCFG_H
#define LAPSE_CLIENT_TTLCFG_H

#include <jansson.h>

#include "client.h"

/* The guard shown and used when the wire says 0 (DynamoDB's five years). */
#define TTLCFG_DEFAULT_GUARD_YEARS 5

/* The lapse_describe_ttl document for d (NULL: a table that never had TTL,
 * shown DISABLED). Returns a new reference, or NULL on OOM. */
json_t *ttlcfg_description_json(const Lapse__TtlDescription *d);

/* The "TimeToLive" object of describe-table for cfg (NULL: never
 * configured): {"Enabled","AttributeName"?,"OffsetSeconds",
 * "IgnoreOlderThanYears","Paused","ConfigVersion"}. New reference or NULL
 * on OOM. */
json_t *ttlcfg_config_json(const Lapse__TtlConfig *cfg);

/* Adds one node's counts r to *sum. */
void ttlcfg_preview_add(lapse_ttl_preview_counts *sum, const Lapse__TtlPreviewResponse *r);

/* Checks spec before anything is sent. Returns 0 or LAPSE_EINVAL with the
 * reason in err. */
int ttlcfg_check_spec(const lapse_ttl_spec *spec, lapse_error *err);

#endif
