/*
 * chaos_plant_test: the chaos checker catches violations. Three short runs
 * with --debug-plant-violation break invariants behind the model's back
 * (chaos-tests/plant.h):
 *   delete  deletes an acknowledged, never-expiring item: invariant 1;
 *   expire  sets a past TTL on an item whose TTL was extended while due, so
 *           the scanner deletes it: invariant 3;
 *   index   once the stream and indexes matched the table, a rogue node's
 *           Replicate batches plant a GSI orphan (invariant 5), make a
 *           shard host skip an acknowledged put's record, and add a second
 *           TTL REMOVE of a TTL-deleted item (invariant 4, twice).
 * Each run must fail, name every planted item, and break exactly the
 * expected invariants the expected number of times, and nothing else.
 */
#include <stdio.h>
#include <string.h>

#include "chaos.h"

static int planted_run(const char *mode, const int want[CHAOS_INVARIANTS + 1])
{
    char plant[64];
    snprintf(plant, sizeof(plant), "--debug-plant-violation=%s", mode);
    char *argv[] = {"chaos_plant_test", "--profile", "short", "--duration", "8", "--faults",
                    "stop-cont",        "--items",   "300",   plant,        NULL};
    chaos_opts o;
    if (chaos_parse(&o, 10, argv) != 0) {
        return 1;
    }
    chaos_result res;
    int rv = chaos_main(&o, &res);
    if (res.setup_failed) {
        fprintf(stderr, "chaos_plant_test %s: the run could not be set up\n", mode);
        return 1;
    }
    if (res.planted_key[0] == '\0') {
        fprintf(stderr, "chaos_plant_test %s: no violation was planted\n", mode);
        return 1;
    }
    if (rv == 0) {
        fprintf(stderr, "chaos_plant_test %s: the run passed despite %s\n", mode, res.planted_key);
        return 1;
    }
    if (!res.planted_reported) {
        fprintf(stderr, "chaos_plant_test %s: not every one of %s was named\n", mode,
                res.planted_key);
        return 1;
    }
    for (int i = 1; i <= CHAOS_INVARIANTS; i++) {
        if (res.violations[i] != want[i]) {
            fprintf(stderr, "chaos_plant_test %s: invariant %d broken %d times, want %d\n", mode, i,
                    res.violations[i], want[i]);
            return 1;
        }
    }
    printf("chaos_plant_test %s: the checker named every planted item (%s)\n", mode,
           res.planted_key);
    return 0;
}

int main(void)
{
    static const int del[CHAOS_INVARIANTS + 1] = {[1] = 1};
    static const int expire[CHAOS_INVARIANTS + 1] = {[3] = 1};
    static const int idx[CHAOS_INVARIANTS + 1] = {[4] = 2, [5] = 1};
    int failed = planted_run("delete", del);
    failed |= planted_run("expire", expire);
    failed |= planted_run("index", idx);
    return failed;
}
