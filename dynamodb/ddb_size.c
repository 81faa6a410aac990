/*
 * ddb_size.c: DescribeTable's size figures, cached (ddb_size.h).
 */
#include "ddb_size.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"

typedef struct size_slot {
    char table[256]; /* "": free */
    int64_t created_ms;
    int64_t until_ms; /* monotonic */
    ddb_size size;
} size_slot;

static size_slot g_size[DDB_SIZE_SLOTS];
static size_t g_size_next;
static pthread_mutex_t g_size_mu = PTHREAD_MUTEX_INITIALIZER;

void ddb_size_fini(ddb_size *s)
{
    free(s->indexes);
    memset(s, 0, sizeof(*s));
}

/* *to = a copy of from (to's indexes allocated); 0, or -1 on OOM with *to
 * zero. */
static int copy(ddb_size *to, const ddb_size *from)
{
    *to = *from;
    to->indexes = NULL;
    if (from->nindexes == 0) {
        return 0;
    }
    to->indexes = malloc(from->nindexes * sizeof(*to->indexes));
    if (to->indexes == NULL) {
        memset(to, 0, sizeof(*to));
        return -1;
    }
    memcpy(to->indexes, from->indexes, from->nindexes * sizeof(*to->indexes));
    return 0;
}

void ddb_size_get(ddb_ctx *x, const char *table, int64_t created_ms, ddb_size *out)
{
    int64_t now = clock_mono_now().ms;
    int hit = 0;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&g_size_mu);
    for (size_t i = 0; i < DDB_SIZE_SLOTS && !hit; i++) {
        const size_slot *s = &g_size[i];
        if (s->created_ms == created_ms && strcmp(s->table, table) == 0 && s->until_ms > now) {
            hit = copy(out, &s->size) == 0;
        }
    }
    pthread_mutex_unlock(&g_size_mu);
    if (hit) {
        return;
    }
    /* The answer and the cache each get their own copy (ours to free). */
    lapse_error err;
    ddb_size got, keep;
    if (lapse_table_sizes(x->c, table, &got.table, &got.indexes, &got.nindexes, &err) != 0) {
        return; /* invariant 2 */
    }
    int copied = copy(out, &got) == 0 && copy(&keep, &got) == 0;
    lapse_free(got.indexes);
    if (!copied) {
        ddb_size_fini(out);
        return; /* invariant 2 */
    }
    pthread_mutex_lock(&g_size_mu);
    size_slot *slot = NULL;
    for (size_t i = 0; i < DDB_SIZE_SLOTS && slot == NULL; i++) {
        slot = strcmp(g_size[i].table, table) == 0 ? &g_size[i] : NULL;
    }
    if (slot == NULL) {
        slot = &g_size[g_size_next];
        g_size_next = (g_size_next + 1) % DDB_SIZE_SLOTS;
    }
    snprintf(slot->table, sizeof slot->table, "%s", table);
    slot->created_ms = created_ms;
    ddb_size_fini(&slot->size);
    slot->size = keep;
    slot->until_ms = clock_mono_now().ms + DDB_SIZE_CACHE_MS;
    pthread_mutex_unlock(&g_size_mu);
}
