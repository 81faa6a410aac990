/*
 * preview.c: TtlPreview, a dry run of a TTL rule (docs/ttl.md): counts, over
 * the partitions of the table this node owns, how many items the rule would
 * find due now, within the hour, within the day or later, and how many it
 * would ignore and why. Nothing is written and no partition lock is taken
 * (store_scan pages, as Scan), so it is safe on a live table; ttl_eval at one
 * wall-clock snapshot is the judge, exactly as the scanners and reads use it.
 */
#include <stdio.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../common/ttl.h"
#include "../rpc/wire.h"
#include "preview.h"

#define PAGE_ITEMS 1000
#define HOUR_MS (3600LL * 1000)
#define DAY_MS (24 * HOUR_MS)

static void count(Lapse__TtlPreviewResponse *out, const ttl_rule *rule, const item *it,
                  clock_wall now)
{
    int64_t due_ms = 0;
    out->items++;
    switch (ttl_eval(rule, it, now, &due_ms)) {
    case TTL_ELIGIBLE:
        if (ttl_is_expired(due_ms, now)) {
            out->due_now++;
        } else if (due_ms - now.ms < HOUR_MS) {
            out->due_hour++;
        } else if (due_ms - now.ms < DAY_MS) {
            out->due_day++;
        } else {
            out->due_later++;
        }
        break;
    case TTL_MISSING:
        out->missing++;
        break;
    case TTL_NOT_NUMBER:
        out->not_a_number++;
        break;
    case TTL_TOO_OLD:
        out->too_old++;
        break;
    default:
        out->out_of_range++;
        break;
    }
}

void preview_ttl(request_ctx *c)
{
    const Lapse__TtlPreviewRequest *r = c->req->ttl_preview;
    store_page page;
    memset(&page, 0, sizeof(page));
    item *start = NULL;
    char err[512] = "";

    if (request_need_body(c, r) != 0) {
        return;
    }
    if (r->attribute == NULL || r->attribute[0] == 0) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL, "ttl_preview: attribute is required");
        return;
    }
    if (strlen(r->attribute) > SCHEMA_MAX_KEY_NAME) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "ttl_preview: attribute name is longer than %d bytes", SCHEMA_MAX_KEY_NAME);
        return;
    }
    if (r->offset_seconds < 0 || r->offset_seconds > WIRE_MAX_TTL_OFFSET_S) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "ttl_preview: offset_seconds must be from 0 to %lld, not %lld",
                      (long long)WIRE_MAX_TTL_OFFSET_S, (long long)r->offset_seconds);
        return;
    }
    if (r->ignore_older_than_years < 0 || r->ignore_older_than_years > WIRE_MAX_TTL_GUARD_YEARS) {
        rpc_set_error(c->resp, c->a, LAPSE_EINVAL,
                      "ttl_preview: ignore_older_than_years must be from 0 to %d, not %d",
                      WIRE_MAX_TTL_GUARD_YEARS, (int)r->ignore_older_than_years);
        return;
    }
    if (request_find_table(c, r->table) != 0) {
        return;
    }
    const table_schema *t = &c->table->schema;
    ttl_rule rule;
    memset(&rule, 0, sizeof(rule));
    rule.enabled = 1;
    snprintf(rule.attribute, sizeof(rule.attribute), "%s", r->attribute);
    rule.offset_s = r->offset_seconds;
    rule.guard_years = r->ignore_older_than_years;

    Lapse__TtlPreviewResponse *out = arena_alloc(c->a, sizeof(*out));
    if (out == NULL) {
        rpc_set_error(c->resp, c->a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__ttl_preview_response__init(out);
    clock_wall now = clock_wall_now();
    for (uint32_t part = 0; part < t->partitions; part++) {
        if (!request_owns(c, part)) {
            continue;
        }
        for (;;) {
            if (clock_mono_now().ms >= c->deadline_mono_ms) {
                rpc_set_error(c->resp, c->a, LAPSE_ETIMEDOUT,
                              "ttl_preview: deadline passed after %llu items (raise the timeout)",
                              (unsigned long long)out->items);
                goto out;
            }
            int rv = store_scan(c->ns->st, t, part, PAGE_ITEMS, start, &page, err, sizeof(err));
            if (rv != 0) {
                request_store_error(c, rv, err);
                goto out;
            }
            for (size_t i = 0; i < page.n; i++) {
                count(out, &rule, page.items[i], now);
            }
            item_free(start);
            start = page.last_key; /* the next page starts after it */
            page.last_key = NULL;
            store_page_fini(&page);
            memset(&page, 0, sizeof(page));
            if (start == NULL) {
                break;
            }
        }
    }
    c->resp->body_case = LAPSE__RESPONSE__BODY_TTL_PREVIEW;
    c->resp->ttl_preview = out;
out:
    store_page_fini(&page);
    item_free(start);
}
