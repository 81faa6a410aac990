/*
 * streamread.c: reading a whole change stream (streamread.h).
 */
#include "streamread.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_records(const void *a, const void *b)
{
    const lapse_stream_record *x = *(const lapse_stream_record *const *)a;
    const lapse_stream_record *y = *(const lapse_stream_record *const *)b;
    if (x->shard != y->shard) {
        return x->shard < y->shard ? -1 : 1;
    }
    return x->sequence_number < y->sequence_number ? -1 : x->sequence_number > y->sequence_number;
}

static int grow(void **v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) {
        return 0;
    }
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        c *= 2;
    }
    void *p = realloc(*v, c * elem);
    if (p == NULL) {
        return LAPSE_ENOMEM;
    }
    *v = p;
    *cap = c;
    return 0;
}

/* Learns the shards on the first call. */
static int init_shards(lapse_client *c, const char *table, streamread *s, lapse_error *err)
{
    lapse_stream_shard *shards = NULL;
    size_t n = 0;
    int rv = lapse_stream_shards(c, table, &shards, &n, err);
    if (rv != 0) {
        return rv;
    }
    s->shard = calloc(n ? n : 1, sizeof(*s->shard));
    s->last_read = calloc(n ? n : 1, sizeof(*s->last_read));
    s->last_seq = calloc(n ? n : 1, sizeof(*s->last_seq));
    s->host = calloc(n ? n : 1, sizeof(*s->host));
    if (s->shard == NULL || s->last_read == NULL || s->last_seq == NULL || s->host == NULL) {
        lapse_free(shards);
        streamread_free(s);
        snprintf(err->message, sizeof(err->message), "out of memory");
        return err->code = LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        s->shard[i] = shards[i].shard;
        s->host[i] = shards[i].node_id;
    }
    s->nshards = n;
    lapse_free(shards);
    return 0;
}

int streamread_more(lapse_client *c, const char *table, streamread *s, lapse_error *err)
{
    int rv = 0;
    if (s->nshards == 0 && (rv = init_shards(c, table, s, err)) != 0) {
        return rv;
    }
    size_t n = s->nshards;
    lapse_stream_request *q = calloc(n ? n : 1, sizeof(*q));
    lapse_stream_batch **b = calloc(n ? n : 1, sizeof(*b));
    size_t *which = calloc(n ? n : 1, sizeof(*which)); /* q[k] reads shard index which[k] */
    if (q == NULL || b == NULL || which == NULL) {
        rv = LAPSE_ENOMEM;
        goto out;
    }
    size_t active = n;
    for (size_t i = 0; i < n; i++) {
        which[i] = i;
    }
    while (active > 0) {
        for (size_t k = 0; k < active; k++) {
            memset(&q[k], 0, sizeof(q[k]));
            q[k].shard = s->shard[which[k]];
            q[k].after_seq = s->last_read[which[k]];
            q[k].limit = 1000;
        }
        if ((rv = lapse_stream_read_many(c, table, q, active, b, err)) != 0) {
            goto out;
        }
        size_t next = 0;
        for (size_t k = 0; k < active; k++) {
            size_t i = which[k], got = lapse_stream_batch_count(b[k]);
            s->last_seq[i] = lapse_stream_batch_last_sequence(b[k]);
            if (got == 0) {
                lapse_stream_batch_free(b[k]);
                continue;
            }
            if (grow((void **)&s->b, &s->bcap, s->nb + 1, sizeof(*s->b)) != 0 ||
                grow((void **)&s->r, &s->rcap, s->n + got, sizeof(*s->r)) != 0) {
                for (size_t j = k; j < active; j++) {
                    lapse_stream_batch_free(b[j]);
                }
                rv = LAPSE_ENOMEM;
                goto out;
            }
            s->b[s->nb++] = b[k];
            for (size_t j = 0; j < got; j++) {
                s->r[s->n++] = lapse_stream_batch_record(b[k], j);
            }
            s->last_read[i] = lapse_stream_batch_record(b[k], got - 1)->sequence_number;
            which[next++] = i; /* maybe more: read this shard again */
        }
        active = next;
    }
out:
    if (s->n > 1) {
        qsort(s->r, s->n, sizeof(*s->r), cmp_records);
    }
    if (rv == LAPSE_ENOMEM) {
        snprintf(err->message, sizeof(err->message), "out of memory");
        err->code = rv;
    }
    free(q);
    free(b);
    free(which);
    return rv;
}

void streamread_free(streamread *s)
{
    for (size_t i = 0; i < s->nb; i++) {
        lapse_stream_batch_free(s->b[i]);
    }
    free(s->b);
    free(s->r);
    free(s->shard);
    free(s->last_read);
    free(s->last_seq);
    free(s->host);
    memset(s, 0, sizeof(*s));
}

int streamread_gap(const streamread *s, int from_one, char *why, size_t len)
{
    for (size_t i = 0; i < s->n; i++) {
        const lapse_stream_record *r = s->r[i];
        int first = i == 0 || s->r[i - 1]->shard != r->shard;
        uint64_t want =
            first ? (from_one ? 1 : r->sequence_number) : s->r[i - 1]->sequence_number + 1;
        if (r->sequence_number != want) {
            snprintf(why, len, "stream shard %u: record %" PRIu64 " where %" PRIu64 " was due",
                     r->shard, r->sequence_number, want);
            return 1;
        }
    }
    return 0;
}
