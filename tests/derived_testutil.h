/*
 * derived_testutil.h: what the tests of GSI partition and stream shard
 * copies share (replica_index_test, derived_move_test), on the cluster of
 * replset_testutil.h: a table whose items {"Id":"k<i>","Grp":"g<i % groups>"}
 * feed one GSI on Grp and a stream, and checks that every copy, asked
 * directly, and liblapse's reads hold them all.
 *
 * Thread-safety: for the test's thread.
 */
#ifndef LAPSE_TEST_DERIVED_TESTUTIL_H
#define LAPSE_TEST_DERIVED_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* The table checked: its name, its GSI's name and partitions, the groups
 * its items are put in. */
typedef struct dt_table {
    const char *name, *gsi;
    uint32_t gsi_parts;
    int groups;
} dt_table;

/* Creates the table: three copies of partitions partitions, its GSI on Grp,
 * a stream; or fails the test. */
void dt_create(const dt_table *t, uint32_t partitions);

/* Puts items k<from>..k<to - 1> (retrying each for up to 15 s). */
void dt_put_range(const dt_table *t, int from, int to);

/* The GSI partition of group g's value. */
uint32_t dt_group_part(const dt_table *t, int g);

/* Whether every copy of every GSI partition holds per_group items of each
 * group and the same entries (digests), and every copy of each stream
 * shard the same records, records in all; each copy asked on its node. Each
 * list must have copies copies. Says the first difference in why. */
int dt_copies_hold(const dt_table *t, uint32_t copies, size_t per_group, size_t records, char *why,
                   size_t len);
/* dt_copies_hold, retried for up to timeout_ms; fails the test after. */
void dt_wait_copies_hold(const dt_table *t, uint32_t copies, size_t per_group, size_t records,
                         long timeout_ms);

/* Through liblapse: the GSI holds per_group items of each group, and the
 * whole stream records records, gapless. */
int dt_client_sees(const dt_table *t, size_t per_group, size_t records, char *why, size_t len);

#endif
