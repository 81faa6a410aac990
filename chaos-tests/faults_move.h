/*
 * faults_move.h: the move fault of a chaos run (docs/chaos.md), run by
 * faults_run: copies moving between nodes while processes die.
 *
 * Thread-safety: main thread only.
 */
#ifndef LAPSE_CHAOS_FAULTS_MOVE_H
#define LAPSE_CHAOS_FAULTS_MOVE_H

#include <stdint.h>

#include "run.h"

/* The nodes a run with the move fault starts (a drained node leaves
 * three for tables of three copies). */
#define FAULTS_MOVE_NODES 4

/* move: a random node is drained (NodeDrain) and, at a step of its moves
 * drawn at random (a copy being added or caught up, a primaryship handed
 * over or a leaving copy removed, a GSI or stream copy being filled), kill
 * -9 of the drained node (every move's source), of the node a move adds a
 * copy on (its target) or of the leading coordinator, restarted 0.2-2 s
 * later. Then, half the time, the drain is left to go on while the next
 * scenarios run (a drain during a mass expiry or a backfill), and ended by
 * the next move scenario or faults_move_end; else it is waited for (up to
 * 60 s) now. Once ended it is stopped, and the rebalancer moves copies back
 * onto the node while the run goes on. */
void faults_move(run *r, uint64_t *rng);

/* Waits for the drain a move scenario left running (r->move_node) to end
 * and stops it; nothing when none is. faults_run calls it when the
 * scenarios are over. */
void faults_move_end(run *r);

#endif
