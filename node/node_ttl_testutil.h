/*
 * node_ttl_testutil.h: the helpers of node_ttl_test.c (node_ttl_testutil.c): the TTL
 * nodes it starts, the coordinator's TTL calls, item helpers and /metrics
 * scraping. Builds on node_testutil.h (the cluster state nt).
 *
 * Not thread-safe: one test thread drives everything.
 */
#ifndef LAPSE_NODE_TTL_TESTUTIL_H
#define LAPSE_NODE_TTL_TESTUTIL_H

#include "node_testutil.h"

#define ATTR "exp"
#define BF_TABLE "node_ttl.backfill"
#define BF_PARTS 16
#define BF_ITEMS 100000
#define BF_RATE "20000" /* node 0's --ttl-backfill-rate: the kill lands mid-way */
#define PV_TABLE "node_ttl.preview"
#define SKEW_MS "5000"

extern int metrics_port[NODES]; /* node i's --metrics-listen port */
extern int skewed[NODES];       /* node i runs with --debug-clock-offset-ms */

/* Skips the test when the cluster did not start. */
void need_cluster(void);
/* Starts node i with the TTL flags (backfill rate on node 0, clock offset
 * when skewed[i]). */
void start_ttl_node(int i);
int64_t now_ms(void);
/* UpdateTimeToLive; *status gets the description's status ("" if none). */
int update_ttl(const char *table, Lapse__UpdateTimeToLiveRequest__Action action, char *status,
               size_t len, char *err);
/* DescribeTimeToLive; caller frees *resp. */
Lapse__TtlDescription *describe_ttl(const char *table, Lapse__Response **resp);
/* Waits until table's TTL status is want, failing after timeout_ms. */
void wait_status(const char *table, const char *want, int timeout_ms);
void create_table(const char *name, uint32_t parts);
const pmap_table *table_of(const char *name);
/* The index in nt.node of the node owning pk's partition of table. */
int owner_in(const char *table, const char *pk);
Lapse__Item *ttl_item(arena *a, const char *pk, const char *exp, const char *exp_s);
/* Puts pk into TABLE with ATTR = exp_s. */
void put_exp(const char *pk, int64_t exp_s);
/* 1 when a GetItem of pk (with hide_expired = hide) returns it. */
int present(const char *pk, int hide);
/* Counts pk in hide_expired Query, Scan and BatchGet results. */
void hidden_reads(const char *pk, int *q, int *s, int *b);
/* GETs node i's /metrics into out (headers included). 0 or -1. */
int scrape(int i, char *out, size_t cap);
/* The value of the first sample of series on node i, or -1. */
double metric(int i, const char *series);

#endif
