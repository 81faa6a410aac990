// common helpers for the NNG reqrep vs stream spike
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <stdbool.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/resource.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/protocol/reqrep0/rep.h>

#define REQ_PAYLOAD 120
#define REP_PAYLOAD 100
#define HDR 12 /* u32 len (= 8 + payload) + u64 id */

typedef struct { double cpu_us; long vcsw, ivcsw; } usage_t;

static inline usage_t get_usage(void) {
    struct rusage ru; getrusage(RUSAGE_SELF, &ru);
    usage_t u;
    u.cpu_us = ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
    u.vcsw = ru.ru_nvcsw; u.ivcsw = ru.ru_nivcsw;
    return u;
}
static inline uint64_t now_ns(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}
static inline void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
#define DIE(what, rv) do { fprintf(stderr, "%s: %s\n", what, nng_strerror(rv)); exit(1); } while (0)
