/*
 * ttlprop.h: TTL configuration rules and propagation status on the
 * coordinator (docs/ttl.md, "Configuration and propagation").
 *
 * A table's TTL config (table_ttl, common/schema.h) lives in its schema inside
 * the partition map, so it is persisted, versioned, pushed and pulled exactly
 * like the map. This module holds what is not durable: the latest TTL
 * progress each node reported per table (from heartbeats and from
 * PushPartitionMap replies), and derives the status DynamoDB shows.
 *
 * Status of a table (ttlprop_status_of), with the calls that move it:
 *
 *                 UpdateTimeToLive(ENABLE)
 *   DISABLED ---------------------------------> ENABLING
 *      ^                                           |
 *      | every holder reported                     | every holder reported
 *      | config_version >= ttl.config_version      | config_version >= ttl.config_version
 *      | and backfill_done                         | and backfill_done
 *      |                                           v
 *   DISABLING <-------------------------------- ENABLED
 *                 UpdateTimeToLive(DISABLE)
 *
 * Holders are the nodes in the replica lists of the table's partitions (UP
 * or DOWN: a DOWN holder keeps the table ENABLING until it returns, pulls
 * the map and reports). ENABLE is refused while DISABLING and DISABLE while
 * ENABLING (ttlprop_apply), so a change never overtakes one still
 * propagating. PAUSE and RESUME change only ttl.paused: the status and
 * config_version stay as they are.
 *
 * Thread-safety: none; the coordinator keeps its ttlprop under server.lock.
 *
 * Invariants:
 *  1. At most one report per (node id, table id).
 *  2. A stored report is never replaced by one with a lower config_version
 *     (a heartbeat built before a push was applied may arrive after the
 *     push reply; it must not turn ENABLED back into ENABLING).
 *  3. Reports are memory only: after a restart every table with TTL
 *     configured shows ENABLING/DISABLING until its holders report again.
 */
#ifndef LAPSE_COORD_TTLPROP_H
#define LAPSE_COORD_TTLPROP_H

#include <stddef.h>
#include <stdint.h>

#include "../common/schema.h"
#include "../placement/pmap.h"

#define TTLPROP_DEFAULT_GUARD_YEARS 5

/* One node's progress on one table (proto TtlProgress). */
typedef struct ttlprop_progress {
    uint32_t table_id;
    uint64_t config_version;   /* the ttl.config_version the node applied */
    int backfill_done;         /* enabled: indexed; disabled: index dropped */
    uint64_t backfill_items;   /* items scanned by the backfill so far */
    uint32_t partitions_done;  /* of its partitions of the table */
    uint32_t partitions_total; /* its partitions of the table */
} ttlprop_progress;

typedef struct ttlprop_report {
    uint32_t node_id;
    ttlprop_progress p;
} ttlprop_report;

/* The reports, embedded in the server struct. */
typedef struct ttlprop {
    ttlprop_report *r; /* owned array of n (cap cap) */
    size_t n;
    size_t cap;
} ttlprop;

typedef enum ttlprop_status {
    TTLPROP_DISABLED = 0,
    TTLPROP_ENABLING = 1,
    TTLPROP_ENABLED = 2,
    TTLPROP_DISABLING = 3,
} ttlprop_status;

typedef enum ttlprop_action {
    TTLPROP_ENABLE = 0, /* numbers as UpdateTimeToLiveRequest.Action */
    TTLPROP_DISABLE = 1,
    TTLPROP_PAUSE = 2,
    TTLPROP_RESUME = 3,
} ttlprop_action;

/* One UpdateTimeToLive request, as checked by ttlprop_check_change. */
typedef struct ttlprop_change {
    ttlprop_action action;
    const char *attribute; /* ENABLE: the attribute; borrowed */
    int64_t offset_s;      /* ENABLE: >= 0 */
    int32_t guard_years;   /* ENABLE: 0 means TTLPROP_DEFAULT_GUARD_YEARS */
} ttlprop_change;

void ttlprop_init(ttlprop *tp);
void ttlprop_fini(ttlprop *tp); /* frees the reports; accepts a zeroed ttlprop */

/* Stores p as node_id's latest report on p->table_id (invariants 1, 2: a
 * report with a lower config_version than the stored one is dropped and
 * counts as success). Returns 0 or LAPSE_ENOMEM (nothing stored). */
int ttlprop_record(ttlprop *tp, uint32_t node_id, const ttlprop_progress *p);

/* The report of node_id on table_id, borrowed until the next ttlprop_record
 * or ttlprop_forget_table; NULL when none. */
const ttlprop_progress *ttlprop_find(const ttlprop *tp, uint32_t node_id, uint32_t table_id);

/* Drops every report on table_id (the table was deleted). */
void ttlprop_forget_table(ttlprop *tp, uint32_t table_id);

/* Writes the distinct ids of the nodes holding t's partitions, ascending,
 * into ids[0..cap) and returns how many there are (which may exceed cap;
 * only cap are written). */
size_t ttlprop_holders(const pmap_table *t, uint32_t *ids, size_t cap);

/* The derived status of t (diagram above). */
ttlprop_status ttlprop_status_of(const ttlprop *tp, const pmap_table *t);

/* "ENABLING", "ENABLED", "DISABLING" or "DISABLED"; static. */
const char *ttlprop_status_name(ttlprop_status st);

/* Checks the arguments of c, before any table is looked at: a known action;
 * for ENABLE an attribute of 1 to SCHEMA_MAX_KEY_NAME bytes, 0 <= offset <=
 * WIRE_MAX_TTL_OFFSET_S and 0 <= guard <= WIRE_MAX_TTL_GUARD_YEARS.
 * Returns 0 or LAPSE_EINVAL with a reason in err. */
int ttlprop_check_change(const ttlprop_change *c, char *err, size_t errlen);

/*
 * Applies c to ttl (the table's config in a copy of the map that will be
 * committed as version new_version), given the table's current status st,
 * with DynamoDB's rules: ENABLE on an enabled table, or DISABLE on a
 * disabled one, is refused; so is ENABLE while DISABLING and DISABLE while
 * ENABLING; the attribute cannot change while enabled; PAUSE and RESUME need
 * an enabled table that is not (PAUSE) or is (RESUME) paused. ENABLE and
 * DISABLE set config_version = new_version; PAUSE and RESUME leave it.
 * Returns 0, or LAPSE_ESTATE with a message naming table in err; on error
 * ttl is unchanged. REQUIRES: ttlprop_check_change(c) passed.
 */
int ttlprop_apply(table_ttl *ttl, ttlprop_status st, const ttlprop_change *c,
                  uint64_t new_version, const char *table, char *err, size_t errlen);

#endif
