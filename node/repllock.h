/*
 * repllock.h: the lock one source partition's batches are applied under on
 * this node (ns->repl_locks, striped): replicate.c holds it for each
 * apply, and newcopy.c writes a new copy's missing mark under it, so the
 * mark divides that source's batches exactly.
 *
 * Thread-safety: any thread; the locks live as long as ns.
 */
#ifndef LAPSE_NODE_REPLLOCK_H
#define LAPSE_NODE_REPLLOCK_H

#include <pthread.h>
#include <stdint.h>

#include "node.h"

/* The stripe of ns->repl_locks for source partition part of table_id. */
pthread_mutex_t *repllock_of(node_server *ns, uint32_t table_id, uint32_t part);

#endif
