/*
 * scrape.h: reading a node's /metrics from tests and benchmarks, with a plain
 * TCP socket (tests and benchmarks never include NNG).
 *
 * Thread-safety: pure functions and blocking I/O; any thread.
 */
#ifndef LAPSE_TEST_SCRAPE_H
#define LAPSE_TEST_SCRAPE_H

#include <stddef.h>

/* GETs http://addr/metrics (addr "127.0.0.1:PORT"), waiting at most
 * timeout_ms. Returns the body (caller frees) or NULL on any failure or a
 * status other than 200. */
char *scrape_get(const char *addr, int timeout_ms);

/* Sums the values of every series of metric name in text whose label set
 * contains every `k="v"` pair of labels ("" or NULL: all series). For a
 * histogram pass e.g. "lapse_ttl_deletion_lag_seconds_count". Returns 0 when
 * there is none. */
double scrape_sum(const char *text, const char *name, const char *labels);

#endif
