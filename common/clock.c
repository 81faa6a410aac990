/* clock.c: monotonic and wall clocks (clock.h). */
#include "clock.h"

#include <errno.h>
#include <stdatomic.h>
#include <time.h>

static _Atomic int64_t wall_offset_ms;

static int64_t read_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

clock_mono clock_mono_now(void)
{
    return (clock_mono){read_ms(CLOCK_MONOTONIC)};
}

clock_wall clock_wall_now(void)
{
    return (clock_wall){read_ms(CLOCK_REALTIME) + atomic_load(&wall_offset_ms)};
}

void clock_wall_set_offset_ms(int64_t offset_ms)
{
    atomic_store(&wall_offset_ms, offset_ms);
}

int64_t clock_mono_remaining_ms(clock_mono deadline)
{
    int64_t left = deadline.ms - clock_mono_now().ms;
    return left > 0 ? left : 0;
}

clock_mono clock_mono_after_ms(int64_t ms)
{
    return (clock_mono){clock_mono_now().ms + ms};
}

void clock_sleep_ms(int64_t ms)
{
    if (ms <= 0) {
        return;
    }
    struct timespec req = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    struct timespec rem;
    while (nanosleep(&req, &rem) != 0 && errno == EINTR) {
        req = rem;
    }
}

void clock_cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

int64_t clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct timespec clock_mono_abstime(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (ms < 0) {
        ms = 0;
    }
    int64_t nsec = ts.tv_nsec + (ms % 1000) * 1000000;
    ts.tv_sec += (time_t)(ms / 1000 + nsec / 1000000000);
    ts.tv_nsec = (long)(nsec % 1000000000);
    return ts;
}
