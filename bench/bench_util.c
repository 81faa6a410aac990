/*
 * bench_util.c: helpers shared by the benchmark programs (bench_util.h).
 */
#include "bench_util.h"

#include <string.h>
#include <time.h>

#include "../common/clock.h"

int64_t wall_ms(void)
{
    return clock_wall_now().ms;
}

void sleep_ms(int64_t ms)
{
    clock_sleep_ms(ms);
}

double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t due_s_of(const due_plan *p, long long i)
{
    return (p->t0_ms + (int64_t)((double)i / p->per_ms)) / 1000;
}

int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

uint64_t bench_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int has_workload(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p != NULL; p = strchr(p, ',')) {
        p += *p == ',';
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0')) {
            return 1;
        }
    }
    return 0;
}
