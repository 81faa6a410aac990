/*
 * itemkey.h: the key layouts of the items column family and of the expiry
 * index that points into it (docs/storage-format.md):
 *
 *   items:  u32be table id | u32be partition | enc(pk) [| enc(sk)]
 *   expiry: u32be table id | u32be partition | u64be due second | enc(pk) [| enc(sk)]
 *
 * An expiry key is the item key with the due second inserted after the
 * prefix, so the entries of a partition sort by due instant, then item key.
 *
 * enc() is keycodec_append (docs/key-encoding.md): order-preserving and
 * self-delimiting, so the keys of one table sort by partition, then partition
 * key, then sort key, and every range the store reads (a table, a partition,
 * a partition key, a sort-key condition) is one contiguous key range.
 *
 * Thread-safe (pure functions on caller-owned bufs).
 *
 * Invariants:
 *  1. The partition in a key is hash_partition_of_bytes(enc(pk)), computed
 *     from the same bytes that follow it.
 *  2. A key with no sort key is exactly the partition-key prefix.
 */
#ifndef LAPSE_ITEMKEY_H
#define LAPSE_ITEMKEY_H

#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"
#include "../common/item.h"
#include "../common/schema.h"

#define ITEMKEY_PREFIX_BYTES 8       /* u32be table id, u32be partition */
#define ITEMKEY_EXPIRY_HEAD_BYTES 16 /* prefix, then u64be due second */

/* Appends u32be(table_id) u32be(part) to k. 0 or LAPSE_ENOMEM. */
int itemkey_append_prefix(buf *k, uint32_t table_id, uint32_t part);
/* Clears k and writes table id | partition | enc(pk), the prefix of every key
 * of partition key pk, and sets *part. pk is encoded once: the partition is
 * hashed from the bytes already in k. Returns 0, LAPSE_EINVAL (pk is not a
 * key type or not a valid number) or LAPSE_ENOMEM. */
int itemkey_pk_prefix(buf *k, const table_schema *t, const attr_value *pk, uint32_t *part);
/* Clears k and writes the full key of it and sets *part. Returns 0,
 * LAPSE_EINVAL (a key attribute is missing or mistyped) or LAPSE_ENOMEM.
 * REQUIRES: schema_check_item(t, it, ...) passed, or EINVAL is possible. */
int itemkey_of_item(buf *k, const table_schema *t, const item *it, uint32_t *part);
/* Makes k the smallest key greater than every key that starts with k (drops
 * trailing 0xFF bytes and increments the last byte). Returns 0, or 1 when no
 * such key exists (k was empty or all 0xFF): the range is unbounded above. */
int itemkey_successor(buf *k);
/* The bounds [lo, hi) of every key of table_id: lo is 4 bytes, hi *hlen
 * bytes (4, or 9 for the largest id, which has no u32 successor). */
void itemkey_table_range(uint32_t table_id, uint8_t lo[4], uint8_t hi[9], size_t *hlen);
/* Clears k and writes the expiry key of the item whose items key is
 * ikey[0..ilen) with due second due_s (negative seconds are stored as 0: they
 * are due either way). Returns 0 or LAPSE_ENOMEM.
 * REQUIRES: ilen >= ITEMKEY_PREFIX_BYTES. */
int itemkey_expiry_of(buf *k, const uint8_t *ikey, size_t ilen, int64_t due_s);
/* Clears k and writes u32be(table_id) u32be(part) u64be(due_s): as a lower
 * bound, the first entry of the partition due at due_s or later; as an upper
 * bound, the end of the entries due before due_s. 0 or LAPSE_ENOMEM. */
int itemkey_expiry_bound(buf *k, uint32_t table_id, uint32_t part, uint64_t due_s);
/* The due second of expiry key ekey, or -1 when ekey is too short to be one. */
int64_t itemkey_expiry_due_s(const uint8_t *ekey, size_t elen);
/* Clears k and writes the items key an expiry key points to (its prefix and
 * item key suffix). 0, LAPSE_ECORRUPT (too short) or LAPSE_ENOMEM. */
int itemkey_of_expiry(buf *k, const uint8_t *ekey, size_t elen);

/* memcmp order of byte strings, a proper prefix first: RocksDB's order. */
int itemkey_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);

#endif
