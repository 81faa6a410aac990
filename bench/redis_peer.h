/*
 * redis_peer.h: a Redis server of the benchmark's own, on a free loopback
 * port, for the benchmarks that compare with Redis (lapse-bench --vs-redis,
 * lapse-ttl-bench): starting it, its version, and redis-benchmark against
 * it. Needs redis-server and redis-benchmark (bench/install-redis.sh).
 */
#ifndef LAPSE_REDIS_PEER_H
#define LAPSE_REDIS_PEER_H

#include <sys/types.h>

/* Prints "# redis: " and what `redis-server --version` says (the version
 * every Redis figure of the run is from). */
void redis_print_version(void);

/* Starts redis-server on 127.0.0.1:port with args (NULL-terminated, after
 * --port and --bind), its stdout to /dev/null. Returns its pid, or -1. */
pid_t redis_spawn(int port, const char *const *args);

/* Waits until something accepts connections on 127.0.0.1:port, up to
 * timeout_ms. 0, or -1 when nothing did. */
int redis_wait(int port, int timeout_ms);

/* What redis-benchmark measured of one command. */
typedef struct redis_rate {
    double rps;
    double p50_ms, p99_ms;
} redis_rate;

/* Runs redis-benchmark against 127.0.0.1:port: -c clients, -d value_bytes,
 * -t set,get, -n requests of each, keys drawn from a space of keyspace.
 * Fills set and get; 0, or -1 when it could not run or printed no figure. */
int redis_bench(int port, int clients, int value_bytes, long requests, long keyspace,
                redis_rate *set, redis_rate *get);

#endif
