/*
 * bench_util.c: helpers shared by the benchmark programs (bench_util.h).
 */
#include "bench_util.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

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

double cpu_self_s(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        return 0;
    }
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

double cpu_of_pid_s(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name (field 2) is in parentheses and may hold spaces:
     * count the fields after its closing one. utime and stime are 14, 15. */
    const char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) {
        return -1;
    }
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}
