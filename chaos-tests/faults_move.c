/*
 * faults_move.c: the move fault (faults_move.h, docs/chaos.md): a drain
 * with a process killed at one of its steps.
 */
#include "faults_move.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "procs.h"

/* The steps a kill is aimed at: cluster-status's "Moves" "Step"s. */
enum { AT_COPY, AT_HANDOVER, AT_FILL, AT_COUNT };
static const char *const at_names[AT_COUNT] = {"a copy being added or caught up",
                                               "a primaryship handed over or a copy removed",
                                               "a GSI or stream copy being filled"};

static int step_is(const char *step, int at)
{
    switch (at) {
    case AT_COPY:
        return strcmp(step, "adding") == 0 || strcmp(step, "copying") == 0;
    case AT_HANDOVER:
        return strcmp(step, "handing-over") == 0 || strcmp(step, "removing") == 0;
    default:
        return strcmp(step, "filling") == 0;
    }
}

/* One look at cluster-status's moves: 1 when one is at step at (any step
 * when at < 0), *to getting its first "To" node (0: none). -1 when the
 * status cannot be read. */
static int look(run *r, int at, int *to)
{
    char *js = NULL;
    lapse_error e = {0};
    if (lapse_cluster_status(r->admin, &js, &e) != 0) {
        return -1;
    }
    json_t *doc = json_loads(js, 0, NULL), *mv;
    lapse_free(js);
    size_t i;
    int found = 0;
    *to = 0;
    json_array_foreach(json_object_get(doc, "Moves"), i, mv)
    {
        const char *step = json_string_value(json_object_get(mv, "Step"));
        if (step != NULL && (at < 0 || step_is(step, at))) {
            *to = (int)json_integer_value(json_array_get(json_object_get(mv, "To"), 0));
            found = 1;
            break;
        }
    }
    json_decref(doc);
    return found;
}

/* NodeDrain of node (stop: end it): the copies left on it, base and GSI or
 * stream, or -1 when the call fails (logged once per failure kind). */
static long drain(run *r, int node, int stop)
{
    char *js = NULL;
    lapse_error e = {0};
    int rv = lapse_node_drain(r->admin, (uint32_t)node, stop, &js, &e);
    if (rv != 0) {
        return -1;
    }
    json_t *doc = json_loads(js, 0, NULL);
    lapse_free(js);
    long left = (long)json_integer_value(json_object_get(doc, "BaseCopiesLeft")) +
                (long)json_integer_value(json_object_get(doc, "DerivedCopiesLeft"));
    json_decref(doc);
    return left;
}

/* NodeDrain retried for up to 10 s (a coordinator may be taking over).
 * Returns the copies left, or -1. */
static long drain_retrying(run *r, int node, int stop)
{
    int64_t t0 = clock_mono_now().ms;
    long left;
    while ((left = drain(r, node, stop)) < 0 && clock_mono_now().ms - t0 < 10000) {
        clock_sleep_ms(200);
    }
    return left;
}

/* Waits (up to 60 s) for node's drain to end, logs how long it took from
 * t0, and stops it. */
static void finish_drain(run *r, int node, int64_t t0)
{
    long left;
    while ((left = drain(r, node, 0)) != 0 && clock_mono_now().ms - t0 < 60000) {
        clock_sleep_ms(300);
    }
    flog_add(r, "move: node %d %s %" PRId64 " ms after the drain began", node,
             left == 0 ? "drained" : "not drained yet", clock_mono_now().ms - t0);
    if (drain_retrying(r, node, 1) < 0) {
        flog_add(r, "move: node %d: ending its drain failed for 10 s", node);
    }
}

void faults_move_end(run *r)
{
    if (r->move_node > 0) {
        finish_drain(r, r->move_node, r->move_since_ms);
        r->move_node = 0;
    }
}

void faults_move(run *r, uint64_t *rng)
{
    faults_move_end(r); /* a drain left running by the last move scenario */
    int node = (int)rng_range(rng, 1, cluster_nodes(r->cl));
    int at = (int)rng_range(rng, 0, AT_COUNT - 1);
    int kind = (int)rng_range(rng, 0, 2); /* the source, the target, the leader */
    run_phase(r, "move: draining node %d", node);
    long held = drain_retrying(r, node, 0);
    if (held < 0) {
        flog_add(r, "move: node %d: NodeDrain failed for 10 s; no move", node);
        return;
    }
    flog_add(r, "move: node %d draining, %ld copies on it; kill at %s", node, held, at_names[at]);
    /* Up to 8 s for a move at that step, then any move. */
    int64_t t0 = clock_mono_now().ms;
    int to = 0, seen = 0;
    while (seen <= 0 && clock_mono_now().ms - t0 < 8000) {
        if ((seen = look(r, at, &to)) <= 0) {
            clock_sleep_ms(rng_range(rng, 20, 120));
        }
    }
    if (seen <= 0 && look(r, -1, &to) <= 0) {
        flog_add(r, "move: no move of node %d seen at that step", node);
    }
    int victim = kind == 0 ? node : kind == 1 && to >= 1 ? to : procs_coord_victim(r);
    char why[96];
    snprintf(why, sizeof(why), "(move: the %s of a move off node %d)",
             kind == 0              ? "source"
             : kind == 1 && to >= 1 ? "target"
                                    : "leading coordinator",
             node);
    procs_kill9(r, victim, why);
    procs_restart_after(r, victim, rng_range(rng, 200, 2000));
    /* The drain goes on through the kill. Half the time it is left to
     * run while the next scenarios do (a mass expiry, a backfill, other
     * kills), and ended by the next move scenario or faults_move_end. */
    if (rng_range(rng, 0, 1) == 0) {
        flog_add(r, "move: node %d's drain goes on under the next scenarios", node);
        r->move_node = node;
        r->move_since_ms = t0;
        return;
    }
    finish_drain(r, node, t0);
}
