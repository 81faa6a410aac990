/*
 * ttl.c: DynamoDB's time-to-live rules. See ttl.h and docs/ttl.md.
 */
#include "ttl.h"

#include <limits.h>

#include "lapse_err.h"
#include "number.h"

/* Epoch seconds beyond this are out of range: with the offset added and
 * converted to milliseconds they must still fit in int64_t. */
#define TTL_MAX_EPOCH_S (INT64_MAX / 1000 / 2)

const char *ttl_verdict_name(ttl_verdict v)
{
    static const char *const names[TTL_VERDICT_COUNT] = {"eligible", "missing", "not_a_number",
                                                         "too_old", "out_of_range"};
    return (v >= 0 && v < TTL_VERDICT_COUNT) ? names[v] : "unknown";
}

/* The oldest epoch second the guard accepts at now. */
static int64_t guard_min_s(const ttl_rule *rule, clock_wall now)
{
    int64_t years = rule->guard_years > 0 ? rule->guard_years : TTL_DEFAULT_GUARD_YEARS;
    return now.ms / 1000 - years * TTL_SECONDS_PER_YEAR;
}

int64_t ttl_guard_min_due_s(const ttl_rule *rule, clock_wall now)
{
    return guard_min_s(rule, now) + rule->offset_s;
}

/* Judges an N value given as its text (borrowed, validated when stored). */
static ttl_verdict eval_number(const ttl_rule *rule, const char *text, size_t len, clock_wall now,
                               int64_t *due_ms)
{
    number n;
    int64_t secs;
    if (number_parse(text, len, &n, NULL, 0) != 0) {
        return TTL_NOT_NUMBER; /* cannot happen: N values are validated when set */
    }
    if (number_to_i64(&n, &secs) != 0) {
        /* Too large in magnitude for int64_t: far past is too old, far future
         * out of range. */
        return n.neg ? TTL_TOO_OLD : TTL_OUT_OF_RANGE;
    }
    if (secs < guard_min_s(rule, now)) {
        return TTL_TOO_OLD;
    }
    if (secs > TTL_MAX_EPOCH_S - rule->offset_s) {
        return TTL_OUT_OF_RANGE;
    }
    if (due_ms != NULL) {
        *due_ms = (secs + rule->offset_s) * 1000;
    }
    return TTL_ELIGIBLE;
}

ttl_verdict ttl_eval(const ttl_rule *rule, const item *it, clock_wall now, int64_t *due_ms)
{
    if (rule->attribute[0] == '\0') {
        return TTL_MISSING;
    }
    const attr_value *v = item_get(it, rule->attribute);
    if (v == NULL) {
        return TTL_MISSING;
    }
    if (v->type != ATTR_N) {
        return TTL_NOT_NUMBER;
    }
    return eval_number(rule, v->u.bytes.ptr, v->u.bytes.len, now, due_ms);
}

int ttl_eval_encoded(const ttl_rule *rule, const void *data, size_t len, clock_wall now,
                     ttl_verdict *verdict, int64_t *due_ms)
{
    attr_type type = ATTR_NULL;
    const char *text = NULL;
    size_t tlen = 0;
    /* An empty attribute name matches nothing, but the bytes are still
     * checked: a corrupt item is corrupt under any rule. */
    int rv = item_encoded_get(data, len, rule->attribute, &type, &text, &tlen);
    if (rv == LAPSE_ENOTFOUND) {
        *verdict = TTL_MISSING;
        return 0;
    }
    if (rv != 0) {
        return rv;
    }
    *verdict = type != ATTR_N ? TTL_NOT_NUMBER : eval_number(rule, text, tlen, now, due_ms);
    return 0;
}
