/*
 * keyset.c: a bounded set of byte strings (see keyset.h). Linear probing
 * over a fixed table of KEYSET_SLOTS; removal re-inserts the rest of the
 * probe run (no tombstones), so lookups stop at the first empty slot.
 */
#include "keyset.h"

#include <stdlib.h>
#include <string.h>

#include "../common/lapse_err.h"

/* FNV-1a: the keys are few and short; any spread will do. */
static uint64_t hash_bytes(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    return h;
}

int keyset_init(keyset *s)
{
    memset(s, 0, sizeof(*s));
    atomic_init(&s->count, 0);
    return pthread_mutex_init(&s->mu, NULL) == 0 ? 0 : LAPSE_ENOMEM;
}

void keyset_fini(keyset *s)
{
    for (size_t i = 0; s->slots != NULL && i < KEYSET_SLOTS; i++) {
        free(s->slots[i].key);
    }
    free(s->slots);
    s->slots = NULL;
    atomic_store(&s->count, 0);
    pthread_mutex_destroy(&s->mu);
}

size_t keyset_count(keyset *s)
{
    return atomic_load_explicit(&s->count, memory_order_relaxed);
}

/* The slot holding key, or the empty slot ending its probe run.
 * REQUIRES: mu held, slots allocated. */
static size_t find(const keyset *s, const void *key, size_t len, uint64_t h)
{
    size_t i = (size_t)(h % KEYSET_SLOTS);
    for (;;) {
        const keyset_slot *x = &s->slots[i];
        if (x->key == NULL ||
            (x->hash == h && x->len == len && (len == 0 || memcmp(x->key, key, len) == 0))) {
            return i;
        }
        i = (i + 1) % KEYSET_SLOTS;
    }
}

int keyset_has(keyset *s, const void *key, size_t len)
{
    if (keyset_count(s) == 0) {
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    int found = s->slots != NULL && s->slots[find(s, key, len, hash_bytes(key, len))].key != NULL;
    pthread_mutex_unlock(&s->mu);
    return found;
}

int keyset_add(keyset *s, const void *key, size_t len)
{
    int rv = 0;
    uint64_t h = hash_bytes(key, len);
    pthread_mutex_lock(&s->mu);
    if (s->slots == NULL && (s->slots = calloc(KEYSET_SLOTS, sizeof(*s->slots))) == NULL) {
        rv = LAPSE_ENOMEM;
        goto out;
    }
    size_t i = find(s, key, len, h);
    if (s->slots[i].key != NULL) {
        goto out;
    }
    if (atomic_load(&s->count) >= KEYSET_MAX) {
        rv = LAPSE_ETOOBIG;
        goto out;
    }
    uint8_t *copy = malloc(len > 0 ? len : 1);
    if (copy == NULL) {
        rv = LAPSE_ENOMEM;
        goto out;
    }
    memcpy(copy, key, len);
    s->slots[i] = (keyset_slot){.key = copy, .len = len, .hash = h};
    atomic_fetch_add(&s->count, 1);
out:
    pthread_mutex_unlock(&s->mu);
    return rv;
}

/* Empties slot i and re-places the rest of its probe run so that every key
 * stays reachable from its home slot. REQUIRES: mu held, slot i occupied. */
static void remove_at(keyset *s, size_t i)
{
    free(s->slots[i].key);
    s->slots[i].key = NULL;
    atomic_fetch_sub(&s->count, 1);
    for (size_t j = (i + 1) % KEYSET_SLOTS; s->slots[j].key != NULL; j = (j + 1) % KEYSET_SLOTS) {
        keyset_slot x = s->slots[j];
        s->slots[j].key = NULL;
        s->slots[find(s, x.key, x.len, x.hash)] = x;
    }
}

int keyset_remove(keyset *s, const void *key, size_t len)
{
    int removed = 0;
    if (keyset_count(s) == 0) {
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    if (s->slots != NULL) {
        size_t i = find(s, key, len, hash_bytes(key, len));
        if (s->slots[i].key != NULL) {
            remove_at(s, i);
            removed = 1;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return removed;
}

void keyset_remove_prefix(keyset *s, const void *prefix, size_t plen)
{
    if (keyset_count(s) == 0) {
        return;
    }
    pthread_mutex_lock(&s->mu);
    /* Rare (a table dropped): a full pass, restarting a slot after each
     * removal because remove_at may move a later key into it. */
    for (size_t i = 0; s->slots != NULL && i < KEYSET_SLOTS;) {
        const keyset_slot *x = &s->slots[i];
        if (x->key != NULL && x->len >= plen && memcmp(x->key, prefix, plen) == 0) {
            remove_at(s, i);
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&s->mu);
}
