/*
 * clock.h: the two clocks, as two types that cannot be mixed up.
 *
 *   clock_mono  monotonic milliseconds: timeouts, deadlines, scheduling.
 *   clock_wall  Unix epoch milliseconds: TTL values, heartbeat clock reports.
 *
 * The wall clock is replaceable (tests, clock-skew fault injection) through
 * clock_wall_set_offset_ms(). Thread-safe.
 *
 * Invariants:
 *  1. clock_mono_now() never goes backwards.
 *  2. A request or scanner pass reads the wall clock once and uses that
 *     snapshot throughout.
 */
#ifndef LAPSE_CLOCK_H
#define LAPSE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

typedef struct clock_mono {
    int64_t ms;
} clock_mono;

typedef struct clock_wall {
    int64_t ms;
} clock_wall;

clock_mono clock_mono_now(void);
/* Real time plus the offset set with clock_wall_set_offset_ms. */
clock_wall clock_wall_now(void);
/* Shifts clock_wall_now() by offset_ms from now on (0 restores real time). */
void clock_wall_set_offset_ms(int64_t offset_ms);

/* Monotonic microseconds, for timing short spans (metrics); never mixed
 * with clock_mono's milliseconds. */
int64_t clock_mono_us(void);
/* Milliseconds from now until deadline; 0 when it has passed. */
int64_t clock_mono_remaining_ms(clock_mono deadline);
clock_mono clock_mono_after_ms(int64_t ms);
/* Sleeps ms milliseconds (restarting on EINTR). */
void clock_sleep_ms(int64_t ms);

/* Timed waits on the monotonic clock: a condition made by
 * clock_cond_init_mono times out at clock_mono_abstime(ms), the absolute
 * CLOCK_MONOTONIC instant ms (< 0 counts as 0) from now, so a change of the
 * wall clock never stretches or cuts a wait. */
void clock_cond_init_mono(pthread_cond_t *c);
struct timespec clock_mono_abstime(int64_t ms);

#endif
