/*
 * stream_follow.c: see stream_follow.h.
 */
#include "stream_follow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

typedef struct reader {
    stream_follow *f;
    uint32_t shard;
} reader;

static void *reader_main(void *p)
{
    reader *r = p;
    stream_follow *f = r->f;
    size_t plen = strlen(f->prefix);
    lapse_stream_request q = {
        .shard = r->shard, .after_seq = f->start_seq[r->shard], .limit = 1000, .wait_ms = 1000};
    int reported = 0;
    while (!atomic_load(&f->stop)) {
        lapse_stream_batch *b = NULL;
        lapse_error e;
        int64_t asked = wall_ms();
        if (lapse_stream_read(f->c, f->table, &q, &b, &e) != 0) {
            if (!reported++) { /* once per shard: the caller's give-up message follows */
                fprintf(stderr, "\nshard %u: %s (retrying)\n", r->shard, e.message);
            }
            sleep_ms(200);
            continue;
        }
        int64_t now = wall_ms();
        size_t n = lapse_stream_batch_count(b);
        for (size_t i = 0; i < n; i++) {
            const lapse_stream_record *rec = lapse_stream_batch_record(b, i);
            const char *id = lapse_item_get_s(rec->keys, "Id");
            long long k = id != NULL && strncmp(id, f->prefix, plen) == 0 ? atoll(id + plen) : -1;
            if (rec->ttl_delete && k >= 0 && k < f->total && f->seen_ms[k] == 0) {
                f->seen_ms[k] = now;
                f->deleted_ms[k] = rec->ttl_deleted_at_ms;
                atomic_fetch_add(&f->removes, 1);
            }
            q.after_seq = rec->sequence_number;
        }
        lapse_stream_batch_free(b);
        /* Answered empty at once: no long-poll slot was free. */
        if (n == 0 && now - asked < 500) {
            sleep_ms(10);
        }
    }
    free(r);
    return NULL;
}

/* f->start_seq[s] = shard s's newest sequence number now. 0 or -1. */
static int find_ends(stream_follow *f)
{
    lapse_stream_request *q = calloc(f->nshards_asked, sizeof(*q));
    lapse_stream_batch **b = calloc(f->nshards_asked, sizeof(*b));
    lapse_error e;
    int rv = -1;
    for (unsigned s = 0; q != NULL && b != NULL && s < f->nshards_asked; s++) {
        q[s] = (lapse_stream_request){.shard = s, .limit = 1};
    }
    if (q != NULL && b != NULL &&
        lapse_stream_read_many(f->c, f->table, q, f->nshards_asked, b, &e) == 0) {
        for (unsigned s = 0; s < f->nshards_asked; s++) {
            f->start_seq[s] = lapse_stream_batch_last_sequence(b[s]);
            lapse_stream_batch_free(b[s]);
        }
        rv = 0;
    } else if (q != NULL && b != NULL) {
        fprintf(stderr, "stream_follow: %s\n", e.message);
    }
    free(q);
    free(b);
    return rv;
}

int stream_follow_start(stream_follow **out, lapse_client *c, const char *table, const char *prefix,
                        long long total, unsigned nshards, int from_end)
{
    stream_follow *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return -1;
    }
    f->c = c;
    f->table = table;
    f->prefix = prefix;
    f->total = total;
    f->seen_ms = calloc((size_t)total, sizeof(*f->seen_ms));
    f->deleted_ms = calloc((size_t)total, sizeof(*f->deleted_ms));
    f->th = calloc(nshards, sizeof(*f->th));
    f->start_seq = calloc(nshards, sizeof(*f->start_seq));
    f->nshards_asked = nshards;
    if (f->seen_ms == NULL || f->deleted_ms == NULL || f->th == NULL || f->start_seq == NULL ||
        (from_end && find_ends(f) != 0)) {
        stream_follow_free(f);
        return -1;
    }
    for (unsigned s = 0; s < nshards; s++) {
        reader *r = malloc(sizeof(*r));
        if (r != NULL) {
            r->f = f;
            r->shard = s;
        }
        if (r == NULL || pthread_create(&f->th[s], NULL, reader_main, r) != 0) {
            free(r);
            stream_follow_free(f); /* stops the readers started so far */
            return -1;
        }
        f->nshards = s + 1;
    }
    *out = f;
    return 0;
}

void stream_follow_stop(stream_follow *f)
{
    if (f == NULL || atomic_exchange(&f->stop, 1)) {
        return;
    }
    for (unsigned s = 0; s < f->nshards; s++) {
        pthread_join(f->th[s], NULL);
    }
}

void stream_follow_free(stream_follow *f)
{
    if (f == NULL) {
        return;
    }
    stream_follow_stop(f);
    free(f->seen_ms);
    free(f->deleted_ms);
    free(f->th);
    free(f->start_seq);
    free(f);
}
