/*
 * chaos_partition_test: the partition fault under ctest (label chaos): one
 * short seeded run in which nodes are cut off from the coordinator and the
 * clients by taking their link down in their network namespace, and which
 * must keep every invariant it checks. Exits 77 (skipped) where the
 * namespace mode cannot run: not root, no `ip netns`. $LAPSE_CHAOS_SEED
 * replays a seed.
 * chaos_partition_etcd_test: the same on a cluster on etcd (an etcd member
 * in each node's namespace, so a partition cuts a host's node and member
 * together; two coordinators in the coordinator's namespace), with the etcd
 * faults too: the leading coordinator killed or stopped past its lease, an
 * etcd member killed; and every table of three copies, so a node cut off
 * loses its lease and its primaries fail over while it cannot hear of it;
 * and the one-way cut: a primary drops what it sends one follower, which
 * must leave the in-sync set while writes go on, and rejoin once healed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "chaos.h"

/* Built again as chaos_partition_etcd_test with the etcd faults added. */
#ifndef CHAOS_TEST_NAME
#define CHAOS_TEST_NAME "chaos_partition_test"
#define CHAOS_TEST_FAULTS "partition"
#define CHAOS_TEST_DURATION "14"
#endif

int main(void)
{
    char *argv[] = {CHAOS_TEST_NAME,
                    "--profile",
                    "short",
                    "--duration",
                    CHAOS_TEST_DURATION,
                    "--items",
                    "600",
                    "--faults",
                    CHAOS_TEST_FAULTS,
                    "--report",
                    CHAOS_TEST_NAME "-report.txt",
                    NULL,
                    NULL,
                    NULL,
                    NULL,
                    NULL};
    int argc = 11;
#ifdef CHAOS_TEST_REPLICATION
    argv[argc++] = "--replication";
    argv[argc++] = CHAOS_TEST_REPLICATION;
#endif
    const char *seed = getenv("LAPSE_CHAOS_SEED");
    if (seed != NULL && *seed != '\0') {
        argv[argc++] = "--seed";
        argv[argc++] = (char *)seed;
    }
    chaos_opts o;
    if (chaos_parse(&o, argc, argv) != 0) {
        return 2;
    }
    chaos_result res;
    int rv = chaos_main(&o, &res);
    if (res.partition_skipped) {
        printf(CHAOS_TEST_NAME ": SKIP: the partition fault cannot run here\n");
        return 77;
    }
    if (rv == 0 && res.faults == 0) {
        fprintf(stderr, CHAOS_TEST_NAME ": no fault was injected\n");
        return 1;
    }
    return rv;
}
