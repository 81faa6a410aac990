/*
 * testmap.h: the coordinator's partition map straight off the wire, for
 * black-box tests that check placement node by node (cluster_test,
 * replication_test). Header-only; the test links lapse_rpc.
 */
#ifndef LAPSE_TESTMAP_H
#define LAPSE_TESTMAP_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "../placement/pmap.h"
#include "../rpc/rpc.h"
#include "../rpc/wire.h"
#include "cluster.h"

/* The coordinator's current map (caller frees with pmap_free), or fails. */
static inline pmap *testmap_fetch(const cluster *c)
{
    rpc_client *rc = NULL;
    char err[256];
    assert_int_equal(rpc_client_open(&rc, cluster_coordinator_url(c), err, sizeof(err)), 0);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__GetPartitionMapRequest body = LAPSE__GET_PARTITION_MAP_REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_GET_PARTITION_MAP;
    req.get_partition_map = &body;
    Lapse__Response *resp = NULL;
    int rv = rpc_call(rc, &req, 3000, &resp, err, sizeof(err));
    if (rv != 0) {
        fail_msg("GetPartitionMap: %s", err);
    }
    pmap *pm = NULL;
    assert_int_equal(wire_pmap_from_pb(resp->get_partition_map->map, &pm, err, sizeof(err)), 0);
    rpc_response_free(resp);
    rpc_client_close(rc);
    return pm;
}

#endif
