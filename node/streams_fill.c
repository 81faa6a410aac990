/*
 * streams_fill.c: filling this node's copy of a stream shard that lost
 * records (its data dir was lost; the source trimmed what it had not
 * applied) from another copy of the same shard (contract in streams.h).
 *
 * Stream records are numbered by the base partition and are the same on
 * every copy, so a copy's gap is filled by copying the records another copy
 * holds: those of outbox seq up to the gap's mark (apply.h, REPL_MISSING),
 * read with GetStreamRecords in raw form, page after page. The other copy
 * must be whole itself (it refuses reads otherwise) and must have applied
 * the source through the gap's end when the first page is read, so that
 * every record of the gap is in its store then and in the pages that
 * follow. The gap ends at the mark, or one record before it when the mark
 * lies one past what this copy applied (apply_stream_fill_need): a new
 * copy's mark on a quiet source, whose next record no copy holds yet.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../common/lapse_err.h"
#include "../common/log.h"
#include "../common/change.h"
#include "../partition/apply.h"
#include "../rpc/rpc.h"
#include "streams.h"

#define FILL_CALL_TIMEOUT_MS 2000
#define FILL_PAGE_RECORDS 1000
#define FILL_MAX_PAGES 1000 /* a million records per pass; the next pass goes on */

/* Reads one page of shard shard of t after `after` from c (raw). *resp:
 * caller frees. */
static int read_page(rpc_client *c, const pmap_table *t, uint32_t shard, uint64_t after,
                     Lapse__Response **resp, char *err, size_t errlen)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__GetStreamRecordsRequest body = LAPSE__GET_STREAM_RECORDS_REQUEST__INIT;
    body.table = (char *)t->schema.name;
    body.shard = shard;
    body.after_sequence = after;
    body.limit = FILL_PAGE_RECORDS;
    body.raw = 1;
    req.body_case = LAPSE__REQUEST__BODY_GET_STREAM_RECORDS;
    req.get_stream_records = &body;
    int rv = rpc_call(c, &req, FILL_CALL_TIMEOUT_MS, resp, err, errlen);
    if (rv == 0 && ((*resp)->body_case != LAPSE__RESPONSE__BODY_GET_STREAM_RECORDS ||
                    (*resp)->get_stream_records == NULL)) {
        snprintf(err, errlen, "the reply carries no stream records");
        rv = LAPSE_ECORRUPT;
    }
    return rv;
}

/* Fills from node id at url. 0 once the gap is filled; LAPSE_ESTATE when
 * that copy has not applied the source through need (the gap's end) yet;
 * else the call's or the store's error. *copied gets the records put
 * here. */
static int fill_from(node_server *ns, const pmap_table *t, uint32_t shard, uint64_t mark,
                     uint64_t need, const char *url, uint64_t *copied, char *err, size_t errlen)
{
    rpc_client *c = NULL;
    int rv = rpc_client_open(&c, url, err, errlen);
    uint64_t after = 0;
    int past = 0;
    for (int page = 0; rv == 0 && !past && page < FILL_MAX_PAGES; page++) {
        Lapse__Response *resp = NULL;
        if ((rv = read_page(c, t, shard, after, &resp, err, errlen)) != 0) {
            rpc_response_free(resp);
            break;
        }
        const Lapse__GetStreamRecordsResponse *r = resp->get_stream_records;
        if (page == 0 && r->applied < need) {
            snprintf(err, errlen, "it applied records through %" PRIu64 " only, not %" PRIu64,
                     r->applied, need);
            rv = LAPSE_ESTATE;
        }
        const void *recs[FILL_PAGE_RECORDS];
        size_t lens[FILL_PAGE_RECORDS];
        size_t n = r->n_raw_records < FILL_PAGE_RECORDS ? r->n_raw_records : FILL_PAGE_RECORDS;
        for (size_t i = 0; rv == 0 && i < n; i++) {
            recs[i] = r->raw_records[i].data;
            lens[i] = r->raw_records[i].len;
        }
        if (rv == 0 && (rv = apply_stream_fill(ns->st, &t->schema, shard, mark, recs, lens, n,
                                               &past, err, errlen)) == 0) {
            *copied += n;
            past |= n == 0; /* its end: every record of the gap it holds is here */
            if (n > 0) {
                change_record last;
                rv = change_decode_head(recs[n - 1], lens[n - 1], &last);
                after = last.stream_seq;
            }
        }
        rpc_response_free(resp);
    }
    rpc_client_close(c);
    if (rv == 0 && !past) {
        snprintf(err, errlen, "the gap is longer than %d pages: going on next pass",
                 FILL_MAX_PAGES);
        rv = LAPSE_ESTATE;
    }
    return rv;
}

int streams_fill_shard(node_server *ns, const pmap *pm, const pmap_table *t, uint32_t shard,
                       uint64_t mark)
{
    const pmap_replicas *copies = pmap_stream_shard(t, shard);
    char err[512] = "";
    uint64_t need = mark;
    int rv = apply_stream_fill_need(ns->st, t->schema.id, shard, mark, &need, err, sizeof(err));
    if (rv != 0) {
        log_warn("stream shard %u of table %s: %s: %s", shard, t->schema.name, lapse_strerror(rv),
                 err);
        return rv;
    }
    rv = LAPSE_EUNAVAILABLE;
    for (uint32_t i = 0; copies != NULL && i < copies->n && rv != 0; i++) {
        const pmap_node *peer = pmap_node_find(pm, copies->ids[i]);
        if (copies->ids[i] == ns->id || peer == NULL || peer->state != PMAP_NODE_UP) {
            continue;
        }
        uint64_t copied = 0;
        err[0] = '\0';
        rv = fill_from(ns, t, shard, mark, need, peer->address, &copied, err, sizeof(err));
        if (rv == 0 &&
            (rv = apply_stream_filled(ns->st, t->schema.id, shard, mark, err, sizeof(err))) == 0) {
            log_info("stream shard %u of table %s: the records this copy lost (through outbox "
                     "record %" PRIu64 ") filled from node %u's copy: %" PRIu64
                     " records read; it answers reads again",
                     shard, t->schema.name, mark, copies->ids[i], copied);
        } else if (rv != 0) {
            log_warn("stream shard %u of table %s: filling the records this copy lost from "
                     "node %u: %s: %s",
                     shard, t->schema.name, copies->ids[i], lapse_strerror(rv), err);
        }
    }
    return rv;
}
