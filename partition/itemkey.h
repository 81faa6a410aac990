/*
 * itemkey.h: the key layouts of the store's column families
 * (docs/storage-format.md, docs/replication.md):
 *
 *   items:  u32be table id | u32be partition | enc(pk) [| enc(sk)]
 *   expiry: u32be table id | u32be partition | u64be due second | enc(pk) [| enc(sk)]
 *   lsi:    u32be table id | u32be partition | u32be index id | enc(pk) | enc(lsi sk)
 *           [| enc(sk)]
 *   gsi:    u32be table id | u32be index id | u32be gsi partition | enc(gsi pk)
 *           [| enc(gsi sk)] | enc(pk) [| enc(sk)]
 *   outbox, stream: u32be table id | u32be partition (shard) | u64be sequence
 *   repl:   u32be table id | u8 kind | u32be partition [| u32be node id]
 *
 * An expiry key is the item key with the due second inserted after the
 * prefix, so the entries of a partition sort by due instant, then item key.
 * Every layout starts with the table id, so [table id, table id + 1) is all
 * of a table's data in any family.
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

/* The offset in items key ikey where enc(sk) starts (ilen for a table
 * without a sort key): *pk_end. 0 or LAPSE_ECORRUPT (ikey is not a key of
 * t). No allocation. */
int itemkey_pk_end(const table_schema *t, const uint8_t *ikey, size_t ilen, size_t *pk_end);
/* Decodes the key attributes of items key ikey into a new key item *out
 * (caller frees). 0, LAPSE_ECORRUPT or LAPSE_ENOMEM. */
int itemkey_decode_key(const table_schema *t, const uint8_t *ikey, size_t ilen, item **out);

/* The value of key attribute kd in it when it can be an index key: present,
 * of kd's type and, for S and B, non-empty. NULL otherwise (the item is not
 * in the index: indexes are sparse). Borrowed from it. */
const attr_value *itemkey_index_value(const item *it, const key_def *kd);
/* The same for an item_encode()d item (data NULL: no item): *has is 1 with
 * *v naming the value's bytes inside data (borrowed: never item_value_fini
 * it), 0 when absent, mistyped, empty or when the bytes do not decode.
 * Returns 0 or LAPSE_ENOMEM. */
int itemkey_index_value_encoded(const uint8_t *data, size_t len, const key_def *kd, attr_value *v,
                                int *has);

/* Clears k and writes the lsi key of the item with items key ikey (whose
 * enc(sk) starts at pk_end) under index index_id with LSI sort key value sk.
 * 0, LAPSE_EINVAL (sk not a key value) or LAPSE_ENOMEM. */
int itemkey_lsi_of(buf *k, const uint8_t *ikey, size_t ilen, size_t pk_end, uint32_t index_id,
                   const attr_value *sk);
/* Clears k and writes the gsi key of it under GSI g of table t and sets
 * *gpart. Returns 0; LAPSE_ENOTFOUND when it is not in the index (an index
 * key attribute absent, mistyped or empty); LAPSE_EINVAL when a table key
 * attribute is missing; LAPSE_ENOMEM. */
int itemkey_gsi_of(buf *k, const table_schema *t, const index_def *g, const item *it,
                   uint32_t *gpart);
/* Clears k and writes the prefix of gsi keys of partition gpart of index
 * index_id: u32be table id | u32be index id | u32be gpart. 0 or LAPSE_ENOMEM. */
int itemkey_gsi_prefix(buf *k, uint32_t table_id, uint32_t index_id, uint32_t gpart);
/* Clears k and writes u32be a | u32be b | u64be seq: an outbox key (table,
 * partition, seq) or a stream key (table, shard, stream seq). 0 or ENOMEM. */
int itemkey_seq_of(buf *k, uint32_t a, uint32_t b, uint64_t seq);
/* The sequence number of an outbox or stream key, 0 when too short. */
uint64_t itemkey_seq(const uint8_t *k, size_t len);

/* The kinds of repl keys (docs/replication.md). */
enum itemkey_repl_kind {
    REPL_SOURCE = 1,        /* (table, part): next_seq u64be | next_stream_seq u64be */
    REPL_ACK = 2,           /* (table, part, dest node): acked seq u64be */
    REPL_APPLIED = 3,       /* (table, source part): applied seq u64be */
    REPL_STREAM_LAST = 4,   /* (table, shard): last stream seq stored u64be */
    REPL_LOG_POS = 5,       /* (table, part): epoch u64be | seq u64be of the last replog record */
    REPL_MISSING = 6,       /* (table, source part): the last seq this copy will never have u64be */
    REPL_STREAM_FILLED = 7, /* (table, shard): the REPL_MISSING its stream copy was filled for */
    REPL_GSI_FILLED = 8 /* (table, source part): the REPL_MISSING its GSI copies were filled for */
};
#define ITEMKEY_REPL_MAX 13
/* Writes table u32be | kind u8 | part u32be [| node u32be when with_node]
 * into out and returns its length. */
size_t itemkey_repl(uint8_t out[ITEMKEY_REPL_MAX], uint32_t table_id, uint8_t kind, uint32_t part,
                    int with_node, uint32_t node);

/* memcmp order of byte strings, a proper prefix first: RocksDB's order. */
int itemkey_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);

#endif
