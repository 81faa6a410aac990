/*
 * metrics.h: a small registry of counters, gauges and histograms, rendered in
 * the Prometheus text exposition format (version 0.0.4) for /metrics.
 *
 * A series is a metric name plus a label set given as Prometheus label text,
 * e.g. "table=\"SessionData\"" (NULL or "" for none); callers build it with
 * metrics_labels(), which escapes values. The first use of a name fixes its
 * type and help text; later uses with another type are ignored (and counted
 * in lapse_metrics_misuse_total), never a crash.
 *
 * Thread-safety: every function may be called from any thread (one mutex).
 *
 * Invariants:
 *  1. Counters never decrease; histograms are cumulative with a +Inf bucket,
 *     _sum and _count, as Prometheus requires.
 *  2. Rendering groups every series of a name under one # HELP / # TYPE.
 */
#ifndef LAPSE_METRICS_H
#define LAPSE_METRICS_H

#include <stddef.h>

#include "buf.h"

typedef struct metrics metrics;

/* Called at the start of every metrics_render, to refresh gauges computed on
 * demand (backlog, ages). It may call metrics_gauge_set. */
typedef void (*metrics_collector)(void *arg, metrics *m);

metrics *metrics_new(void); /* NULL on OOM */
void metrics_free(metrics *m); /* accepts NULL */

/* Counters and histograms live in memory: a process restart starts them
 * at 0 again (Prometheus' rate() and increase() treat the drop as a reset).
 * Their help texts end with this, so a reader of /metrics knows. */
#define METRICS_SINCE_START " (since this process started; restarts at 0 with it)"

void metrics_counter_add(metrics *m, const char *name, const char *help, const char *labels,
                         double v);
void metrics_gauge_set(metrics *m, const char *name, const char *help, const char *labels,
                       double v);
/* bounds: ascending upper bounds, fixed by the first observation of name. */
void metrics_histogram_observe(metrics *m, const char *name, const char *help,
                               const double *bounds, size_t nbounds, const char *labels,
                               double v);
/* Registers the one collector (replacing any). */
void metrics_set_collector(metrics *m, metrics_collector fn, void *arg);

/* Appends the exposition text to out. Returns 0 or LAPSE_ENOMEM. */
int metrics_render(metrics *m, buf *out);

/* Formats k1="v1",k2="v2" (values escaped) into out. Pairs are given as
 * name, value, ..., NULL. Returns out. */
char *metrics_labels(char *out, size_t outlen, ...) __attribute__((sentinel));

#endif
