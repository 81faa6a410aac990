/*
 * ttl_lapse.h: lapse-ttl-bench's Lapse-side tools, shared by its workloads
 * (ttl_bench.c, ttl_bench_load.c, ttl_bench_fair.c, ttl_bench_enable.c).
 * Items are {Id: PREFIX<12-digit index>, ExpirationTime, Pad}; every failure
 * is printed to stderr where it happens.
 *
 * Thread-safety: each function may run on any thread; the client must be
 * usable from several (liblapse's is).
 */
#ifndef LAPSE_BENCH_TTL_LAPSE_H
#define LAPSE_BENCH_TTL_LAPSE_H

#include <stddef.h>
#include <stdint.h>

#include "../client/lapse.h"
#include "../tests/cluster.h"

enum { TTL_LAPSE_STREAM_SHARDS = 16 }; /* a stream table's partitions: one reader each */

/* A new item prefix<i> due at ttl_s (epoch seconds); caller frees it. */
lapse_item *ttl_lapse_item(const char *prefix, long long i, int64_t ttl_s);

/* Loads items prefix<0..n) (item i due at ttl_of(arg, i)) with 4 threads,
 * printing progress as "loading WHAT". Returns 0 or -1. */
int ttl_lapse_load(lapse_client *c, const char *table, const char *prefix, long long n,
                   int64_t (*ttl_of)(void *, long long), void *arg, const char *what);

/* ttl_of for ttl_lapse_load: 30 days ahead (arg unused). */
int64_t ttl_lapse_far_future(void *arg, long long i);
/* ttl_of for ttl_lapse_load: due_s_of(arg, i), arg a due_plan. */
int64_t ttl_lapse_planned(void *arg, long long i);

/* Creates table name keyed by Id (S) with TTL on ExpirationTime and rf
 * copies of each partition: with stream, TTL_LAPSE_STREAM_SHARDS partitions
 * and the change stream, else 64 partitions. Returns 0 or -1. */
int ttl_lapse_create_table(lapse_client *c, const char *name, int stream, int rf);
/* ttl_lapse_create_table without a stream. */
int ttl_lapse_create_ttl_table(lapse_client *c, const char *name, int rf);

/* lapse_ttl_deleted_items_total of table, summed over the nodes. */
double ttl_lapse_deleted_total(cluster *cl, const char *table);

/* Waits (scraping every poll_ms, until give_up_ms on the wall clock) until
 * the table's deleted counter has grown by total since before, confirms with
 * a read of a sample of prefix<0..total), and prints one line starting with
 * line_head. ref_what names the instant ref_ms (wall clock). Returns the ms
 * from ref_ms until the counter reached total, or -1 when the wait ended
 * first. */
int64_t ttl_lapse_wait_all_deleted(cluster *cl, lapse_client *c, const char *table,
                                   const char *prefix, double before, long long total,
                                   int64_t ref_ms, const char *ref_what, int64_t give_up_ms,
                                   int poll_ms, const char *line_head);

/* Polls prefix<idx[i]> (due at due_ms[i]) until each is gone or give_up_ms;
 * lag[k] = first seen gone - due. Returns how many were seen gone. */
size_t ttl_lapse_sample_lags(lapse_client *c, const char *table, const char *prefix,
                             const long long *idx, const int64_t *due_ms, size_t n, int64_t *lag,
                             int64_t give_up_ms);

#endif
