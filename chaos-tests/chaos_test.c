/*
 * chaos_test: the short chaos profile under ctest (label chaos): one seeded
 * run of every loopback fault scenario on a real three-node cluster, which
 * must keep every invariant it checks (the partition fault, which needs
 * root and network namespaces, has chaos_partition_test). $LAPSE_CHAOS_SEED replays a seed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "chaos.h"

int main(void)
{
    /* The loopback faults; the partition fault has chaos_partition_test. */
    char *argv[] = {"chaos_test",
                    "--profile",
                    "short",
                    "--duration",
                    "20",
                    "--faults",
                    "node-kill,dest-kill,backfill-kill,coordinator-kill,stop-cont",
                    "--report",
                    "chaos_test-report.txt",
                    NULL,
                    NULL,
                    NULL};
    int argc = 9;
    const char *seed = getenv("LAPSE_CHAOS_SEED");
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
