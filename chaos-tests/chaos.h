/*
 * chaos.h: the chaos harness of issue 5 as a library, so the `lapse-chaos`
 * program and the ctest wrappers share one implementation.
 *
 * A run starts a coordinator and three nodes, four with the move fault
 * (tests/cluster.h; in namespaces too, netns.h), drives a seeded workload
 * through liblapse from several threads while the main thread injects
 * faults, lets the cluster settle, then checks the invariants of
 * docs/chaos.md against a model of every acknowledged write and delete.
 *
 * Thread-safety: chaos_run is not re-entrant (one run at a time per process).
 *
 * Invariants:
 *  1. A run never reports an invariant as passed that it did not check, and
 *     never passes without the minimum activity of check_activity (check.h):
 *     acknowledged writes, TTL deletions, a fault of every kind asked for,
 *     keys in every class an invariant judges.
 *  2. Every process a run starts is stopped before chaos_run returns.
 *  3. The same seed, options and binaries give the same workload choices and
 *     fault schedule; thread interleavings and timing may still differ.
 */
#ifndef LAPSE_CHAOS_H
#define LAPSE_CHAOS_H

#include <stdint.h>
#include <stdio.h>

#include "chaos_opts.h"

/* Parses the command line into *o (defaults from --profile). Returns 0, or
 * 2 after printing usage to stderr (bad usage) or 1 for --help. */
int chaos_parse(chaos_opts *o, int argc, char **argv);

/* Runs o->runs seeded runs, printing the seed first, progress on stderr
 * and a summary on stdout; writes the report when o->report_path is set.
 * With CHAOS_FAULT_PARTITION the runs happen in network namespaces
 * (netns.h), set up here before any thread starts; where that is not
 * possible the fault is dropped with a line saying why, and
 * res->partition_skipped is set.
 * *res (may be NULL) receives the sums. Returns 0 when every checked
 * invariant held in every run and every run had the minimum activity, 1
 * otherwise (or when setup failed). */
int chaos_main(const chaos_opts *opts, chaos_result *res);

#endif
