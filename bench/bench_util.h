/*
 * bench_util.h: what every benchmark program needs: clocks for its own
 * timing, sorting of latency samples, and the --workloads list.
 */
#ifndef LAPSE_BENCH_UTIL_H
#define LAPSE_BENCH_UTIL_H

#include <stdint.h>

/* Wall clock, epoch milliseconds (TTL values and deletion instants). */
int64_t wall_ms(void);
/* Sleeps ms milliseconds; nothing when ms <= 0. */
void sleep_ms(int64_t ms);
/* Monotonic clock in seconds, to the nanosecond (rates and call latencies). */
double mono_s(void);
/* Due instants are whole seconds: item i falls due in the second its slot
 * of the rate falls in, from t0_ms. */
typedef struct due_plan {
    int64_t t0_ms; /* the first item's due instant (a whole second) */
    double per_ms; /* items falling due per millisecond */
} due_plan;
/* The second item i of plan p falls due in. */
int64_t due_s_of(const due_plan *p, long long i);
/* qsort comparator of int64_t, ascending. */
int cmp_i64(const void *a, const void *b);
/* qsort comparator of uint32_t (latency samples in µs), ascending. */
int cmp_u32(const void *a, const void *b);
/* xorshift64: the next pseudo-random number of state *s (non-zero). */
uint64_t bench_rng(uint64_t *s);
/* CPU seconds (user + system) this process has used. */
double cpu_self_s(void);
/* CPU seconds (user + system) process pid has used, from /proc; -1 when it
 * cannot be read (no such process). */
double cpu_of_pid_s(int pid);
/* 1 when name is one of the comma-separated entries of list. */
int has_workload(const char *list, const char *name);

#endif
