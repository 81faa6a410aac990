/*
 * chaos_partition_test: the partition fault under ctest (label chaos): one
 * short seeded run in which nodes are cut off from the coordinator and the
 * clients by taking their link down in their network namespace, and which
 * must keep every invariant it checks. Exits 77 (skipped) where the
 * namespace mode cannot run: not root, no `ip netns`. $LAPSE_CHAOS_SEED
 * replays a seed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "chaos.h"

int main(void)
{
    char *argv[] = {"chaos_partition_test",
                    "--profile",
                    "short",
                    "--duration",
                    "14",
                    "--items",
                    "600",
                    "--faults",
                    "partition",
                    "--report",
                    "chaos_partition_test-report.txt",
                    NULL,
                    NULL,
                    NULL};
    int argc = 11;
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
        printf("chaos_partition_test: SKIP: the partition fault cannot run here\n");
        return 77;
    }
    if (rv == 0 && res.faults == 0) {
        fprintf(stderr, "chaos_partition_test: no partition was injected\n");
        return 1;
    }
    return rv;
}
