/*
 * hash.c: partition = xxh64(keycodec encoding of the partition key, seed 0)
 * & (partitions - 1). The client routes with the same function, so changing
 * it would move every stored item: hash_test pins known values.
 */
#include "hash.h"

#include <assert.h>

#include <xxhash.h>

#include "../common/buf.h"
#include "../common/keycodec.h"
#include "../common/lapse_err.h"

uint32_t hash_partition_of_bytes(const void *enc, size_t len, uint32_t partitions)
{
    assert(partitions > 0 && (partitions & (partitions - 1)) == 0);
    if (partitions == 0) {
        return 0;
    }
    uint64_t h = XXH64(enc, len, 0);
    return (uint32_t)(h & (uint64_t)(partitions - 1));
}

int hash_partition(const attr_value *pk, uint32_t partitions, uint32_t *out)
{
    if (partitions == 0 || (partitions & (partitions - 1)) != 0) {
        return LAPSE_EINVAL;
    }
    buf b;
    buf_init(&b);
    int rv = keycodec_append(&b, pk);
    if (rv == 0) {
        *out = hash_partition_of_bytes(b.data, b.len, partitions);
    }
    buf_fini(&b);
    return rv;
}

uint64_t hash_bytes64(const void *p, size_t len, uint64_t seed)
{
    return XXH64(p, len, seed);
}
