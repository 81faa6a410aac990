/*
 * ddb_streams.c: DynamoDB Streams on liblapse's change stream (ddb_streams.h).
 * Shards are the table's base partitions and never close; records come from
 * lapse_stream_read, which already applies the table's view.
 */
#include "ddb_streams.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "ddb_tables.h"

#define ITERATOR_LIFE_MS (15 * 60 * 1000) /* DynamoDB's */
#define ITERATOR_MAX 2048                 /* DynamoDB's ShardIterator length limit */
#define SHARD_ID_LEN 37                   /* "shardId-" 20 digits "-" 8 hex digits */
#define SEQ_DIGITS 21                     /* the SDKs want at least 21 */
#define SEQ_FMT "%021" PRIu64

/* A stream an ARN or iterator named, found in the cached map. */
typedef struct stream_ref {
    char table[256];
    lapse_stream_info info;
    char arn[600], label[32];
} stream_ref;

static int stream_not_found(ddb_ctx *x, const char *arn)
{
    return ddb_req_fail(x, 400, "ResourceNotFoundException",
                        "Requested resource not found: Stream: %.600s not found", arn);
}

/* Digits only, at most max of them, into *out; -1 when s is anything else
 * or too large. */
static int parse_u64(const char *s, size_t len, size_t max, uint64_t *out)
{
    char tmp[48];
    if (len < 1 || len > max || len >= sizeof tmp || strspn(s, "0123456789") < len) {
        return -1;
    }
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    errno = 0;
    unsigned long long v = strtoull(tmp, NULL, 10);
    if (errno == ERANGE) {
        return -1;
    }
    *out = v;
    return 0;
}

/* Finds the stream arn names: its table in the cached map (refreshed first
 * with refresh, or when it is older than want_id, the table id an iterator
 * carries; 0: any), and checks that the ARN's label is that table's. 0, or -1
 * with x's error set. */
static int resolve(ddb_ctx *x, const char *arn, int refresh, uint32_t want_id, stream_ref *r)
{
    static const char arn_start[] = "arn:aws:dynamodb:";
    char prefix[160], label[64];
    lapse_error err;
    const char *mid = strstr(arn, "/stream/");
    if (strncmp(arn, arn_start, strlen(arn_start)) != 0 || mid == NULL) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "Invalid StreamArn %.600s: not arn:aws:dynamodb:REGION:ACCOUNT:table/"
                            "NAME/stream/LABEL",
                            arn);
    }
    snprintf(prefix, sizeof prefix, "arn:aws:dynamodb:%s:000000000000:table/", x->region);
    size_t pl = strlen(prefix), tl = (size_t)(mid - arn) - pl;
    if (strncmp(arn, prefix, pl) != 0 || (size_t)(mid - arn) <= pl || tl >= sizeof r->table ||
        strlen(mid + 8) >= sizeof label) {
        return stream_not_found(x, arn); /* another region or account, or no such name */
    }
    memcpy(r->table, arn + pl, tl);
    r->table[tl] = '\0';
    snprintf(label, sizeof label, "%s", mid + 8);
    if (refresh && lapse_refresh_map(x->c, &err) != 0) {
        return ddb_req_lapse_fail(x, &err, r->table);
    }
    for (int attempt = 0;; attempt++) {
        int rv = lapse_stream_info_get(x->c, r->table, &r->info, &err);
        if (rv == LAPSE_ENOTFOUND || rv == LAPSE_EINVAL) {
            return stream_not_found(x, arn); /* no table, or no stream on it */
        }
        if (rv != 0) {
            return ddb_req_lapse_fail(x, &err, r->table);
        }
        if (attempt > 0 || want_id == 0 || r->info.table_id >= want_id) {
            break;
        }
        if (lapse_refresh_map(x->c, &err) != 0) { /* the cache predates the iterator */
            return ddb_req_lapse_fail(x, &err, r->table);
        }
    }
    ddb_req_stream_arn(x, r->table, r->info.since_ms, r->arn, sizeof r->arn, r->label,
                       sizeof r->label);
    if (strcmp(label, r->label) != 0 || (want_id != 0 && r->info.table_id != want_id)) {
        return stream_not_found(x, arn); /* an older table of that name */
    }
    return 0;
}

static void shard_id(const stream_ref *r, uint32_t shard, char *out, size_t len)
{
    snprintf(out, len, "shardId-%020" PRIu32 "-%08" PRIx32, shard, r->info.table_id);
}

/* The shard ShardId s names in r's stream into *shard; 0, or -1 with x's
 * error set. */
static int parse_shard_id(ddb_ctx *x, const stream_ref *r, const char *s, uint32_t *shard)
{
    uint64_t part = 0;
    char want[SHARD_ID_LEN + 1] = "";
    /* The id this stream gives the partition s names must be s itself: that
     * checks the prefix, the digits and the table id at once. */
    if (strlen(s) == SHARD_ID_LEN && parse_u64(s + 8, 20, 20, &part) == 0 &&
        part < r->info.shards) {
        shard_id(r, (uint32_t)part, want, sizeof want);
    }
    if (strcmp(s, want) != 0) {
        return ddb_req_fail(x, 400, "ResourceNotFoundException",
                            "Requested resource not found: Shard %.100s does not exist in stream "
                            "%s",
                            s, r->arn);
    }
    *shard = (uint32_t)part;
    return 0;
}

static json_t *seq_json(uint64_t seq)
{
    return json_sprintf(SEQ_FMT, seq);
}

/* Reads up to limit records of shard after after (wait 0) into *b; 0, or -1
 * with x's error set. */
static int read_shard(ddb_ctx *x, const stream_ref *r, uint32_t shard, uint64_t after,
                      unsigned limit, lapse_stream_batch **b)
{
    /* Pinned to the ARN's stream: a host answers ENOTFOUND once it was
     * turned off, even while this gateway's map still shows it. */
    lapse_stream_request q = {.shard = shard,
                              .after_seq = after,
                              .limit = limit,
                              .wait_ms = 0,
                              .pin_generation = 1,
                              .generation = r->info.generation};
    lapse_error err;
    if (lapse_stream_read(x->c, r->table, &q, b, &err) != 0) {
        return err.code == LAPSE_ENOTFOUND ? stream_not_found(x, r->arn)
                                           : ddb_req_lapse_fail(x, &err, r->table);
    }
    return 0;
}

/* ======================= ListStreams ======================= */

int ddb_streams_list(ddb_ctx *x, json_t *req)
{
    const char *table, *start;
    long limit = 100;
    lapse_error err;
    stream_ref r;
    json_t *names;
    if (ddb_req_string(x, req, "TableName", 0, &table) != 0 ||
        ddb_req_string(x, req, "ExclusiveStartStreamArn", 0, &start) != 0 ||
        ddb_req_int(x, req, "Limit", 1, 100, &limit) != 0) {
        return -1;
    }
    if (table != NULL) {
        if (lapse_refresh_map(x->c, &err) != 0) {
            return ddb_req_lapse_fail(x, &err, table);
        }
        int rv = lapse_stream_info_get(x->c, table, &r.info, &err);
        if (rv == LAPSE_ENOTFOUND || (rv != 0 && rv != LAPSE_EINVAL)) {
            return ddb_req_lapse_fail(x, &err, table);
        }
        names = json_pack("[s]", table);
    } else if ((names = ddb_tables_names(x)) == NULL) {
        return -1;
    } else if (lapse_refresh_map(x->c, &err) != 0) {
        json_decref(names);
        return ddb_req_lapse_fail(x, &err, NULL);
    }
    /* Streams come in table name order; a page starts after the table of
     * ExclusiveStartStreamArn. */
    char after[256] = "";
    const char *mid = start != NULL ? strstr(start, "/stream/") : NULL;
    const char *slash = mid != NULL ? memchr(start, '/', (size_t)(mid - start)) : NULL;
    if (start != NULL && slash == NULL) {
        json_decref(names);
        return ddb_req_fail(x, 400, "ValidationException",
                            "Invalid ExclusiveStartStreamArn %.600s: not a stream ARN", start);
    }
    if (slash != NULL) {
        snprintf(after, sizeof after, "%.*s", (int)(mid - slash - 1), slash + 1);
    }
    json_t *streams = json_array();
    size_t n = json_array_size(names), i = 0;
    int more = 0;
    for (; i < n; i++) {
        const char *name = json_string_value(json_array_get(names, i));
        if (after[0] != '\0' && strcmp(name, after) <= 0) {
            continue;
        }
        if (lapse_stream_info_get(x->c, name, &r.info, &err) != 0) {
            continue; /* no stream, or deleted since the list */
        }
        if (json_array_size(streams) == (size_t)limit) {
            more = 1;
            break;
        }
        ddb_req_stream_arn(x, name, r.info.since_ms, r.arn, sizeof r.arn, r.label, sizeof r.label);
        json_array_append_new(streams, json_pack("{s:s,s:s,s:s}", "StreamArn", r.arn, "TableName",
                                                 name, "StreamLabel", r.label));
    }
    json_decref(names);
    x->out = json_pack("{s:o}", "Streams", streams);
    if (more) {
        json_object_set_new(x->out, "LastEvaluatedStreamArn", json_string(r.arn));
    }
    return 0;
}

/* ======================= DescribeStream ======================= */

int ddb_streams_describe(ddb_ctx *x, json_t *req)
{
    const char *arn, *start;
    long limit = 100;
    uint32_t first = 0;
    stream_ref r;
    lapse_error err;
    if (ddb_req_string(x, req, "StreamArn", 1, &arn) != 0 ||
        ddb_req_string(x, req, "ExclusiveStartShardId", 0, &start) != 0 ||
        ddb_req_int(x, req, "Limit", 1, 100, &limit) != 0 || resolve(x, arn, 1, 0, &r) != 0 ||
        (start != NULL && parse_shard_id(x, &r, start, &first) != 0)) {
        return -1;
    }
    first += start != NULL;
    size_t n = r.info.shards - first < (uint32_t)limit ? r.info.shards - first : (size_t)limit;
    lapse_stream_request *reqs = calloc(n ? n : 1, sizeof *reqs);
    lapse_stream_batch **b = calloc(n ? n : 1, sizeof *b);
    char pk[LAPSE_KEY_NAME_MAX + 1], sk[LAPSE_KEY_NAME_MAX + 1];
    if (reqs == NULL || b == NULL) {
        free(reqs);
        free(b);
        return ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        reqs[i] = (lapse_stream_request){.shard = first + (uint32_t)i,
                                         .limit = 1,
                                         .pin_generation = 1,
                                         .generation = r.info.generation};
    }
    /* Each shard's first kept record starts its range (an empty shard: the
     * next record it will get). */
    int rv = n > 0 ? lapse_stream_read_many(x->c, r.table, reqs, n, b, &err) : 0;
    if (rv == 0) {
        rv = lapse_key_schema(x->c, r.table, NULL, pk, sk, NULL, &err);
    }
    if (rv != 0) {
        free(reqs);
        free(b);
        return ddb_req_lapse_fail(x, &err, r.table);
    }
    json_t *shards = json_array(), *ks = json_array();
    char id[SHARD_ID_LEN + 1];
    for (size_t i = 0; i < n; i++) {
        uint64_t oldest = lapse_stream_batch_oldest_sequence(b[i]);
        uint64_t start_seq = oldest != 0 ? oldest : lapse_stream_batch_last_sequence(b[i]) + 1;
        shard_id(&r, reqs[i].shard, id, sizeof id);
        json_array_append_new(shards,
                              json_pack("{s:s,s:{s:o}}", "ShardId", id, "SequenceNumberRange",
                                        "StartingSequenceNumber", seq_json(start_seq)));
        lapse_stream_batch_free(b[i]);
    }
    free(b);
    json_array_append_new(ks, json_pack("{s:s,s:s}", "AttributeName", pk, "KeyType", "HASH"));
    if (sk[0] != '\0') {
        json_array_append_new(ks, json_pack("{s:s,s:s}", "AttributeName", sk, "KeyType", "RANGE"));
    }
    const char *view = lapse_stream_view_name((int)r.info.view);
    json_t *d = json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:o}", "StreamArn", r.arn, "StreamLabel",
                          r.label, "StreamStatus", "ENABLED", "StreamViewType",
                          view != NULL ? view : "NEW_AND_OLD_IMAGES", "TableName", r.table,
                          "KeySchema", ks, "Shards", shards);
    if (d != NULL && r.info.since_ms > 0) {
        json_object_set_new(d, "CreationRequestDateTime",
                            json_real((double)r.info.since_ms / 1000.0));
    }
    if (d != NULL && first + n < r.info.shards && n > 0) {
        shard_id(&r, reqs[n - 1].shard, id, sizeof id);
        json_object_set_new(d, "LastEvaluatedShardId", json_string(id));
    }
    free(reqs);
    x->out = json_pack("{s:o}", "StreamDescription", d);
    return 0;
}

/* ======================= Iterators ======================= */

typedef struct iterator {
    uint32_t table_id, shard;
    uint64_t after; /* records after this sequence number; 0: from the oldest kept */
    int64_t issued_ms;
} iterator;

/* A new iterator of r's shard at it (issued now) as a JSON string. */
static json_t *iterator_json(const stream_ref *r, uint32_t shard, uint64_t after)
{
    return json_sprintf("%s|%" PRIu32 "|%" PRIu32 "|%" PRIu64 "|%" PRId64, r->arn, r->info.table_id,
                        shard, after, clock_wall_now().ms);
}

/* Splits ShardIterator s into its stream ARN (arn, at least ITERATOR_MAX + 1
 * bytes) and *it; 0, or -1 with x's error set. */
static int parse_iterator(ddb_ctx *x, const char *s, char *arn, iterator *it)
{
    char *f[5];
    uint64_t v[4];
    size_t len = strlen(s);
    if (len > ITERATOR_MAX) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "1 validation error detected: Value at 'shardIterator' failed to "
                            "satisfy constraint: Member must have length less than or equal to "
                            "2048");
    }
    memcpy(arn, s, len + 1);
    for (int k = 4; k >= 1; k--) {
        char *bar = strrchr(arn, '|');
        if (bar == NULL) {
            goto bad;
        }
        *bar = '\0';
        f[k] = bar + 1;
    }
    f[0] = arn;
    for (int k = 1; k <= 4; k++) {
        if (parse_u64(f[k], strlen(f[k]), 20, &v[k - 1]) != 0) {
            goto bad;
        }
    }
    if (v[0] == 0 || v[0] > UINT32_MAX || v[1] > UINT32_MAX || v[3] > INT64_MAX) {
        goto bad;
    }
    it->table_id = (uint32_t)v[0];
    it->shard = (uint32_t)v[1];
    it->after = v[2];
    it->issued_ms = (int64_t)v[3];
    return 0;
bad:
    return ddb_req_fail(x, 400, "ValidationException",
                        "Invalid ShardIterator: not an iterator this endpoint issued");
}

static int trimmed(ddb_ctx *x, uint64_t from, uint64_t oldest)
{
    return ddb_req_fail(x, 400, "TrimmedDataAccessException",
                        "the records from sequence number " SEQ_FMT
                        " were trimmed (the stream's retention) before they were read; "
                        "the oldest kept is " SEQ_FMT,
                        from, oldest);
}

/* Whether the records after after are gone: the shard keeps records from
 * oldest (0: none) and has written up to last. */
static int gone(uint64_t after, uint64_t oldest, uint64_t last)
{
    return after > 0 && (oldest != 0 ? oldest > after + 1 : last > after);
}

int ddb_streams_get_iterator(ddb_ctx *x, json_t *req)
{
    static const char *const types[] = {"TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER",
                                        "AFTER_SEQUENCE_NUMBER"};
    const char *arn, *sid, *type, *seqs;
    stream_ref r;
    uint32_t shard;
    uint64_t seq = 0, after = 0;
    int kind = -1;
    if (ddb_req_string(x, req, "StreamArn", 1, &arn) != 0 ||
        ddb_req_string(x, req, "ShardId", 1, &sid) != 0 ||
        ddb_req_string(x, req, "ShardIteratorType", 1, &type) != 0 ||
        ddb_req_string(x, req, "SequenceNumber", 0, &seqs) != 0) {
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        kind = strcmp(type, types[i]) == 0 ? i : kind;
    }
    if (kind < 0) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "1 validation error detected: Value '%.64s' at 'shardIteratorType' "
                            "failed to satisfy constraint: Member must satisfy enum value set: "
                            "[TRIM_HORIZON, LATEST, AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER]",
                            type);
    }
    if ((kind >= 2) != (seqs != NULL)) {
        return ddb_req_fail(x, 400, "ValidationException",
                            kind >= 2 ? "SequenceNumber is required with ShardIteratorType %s"
                                      : "SequenceNumber is only for AT_SEQUENCE_NUMBER and "
                                        "AFTER_SEQUENCE_NUMBER, not %s",
                            type);
    }
    if (seqs != NULL &&
        (strlen(seqs) < SEQ_DIGITS || parse_u64(seqs, strlen(seqs), 40, &seq) != 0 || seq == 0)) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "Invalid SequenceNumber %.64s: 21 to 40 digits of a record's number",
                            seqs);
    }
    if (resolve(x, arn, 1, 0, &r) != 0 || parse_shard_id(x, &r, sid, &shard) != 0) {
        return -1;
    }
    if (kind > 0) {
        lapse_stream_batch *b = NULL;
        if (read_shard(x, &r, shard, 0, 1, &b) != 0) {
            return -1;
        }
        uint64_t last = lapse_stream_batch_last_sequence(b);
        uint64_t oldest = lapse_stream_batch_oldest_sequence(b);
        lapse_stream_batch_free(b);
        after = kind == 1 ? last : kind == 2 ? seq - 1 : seq;
        if (after > last) {
            return ddb_req_fail(x, 400, "ValidationException",
                                "Invalid SequenceNumber %.64s: the shard's last record is " SEQ_FMT,
                                seqs, last);
        }
        if (gone(after, oldest, last) || (after == 0 && oldest > 1)) {
            return trimmed(x, after + 1, oldest);
        }
    }
    x->out = json_pack("{s:o}", "ShardIterator", iterator_json(&r, shard, after));
    return 0;
}

/* ======================= GetRecords ======================= */

/* rec in DynamoDB Streams' record shape, or NULL with x's error set. */
static json_t *record_json(ddb_ctx *x, const stream_ref *r, const lapse_stream_record *rec)
{
    static const char *const events[] = {"INSERT", "MODIFY", "REMOVE"};
    const char *view = lapse_stream_view_name((int)rec->view);
    int64_t ms = rec->approximate_creation_ms;
    json_t *d = json_pack("{s:I,s:o,s:o,s:I,s:s}", "ApproximateCreationDateTime",
                          (json_int_t)(ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000)), "Keys",
                          ddb_req_item_json(x, rec->keys), "SequenceNumber",
                          seq_json(rec->sequence_number), "SizeBytes", (json_int_t)rec->size_bytes,
                          "StreamViewType", view != NULL ? view : "NEW_AND_OLD_IMAGES");
    if (d != NULL && rec->new_image != NULL &&
        json_object_set_new(d, "NewImage", ddb_req_item_json(x, rec->new_image)) != 0) {
        json_decref(d);
        d = NULL;
    }
    if (d != NULL && rec->old_image != NULL &&
        json_object_set_new(d, "OldImage", ddb_req_item_json(x, rec->old_image)) != 0) {
        json_decref(d);
        d = NULL;
    }
    char id[48];
    snprintf(id, sizeof id, "%08" PRIx32 "%08" PRIx32 "%016" PRIx64, r->info.table_id, rec->shard,
             rec->sequence_number);
    json_t *o = d == NULL ? NULL
                          : json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "eventID", id, "eventName",
                                      events[(unsigned)rec->event <= 2 ? rec->event : 0],
                                      "eventVersion", "1.1", "eventSource", "aws:dynamodb",
                                      "awsRegion", x->region, "dynamodb", d);
    if (o != NULL && rec->ttl_delete) {
        /* DynamoDB marks its TTL deletes so; Lapse's TTL deletes are the same
         * service action. */
        json_object_set_new(
            o, "userIdentity",
            json_pack("{s:s,s:s}", "PrincipalId", "dynamodb.amazonaws.com", "Type", "Service"));
    }
    if (o == NULL && x->out == NULL && x->type[0] == '\0') {
        ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    return o;
}

int ddb_streams_get_records(ddb_ctx *x, json_t *req)
{
    const char *s;
    long limit = 1000;
    char arn[ITERATOR_MAX + 1];
    iterator it = {0};
    stream_ref r;
    lapse_stream_batch *b = NULL;
    if (ddb_req_string(x, req, "ShardIterator", 1, &s) != 0 ||
        ddb_req_int(x, req, "Limit", 1, 1000, &limit) != 0 || parse_iterator(x, s, arn, &it) != 0) {
        return -1;
    }
    int64_t now = clock_wall_now().ms;
    if (now - it.issued_ms > ITERATOR_LIFE_MS) {
        return ddb_req_fail(x, 400, "ExpiredIteratorException",
                            "Iterator expired. The iterator was created at %" PRId64
                            " (epoch ms) while right now it is %" PRId64
                            ": iterators live 15 minutes",
                            it.issued_ms, now);
    }
    if (resolve(x, arn, 0, it.table_id, &r) != 0) {
        return -1;
    }
    if (it.shard >= r.info.shards) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "Invalid ShardIterator: not an iterator this endpoint issued");
    }
    if (read_shard(x, &r, it.shard, it.after, (unsigned)limit, &b) != 0) {
        return -1;
    }
    uint64_t oldest = lapse_stream_batch_oldest_sequence(b);
    if (gone(it.after, oldest, lapse_stream_batch_last_sequence(b))) {
        lapse_stream_batch_free(b);
        return trimmed(x, it.after + 1, oldest);
    }
    json_t *records = json_array();
    uint64_t next = it.after;
    for (size_t i = 0; i < lapse_stream_batch_count(b); i++) {
        const lapse_stream_record *rec = lapse_stream_batch_record(b, i);
        next = rec->sequence_number;
        if (rec->sequence_number < r.info.first_sequence) {
            continue; /* an earlier stream's, from a host whose map is older than ours */
        }
        json_t *o = record_json(x, &r, rec);
        if (o == NULL || json_array_append_new(records, o) != 0) {
            lapse_stream_batch_free(b);
            json_decref(records);
            return -1;
        }
    }
    lapse_stream_batch_free(b);
    x->out = json_pack("{s:o,s:o}", "Records", records, "NextShardIterator",
                       iterator_json(&r, it.shard, next));
    return 0;
}
