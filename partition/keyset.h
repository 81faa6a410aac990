/*
 * keyset.h: a bounded set of byte strings, thread-safe. The store keeps the
 * items keys of "undeletable" items in one (expiry.h): items whose stored
 * value does not decode, which the TTL sweep skips instead of retrying.
 *
 * Thread-safety: every function may be called from any thread (one mutex;
 * keyset_count is a lock-free read so the hot paths can skip the set while it
 * is empty, which is almost always).
 *
 * Invariants:
 *  1. At most KEYSET_MAX keys are held; keyset_add on a full set fails rather
 *     than evicting, so a key once added stays until removed.
 *  2. count equals the number of occupied slots.
 */
#ifndef LAPSE_KEYSET_H
#define LAPSE_KEYSET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define KEYSET_MAX 4096
#define KEYSET_SLOTS (2 * KEYSET_MAX) /* open addressing, load factor <= 1/2 */

typedef struct keyset_slot {
    uint8_t *key; /* owned; NULL = empty (tombstones are re-packed on removal) */
    size_t len;
    uint64_t hash;
} keyset_slot;

typedef struct keyset {
    pthread_mutex_t mu;
    atomic_size_t count; /* keys held; read without mu */
    keyset_slot *slots;  /* owned, KEYSET_SLOTS; NULL until the first add */
} keyset;

/* Initializes an empty set. Returns 0 or LAPSE_ENOMEM. */
int keyset_init(keyset *s);
/* Frees every key and the mutex. REQUIRES: keyset_init succeeded. */
void keyset_fini(keyset *s);
/* Keys held now (a racy snapshot: 0 means "skip the lookup"). */
size_t keyset_count(keyset *s);
/* Whether key is in the set. */
int keyset_has(keyset *s, const void *key, size_t len);
/* Adds a copy of key. Returns 0 (also when already present), LAPSE_ETOOBIG
 * when the set is full, or LAPSE_ENOMEM; on error the set is unchanged. */
int keyset_add(keyset *s, const void *key, size_t len);
/* Removes key if present. Returns 1 if it was present, else 0. */
int keyset_remove(keyset *s, const void *key, size_t len);
/* Removes every key that starts with prefix[0..plen). */
void keyset_remove_prefix(keyset *s, const void *prefix, size_t plen);

#endif
