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
 * later. Once the drain ends (up to 60 s) it is stopped, and the
 * rebalancer moves copies back onto the node while the run goes on. */
void faults_move(run *r, uint64_t *rng);

#endif
