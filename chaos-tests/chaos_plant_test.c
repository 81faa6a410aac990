/*
 * chaos_plant_test: the chaos checker catches violations. Two short runs
 * with --debug-plant-violation break an invariant behind the model's back:
 *   delete  deletes an acknowledged, never-expiring item: invariant 1;
 *   expire  sets a past TTL on an item whose TTL was extended while due, so
 *           the scanner deletes it: invariant 3.
 * Each run must fail, name the planted item, and break that invariant once
 * and nothing else.
 */
#include <stdio.h>
#include <string.h>

#include "chaos.h"

static int planted_run(const char *mode, int want_inv)
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
    if (!res.planted_reported || res.violations[want_inv] != 1) {
        fprintf(stderr, "chaos_plant_test %s: %s was %snamed; invariant %d broken %d times\n", mode,
                res.planted_key, res.planted_reported ? "" : "not ", want_inv,
                res.violations[want_inv]);
        return 1;
    }
    for (int i = 1; i <= CHAOS_INVARIANTS; i++) {
        if (i != want_inv && res.violations[i] != 0) {
            fprintf(stderr, "chaos_plant_test %s: invariant %d broke too (%d)\n", mode, i,
                    res.violations[i]);
            return 1;
        }
    }
    printf("chaos_plant_test %s: the checker named the planted %s under invariant %d\n", mode,
           res.planted_key, want_inv);
    return 0;
}

int main(void)
{
    int failed = planted_run("delete", 1);
    failed |= planted_run("expire", 3);
    return failed;
}
