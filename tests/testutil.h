/*
 * testutil.h: helpers shared by the black-box tests (cmocka): assertions that
 * print the error message, and a started-cluster fixture.
 */
#ifndef LAPSE_TESTUTIL_H
#define LAPSE_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../client/lapse.h"
#include "cluster.h"

/* Asserts a liblapse call returned 0, printing its error otherwise. */
#define assert_lapse_ok(call, errp)                                                                \
    do {                                                                                           \
        int rv_ = (call);                                                                          \
        if (rv_ != 0) {                                                                            \
            fail_msg("%s returned %d (%s): %s", #call, rv_, lapse_strerror(rv_), (errp)->message); \
        }                                                                                          \
    } while (0)

/* Asserts a call returned exactly code. */
#define assert_lapse_code(call, code, errp)                                                        \
    do {                                                                                           \
        int rv_ = (call);                                                                          \
        if (rv_ != (code)) {                                                                       \
            fail_msg("%s returned %d (%s), expected %d (%s): %s", #call, rv_, lapse_strerror(rv_), \
                     (code), lapse_strerror(code), (errp)->message);                               \
        }                                                                                          \
    } while (0)

/* Parses JSON into a new item or fails the test. */
static inline lapse_item *item_json(const char *fmt, ...)
{
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    lapse_item *it = NULL;
    lapse_error e = {0};
    if (lapse_item_from_json(&it, text, &e) != 0) {
        fail_msg("bad test JSON %s: %s", text, e.message);
    }
    return it;
}

/* Creates table name on c (sk NULL: no sort key) or fails the test. */
static inline void create_keyed_table(lapse_client *c, const char *name, const char *pk, char pkt,
                                      const char *sk, char skt, unsigned parts)
{
    lapse_table_def d = {.name = name,
                         .partition_key = pk,
                         .partition_key_type = pkt,
                         .sort_key = sk,
                         .sort_key_type = skt,
                         .partitions = parts};
    lapse_error e = {0};
    assert_lapse_ok(lapse_create_table(c, &d, &e), &e);
}

/* Starts a quiet n-node cluster or fails the test, with the logs' location. */
static inline cluster *start_cluster(int nodes, const char *node_args)
{
    cluster_options o = {0};
    o.nodes = nodes;
    o.node_args = node_args;
    o.quiet = 1;
    cluster *c = NULL;
    char err[512];
    if (cluster_start(&c, &o, err, sizeof(err)) != 0) {
        fail_msg("cluster_start: %s", err);
    }
    return c;
}

static inline lapse_client *connect_client(cluster *c)
{
    lapse_client *cl = NULL;
    lapse_error e = {0};
    assert_lapse_ok(lapse_connect(&cl, cluster_coordinator_url(c), &e), &e);
    return cl;
}

/* A test group's teardown: closes the client and stops the cluster, keeping
 * its run directory (the logs) and returning -1 when a process exited by
 * itself (a daemon crash fails the group). */
static inline int stop_cluster(cluster *c, lapse_client *cl)
{
    lapse_close(cl);
    int st = 0;
    int crashed = cluster_crashed(c, &st);
    cluster_free(c, crashed < 0);
    if (crashed >= 0) {
        fprintf(stderr, "process %d exited by itself (status %d)\n", crashed, st);
        return -1;
    }
    return 0;
}

/* The group fixture of a file whose tests share one three-node cluster and
 * one client: a file that defines TESTUTIL_THREE_NODE_GROUP before including
 * this header gets g_cluster, g_client and group_setup and group_teardown
 * to pass to cmocka_run_group_tests, or to call from its own (teardown as
 * stop_cluster: a daemon crash fails the group). */
#ifdef TESTUTIL_THREE_NODE_GROUP
static cluster *g_cluster;
static lapse_client *g_client;

static inline int group_setup(void **state)
{
    (void)state;
    g_cluster = start_cluster(3, NULL);
    g_client = connect_client(g_cluster);
    return 0;
}

static inline int group_teardown(void **state)
{
    (void)state;
    return stop_cluster(g_cluster, g_client);
}
#endif

#endif
