/*
 * hash.h: which partition an item belongs to.
 *
 *   partition = xxh64(keycodec encoding of the partition key, seed 0)
 *               mod partition count
 *
 * The client computes the same function to route requests, so this file and
 * pmap.c make up placement/ (no RocksDB): target lapse_placement.
 * Thread-safe (pure functions).
 */
#ifndef LAPSE_HASH_H
#define LAPSE_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "../common/item.h"

/* REQUIRES: partitions is a power of two. */
uint32_t hash_partition_of_bytes(const void *enc, size_t len, uint32_t partitions);
/* xxh64 of p[0..len) with seed: a digest of bytes (not a placement). */
uint64_t hash_bytes64(const void *p, size_t len, uint64_t seed);
/* Encodes pk and hashes it. Returns 0 or LAPSE_EINVAL / LAPSE_ENOMEM. */
int hash_partition(const attr_value *pk, uint32_t partitions, uint32_t *out);

#endif
