/*
 * chaos_test: the short chaos profile under ctest (label chaos): one seeded
 * run of every loopback fault scenario on a real three-node cluster, which
 * must keep every invariant it checks (the partition fault, which needs
 * root and network namespaces, has chaos_partition_test). $LAPSE_CHAOS_SEED replays a seed.
 * chaos_etcd_test: the same on a cluster on etcd (3 members, 2 coordinators)
 * with its faults: the leading coordinator killed or stopped past its lease,
 * an etcd member killed, each during a create-table or TTL enable.
 * chaos_rf3_test: the loopback faults again, every table of three copies
 * on a cluster on etcd: a killed or stopped node is failed over.
 */
#include <stdio.h>
#include <stdlib.h>

#include "chaos.h"

/* The loopback faults; the partition fault has chaos_partition_test. Built
 * again as chaos_etcd_test with the faults of a cluster on etcd. */
#ifndef CHAOS_TEST_NAME
#define CHAOS_TEST_NAME "chaos_test"
#define CHAOS_TEST_FAULTS "node-kill,dest-kill,backfill-kill,coordinator-kill,stop-cont"
#endif

int main(void)
{
    char *argv[] = {CHAOS_TEST_NAME,
                    "--profile",
                    "short",
                    "--duration",
                    "20",
                    "--faults",
                    CHAOS_TEST_FAULTS,
                    "--report",
                    CHAOS_TEST_NAME "-report.txt",
                    NULL,
                    NULL,
                    NULL,
                    NULL,
                    NULL,
                    NULL,
                    NULL};
    int argc = 9;
#ifdef CHAOS_TEST_REPLICATION
    argv[argc++] = "--replication";
    argv[argc++] = CHAOS_TEST_REPLICATION;
#endif
#ifdef CHAOS_TEST_BALANCE_PRIMARIES
    argv[argc++] = "--balance-primaries";
    argv[argc++] = CHAOS_TEST_BALANCE_PRIMARIES;
#endif
    const char *seed = getenv("LAPSE_CHAOS_SEED");
#ifdef CHAOS_TEST_SEED
    if (seed == NULL || *seed == '\0') {
        seed = CHAOS_TEST_SEED; /* the schedule this test was made for */
    }
#endif
    if (seed != NULL && *seed != '\0') {
        argv[argc++] = "--seed";
        argv[argc++] = (char *)seed;
    }
    chaos_opts o;
    if (chaos_parse(&o, argc, argv) != 0) {
        return 2;
    }
    return chaos_main(&o, NULL);
}
