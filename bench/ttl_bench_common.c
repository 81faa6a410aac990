/* ttl_bench_common.c: the lag report. Contract in ttl_bench_common.h. */
#include "ttl_bench_common.h"

#include <stdio.h>
#include <stdlib.h>

/* Sorts lag in place: the percentiles are read from the sorted array. */
void print_lags(const char *who, const char *what, int64_t *lag, size_t n, size_t expected)
{
    if (n == 0) {
        printf("%-6s %-8s no item deleted (of %zu)\n", who, what, expected);
        return;
    }
    qsort(lag, n, sizeof(*lag), cmp_i64);
    printf("%-6s %-8s lag p50=%lldms p99=%lldms max=%lldms  (%zu of %zu observed deleted)\n", who,
           what, (long long)lag[(n - 1) / 2], (long long)lag[(size_t)((double)(n - 1) * 0.99)],
           (long long)lag[n - 1], n, expected);
}
