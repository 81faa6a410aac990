/*
 * ddb_size.c: DescribeTable's size figures, cached (ddb_size.h).
 */
#include "ddb_size.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../common/clock.h"

typedef struct size_slot {
    char table[256]; /* "": free */
    int64_t created_ms;
    int64_t until_ms; /* monotonic */
    uint64_t items, bytes;
} size_slot;

static size_slot g_size[DDB_SIZE_SLOTS];
static size_t g_size_next;
static pthread_mutex_t g_size_mu = PTHREAD_MUTEX_INITIALIZER;

void ddb_size_get(ddb_ctx *x, const char *table, int64_t created_ms, uint64_t *items,
                  uint64_t *bytes)
{
    int64_t now = clock_mono_now().ms;
    int hit = 0;
    *items = *bytes = 0;
    pthread_mutex_lock(&g_size_mu);
    for (size_t i = 0; i < DDB_SIZE_SLOTS && !hit; i++) {
        const size_slot *s = &g_size[i];
        if (s->created_ms == created_ms && strcmp(s->table, table) == 0 && s->until_ms > now) {
            *items = s->items;
            *bytes = s->bytes;
            hit = 1;
        }
    }
    pthread_mutex_unlock(&g_size_mu);
    if (hit) {
        return;
    }
    lapse_table_size_info info;
    lapse_error err;
    if (lapse_table_size(x->c, table, &info, &err) != 0) {
        return; /* invariant 2 */
    }
    *items = info.items;
    *bytes = info.bytes;
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
    slot->items = info.items;
    slot->bytes = info.bytes;
    slot->until_ms = clock_mono_now().ms + DDB_SIZE_CACHE_MS;
    pthread_mutex_unlock(&g_size_mu);
}
