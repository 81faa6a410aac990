/*
 * ttl.h: DynamoDB's time-to-live rules, as pure functions.
 *
 * An item is eligible for expiry when its TTL attribute is a top-level N
 * holding Unix epoch seconds (a fraction is truncated toward zero) that is
 * not more than ignore_older_than_years before now (the guard against zeros,
 * milliseconds read as seconds and other malformed values). Its due instant
 * is (value + offset_s) seconds, at .000; it is expired when the due instant
 * is strictly before now, read to the millisecond. An item without the
 * attribute, or with another type, never expires.
 *
 * The TTL rules are documented in docs/ttl.md. Thread-safe (pure functions).
 *
 * Invariants:
 *  1. ttl_eval is a function of (config, item, now) only: the store, the
 *     scanner, reads with hide_expired and ttl-preview all call it, so they
 *     can never disagree on what is expired. ttl_eval_encoded shares its
 *     judgement of the value (one function), only reading it differently.
 */
#ifndef LAPSE_TTL_H
#define LAPSE_TTL_H

#include <stdint.h>

#include "clock.h"
#include "item.h"
#include "schema.h"

#define TTL_DEFAULT_GUARD_YEARS 5
#define TTL_SECONDS_PER_YEAR 31557600LL /* 365.25 days */

/* The rule is the table's TTL config (common/schema.h): attribute,
 * offset_s and guard_years (0 means TTL_DEFAULT_GUARD_YEARS) are used;
 * enabled and paused are the caller's business. */
typedef table_ttl ttl_rule;

typedef enum ttl_verdict {
    TTL_ELIGIBLE = 0,     /* *due_ms is set */
    TTL_MISSING = 1,      /* no such top-level attribute */
    TTL_NOT_NUMBER = 2,   /* the attribute is not of type N */
    TTL_TOO_OLD = 3,      /* more than guard_years before now */
    TTL_OUT_OF_RANGE = 4, /* an N too large for epoch seconds */
    TTL_VERDICT_COUNT = 5
} ttl_verdict;

/* Stable lowercase names for metrics labels and ttl-preview: "eligible",
 * "missing", "not_a_number", "too_old", "out_of_range". */
const char *ttl_verdict_name(ttl_verdict v);

/* Judges it under rule at now. On TTL_ELIGIBLE, *due_ms (if non-NULL) is the
 * due instant in epoch milliseconds (a whole second). A rule with no
 * attribute makes every item TTL_MISSING. */
ttl_verdict ttl_eval(const ttl_rule *rule, const item *it, clock_wall now, int64_t *due_ms);

/* ttl_eval of an item_encode()d item, without decoding it (the TTL backfill
 * and sweep judge every stored item they pass): for any bytes that
 * item_decode accepts, *verdict and *due_ms are what ttl_eval gives for the
 * decoded item. Returns 0, LAPSE_ECORRUPT exactly when item_decode would
 * reject the bytes, or LAPSE_ENOMEM; on error *verdict and *due_ms are not
 * modified. */
int ttl_eval_encoded(const ttl_rule *rule, const void *data, size_t len, clock_wall now,
                     ttl_verdict *verdict, int64_t *due_ms);

/* The earliest due second whose value (due second - offset_s) still passes
 * the guard against too old values at now: an item due before it is
 * TTL_TOO_OLD. Lets the sweep judge expiry entries without reading items. */
int64_t ttl_guard_min_due_s(const ttl_rule *rule, clock_wall now);

/* Whether an eligible item with due instant due_ms is expired at now. */
static inline int ttl_is_expired(int64_t due_ms, clock_wall now)
{
    return due_ms < now.ms;
}

#endif
