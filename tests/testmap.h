/*
 * testmap.h: the coordinator's partition map straight off the wire, for
 * black-box tests that check placement node by node (cluster_test,
 * replication_test). Header-only; the test links lapse_testkit (nodecall.h).
 */
#ifndef LAPSE_TESTMAP_H
#define LAPSE_TESTMAP_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "../placement/pmap.h"
#include "cluster.h"
#include "nodecall.h"

/* The coordinator's current map (caller frees with pmap_free), or fails. */
static inline pmap *testmap_fetch(const cluster *c)
{
    char err[256];
    pmap *pm = NULL;
    if (nodecall_map(cluster_coordinator_url(c), &pm, err, sizeof(err)) != 0) {
        fail_msg("GetPartitionMap: %s", err);
    }
    return pm;
}

#endif
