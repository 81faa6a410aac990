/*
 * hash_test.c: the partition function. Keys spread evenly over partitions,
 * numerically equal N values land together, and pinned values prove the
 * function (xxh64 seed 0 over the keycodec encoding) never changes silently:
 * a change would strand every stored item on the wrong partition.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../common/lapse_err.h"
#include "hash.h"

static uint32_t part_of(attr_type t, const char *text, size_t len, uint32_t partitions)
{
    attr_value v;
    int rv = item_value_init_bytes(&v, t, text, len);
    if (rv != 0) {
        fail_msg("item_value_init_bytes(%s): %s", text, lapse_strerror(rv));
    }
    uint32_t p = UINT32_MAX;
    rv = hash_partition(&v, partitions, &p);
    item_value_fini(&v);
    if (rv != 0) {
        fail_msg("hash_partition(%s): %s", text, lapse_strerror(rv));
    }
    assert_true(p < partitions);
    return p;
}

static uint32_t part_s(const char *s, uint32_t partitions)
{
    return part_of(ATTR_S, s, strlen(s), partitions);
}

static uint32_t part_n(const char *s, uint32_t partitions)
{
    return part_of(ATTR_N, s, strlen(s), partitions);
}

static void check_spread(attr_type t, const char *fmt, int nkeys, uint32_t partitions)
{
    static uint32_t counts[4096];
    memset(counts, 0, sizeof(counts));
    for (int i = 0; i < nkeys; i++) {
        char k[64];
        snprintf(k, sizeof(k), fmt, i);
        counts[part_of(t, k, strlen(k), partitions)]++;
    }
    double mean = (double)nkeys / partitions;
    for (uint32_t p = 0; p < partitions; p++) {
        if (counts[p] < mean * 0.85 || counts[p] > mean * 1.15) {
            fail_msg("partition %u of %u holds %u keys, mean %.1f (format %s)", p, partitions,
                     counts[p], mean, fmt);
        }
    }
}

static void test_spread_over_partitions(void **state)
{
    (void)state;
    check_spread(ATTR_S, "key-%d", 100000, 64);
    check_spread(ATTR_S, "user%d", 100000, 64);
    check_spread(ATTR_N, "%d", 100000, 64);
    check_spread(ATTR_S, "k%d", 100000, 16);
}

static void test_pinned_values(void **state)
{
    (void)state;
    /* xxh64 itself, seed 0: the published reference values. */
    assert_int_equal(hash_partition_of_bytes("", 0, 4096), 0xE999u & 4095);
    assert_int_equal(hash_partition_of_bytes("abc", 3, 1024), 0x0999u & 1023);
    assert_int_equal(hash_partition_of_bytes("abc", 3, 1), 0);
    /* Over the keycodec encoding: these pin the key encoding too. */
    assert_int_equal(part_s("user1", 64), 0);
    assert_int_equal(part_s("user2", 64), 2);
    assert_int_equal(part_s("alice", 64), 48);
    assert_int_equal(part_s("alice", 4096), 2544);
    assert_int_equal(part_s("h\xc3\xa9llo", 64), 25);
    assert_int_equal(part_n("0", 64), 39);
    assert_int_equal(part_n("1", 4096), 1569);
    assert_int_equal(part_n("-1", 64), 13);
    assert_int_equal(part_n("1.5", 64), 34);
    assert_int_equal(part_n("1E+100", 4096), 3056);
    assert_int_equal(part_of(ATTR_B, "\x00\x01\x02", 3, 64), 47);
}

static void test_equal_numbers_share_a_partition(void **state)
{
    (void)state;
    assert_int_equal(part_n("100", 4096), part_n("1e2", 4096));
    assert_int_equal(part_n("100", 4096), part_n("100.000", 4096));
    assert_int_equal(part_n("-0.5", 4096), part_n("-5E-1", 4096));
    assert_int_equal(part_n("0", 4096), part_n("-0", 4096));
}

static void test_s_and_b_with_same_bytes(void **state)
{
    (void)state;
    /* The partition depends only on the encoded bytes: S and B encode alike. */
    assert_int_equal(part_of(ATTR_S, "abc", 3, 4096), part_of(ATTR_B, "abc", 3, 4096));
    /* The prefix of the hash is stable across partition counts. */
    uint32_t p4096 = part_s("some-key", 4096);
    assert_int_equal(part_s("some-key", 64), p4096 & 63);
    assert_int_equal(part_s("some-key", 1), 0);
}

static void test_bad_input(void **state)
{
    (void)state;
    attr_value v;
    uint32_t p = 7;
    assert_int_equal(item_value_init_bytes(&v, ATTR_S, "x", 1), 0);
    assert_int_equal(hash_partition(&v, 3, &p), LAPSE_EINVAL);
    assert_int_equal(hash_partition(&v, 0, &p), LAPSE_EINVAL);
    assert_int_equal(p, 7);
    item_value_fini(&v);
    item_value_init_bool(&v, 1);
    assert_int_equal(hash_partition(&v, 64, &p), LAPSE_EINVAL);
    item_value_init_null(&v);
    assert_int_equal(hash_partition(&v, 64, &p), LAPSE_EINVAL);
    assert_int_equal(p, 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spread_over_partitions),
        cmocka_unit_test(test_pinned_values),
        cmocka_unit_test(test_equal_numbers_share_a_partition),
        cmocka_unit_test(test_s_and_b_with_same_bytes),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
