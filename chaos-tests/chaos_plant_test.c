/*
 * chaos_plant_test: the chaos checker catches violations of every invariant.
 * Seven short runs with --debug-plant-violation break invariants behind the
 * model's back (chaos-tests/plant.h):
 *   delete  deletes an acknowledged, never-expiring item: invariant 1;
 *   pause   pauses TTL on chaos_ttl 3 s before the workload ends, so items
 *           due then stay (an 8 s settle deadline): invariant 2, once per
 *           such item (at least once);
 *   expire  sets a past TTL on an item whose TTL was extended while due, so
 *           the scanner deletes it: invariant 3;
 *   index   once the stream and indexes matched the table, a rogue node's
 *           Replicate batches plant a GSI orphan (invariant 5), make a
 *           shard host skip an acknowledged put's record, and add a second
 *           TTL REMOVE of a TTL-deleted item (invariant 4, twice);
 *   daemon  kill -9 of a node behind the harness's back during the run, of
 *           another before its final SIGTERM, and a sanitizer report in the
 *           coordinator's log: invariant 6, three times;
 *   copies  (tables of three copies) a follower refuses its primaries'
 *           records and a write goes to a partition it follows: it leaves
 *           the in-sync set for good, and the copies end unequal:
 *           invariant 9, for that partition and any other written after;
 *   linear  a register key is put back to a value overwritten since (after
 *           the register workload, before its final reads): invariant 8.
 * Each run must fail, name every planted item, break exactly the expected
 * invariants the expected number of times (pause: at least once) and
 * nothing else, and still have had the minimum activity of a run (so it
 * failed for the plant, not for having proved nothing).
 *
 * Then two runs that keep every invariant must fail for lack of activity
 * (check_activity, docs/chaos.md), with no invariant broken:
 *   --debug-idle=writes  the workload only reads: no acknowledged write, no
 *                        TTL deletion, empty classes, an empty stream;
 *   --debug-idle=faults  stop-cont is asked for but never injected.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "chaos.h"

#define AT_LEAST_ONCE (-1)

/* Each run's verdict, printed again once all have run: the runs' reports
 * are long, and a log cut in the middle (CI shows a run's head and tail)
 * must still say which run failed and why. */
static char verdicts[16][256];
static int nverdicts;

/* Prints a verdict (to stderr when failed) and keeps it for the summary. */
static void verdict(int failed, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void verdict(int failed, const char *fmt, ...)
{
    char line[240];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(failed ? stderr : stdout, "chaos_plant_test %s\n", line);
    if (nverdicts < (int)(sizeof(verdicts) / sizeof(verdicts[0]))) {
        snprintf(verdicts[nverdicts++], sizeof(verdicts[0]), "%s %s", failed ? "FAIL" : "ok  ",
                 line);
    }
}

/* One short run (8 s, 300 items, --faults stop-cont) with --debug-FLAG=MODE:
 * *res gets its result. Returns chaos_main's status, or -1 when the run
 * could not be set up (printed). */
static int short_run(const char *flag, const char *mode, chaos_result *res)
{
    char arg[64];
    snprintf(arg, sizeof(arg), "--debug-%s=%s", flag, mode);
    char *argv[] = {
        "chaos_plant_test", "--profile", "short", "--duration", "8",  "--faults", "stop-cont",
        "--items",          "300",       arg,     NULL,         NULL, NULL};
    int argc = 10;
    if (strcmp(mode, "copies") == 0) { /* copies to compare */
        argv[argc++] = "--replication";
        argv[argc++] = "3";
    }
    chaos_opts o;
    if (chaos_parse(&o, argc, argv) != 0) {
        return -1;
    }
    int rv = chaos_main(&o, res);
    if (res->setup_failed) {
        verdict(1, "%s: the run could not be set up", arg);
        return -1;
    }
    return rv;
}

static int planted_run(const char *mode, const int want[CHAOS_INVARIANTS + 1])
{
    chaos_result res;
    int rv = short_run("plant-violation", mode, &res);
    if (rv < 0) {
        return 1;
    }
    if (res.planted_key[0] == '\0') {
        verdict(1, "%s: no violation was planted", mode);
        return 1;
    }
    if (rv == 0) {
        verdict(1, "%s: the run passed despite %s", mode, res.planted_key);
        return 1;
    }
    if (!res.planted_reported) {
        verdict(1, "%s: not every one of %s was named", mode, res.planted_key);
        return 1;
    }
    if (res.idle_runs > 0) {
        verdict(1, "%s: the run lacked the minimum activity", mode);
        return 1;
    }
    for (int i = 1; i <= CHAOS_INVARIANTS; i++) {
        int ok = want[i] == AT_LEAST_ONCE ? res.violations[i] >= 1 : res.violations[i] == want[i];
        if (!ok) {
            verdict(1, "%s: invariant %d broken %d times, want %s%d", mode, i, res.violations[i],
                    want[i] == AT_LEAST_ONCE ? ">= " : "", want[i] == AT_LEAST_ONCE ? 1 : want[i]);
            return 1;
        }
    }
    verdict(0, "%s: the checker named every planted item (%s)", mode, res.planted_key);
    return 0;
}

/* A run that keeps every invariant but did too little must fail for lack
 * of activity, with no invariant broken. */
static int idle_run(const char *what)
{
    chaos_result res;
    int rv = short_run("idle", what, &res);
    if (rv < 0) {
        return 1;
    }
    if (rv == 0 || res.idle_runs != 1) {
        verdict(1, "idle %s: exit %d, %d idle runs: want a failure for lack of activity", what, rv,
                res.idle_runs);
        return 1;
    }
    for (int i = 1; i <= CHAOS_INVARIANTS; i++) {
        if (res.violations[i] != 0) {
            verdict(1, "idle %s: invariant %d broken %d times: want none", what, i,
                    res.violations[i]);
            return 1;
        }
    }
    verdict(0, "idle %s: the run failed for lack of activity", what);
    return 0;
}

int main(void)
{
    static const int del[CHAOS_INVARIANTS + 1] = {[1] = 1};
    static const int pause[CHAOS_INVARIANTS + 1] = {[2] = AT_LEAST_ONCE};
    static const int expire[CHAOS_INVARIANTS + 1] = {[3] = 1};
    static const int idx[CHAOS_INVARIANTS + 1] = {[4] = 2, [5] = 1};
    static const int daemon[CHAOS_INVARIANTS + 1] = {[6] = 3};
    static const int copies[CHAOS_INVARIANTS + 1] = {[9] = AT_LEAST_ONCE};
    static const int linear[CHAOS_INVARIANTS + 1] = {[8] = 1};
    int failed = planted_run("delete", del);
    failed |= planted_run("pause", pause);
    failed |= planted_run("expire", expire);
    failed |= planted_run("index", idx);
    failed |= planted_run("daemon", daemon);
    failed |= planted_run("copies", copies);
    failed |= planted_run("linear", linear);
    failed |= idle_run("writes");
    failed |= idle_run("faults");
    fprintf(stderr, "chaos_plant_test: %s; the runs:\n", failed ? "FAILED" : "passed");
    for (int i = 0; i < nverdicts; i++) {
        fprintf(stderr, "  %s\n", verdicts[i]);
    }
    return failed;
}
