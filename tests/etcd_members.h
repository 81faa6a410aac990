/*
 * etcd_members.h: a real etcd cluster for tests: N members (Debian's etcd,
 * or $LAPSE_ETCD) on free loopback ports, each with its own data dir and log
 * under a fresh run directory, started with posix_spawn and tuned to elect a
 * leader quickly (--heartbeat-interval 50 --election-timeout 500, with
 * --pre-vote as deployed). Never the default 2379/2380 that Debian's package
 * may be running. $LAPSE_ETCD_HOSTS ("A,B,C", one IPv4 address per member)
 * puts member i on address i instead of 127.0.0.1: the chaos harness's
 * namespace mode, whose $LAPSE_ETCD wrapper starts each member in the
 * namespace holding its address.
 *
 * Members are addressed by index 0..N-1.
 * Thread-safety: none; drive it from one thread.
 *
 * Invariants:
 *  1. etcd_members_free stops every member it started and nothing else.
 *  2. A member keeps its ports and data dir across kills and restarts, so a
 *     restarted member rejoins the same cluster.
 */
#ifndef LAPSE_TEST_ETCD_MEMBERS_H
#define LAPSE_TEST_ETCD_MEMBERS_H

#include <stddef.h>
#include <sys/types.h>

#define ETCD_MEMBERS_MAX 5

typedef struct etcd_members etcd_members;

/* Starts n (1..ETCD_MEMBERS_MAX) members and waits (up to 15 s) until each
 * answers a linearizable read. A member that dies at start-up (a port taken
 * by a parallel test) restarts the whole cluster on fresh ports, at most
 * three times. On error *out is NULL, nothing is left running and err says
 * why. Returns 0, LAPSE_EUNAVAILABLE, LAPSE_EIO, or LAPSE_EINVAL when
 * $LAPSE_ETCD_HOSTS names fewer than n addresses. */
int etcd_members_start(etcd_members **out, int n, char *err, size_t errlen);
/* Stops every running member (SIGTERM, then SIGKILL after 5 s) and frees;
 * removes the run directory when remove_dir is set. Accepts NULL. */
void etcd_members_free(etcd_members *m, int remove_dir);

/* "http://127.0.0.1:P1,http://127.0.0.1:P2,..." of every member, in index
 * order (another host than 127.0.0.1 with $LAPSE_ETCD_HOSTS). */
const char *etcd_members_endpoints(const etcd_members *m);
/* "http://127.0.0.1:P" of member i. */
const char *etcd_members_endpoint(const etcd_members *m, int i);
const char *etcd_members_run_dir(const etcd_members *m);
int etcd_members_count(const etcd_members *m);
pid_t etcd_members_pid(const etcd_members *m, int i); /* 0 when not running */

/* Sends sig to member i; SIGKILL and SIGTERM also reap it. Returns 0 or
 * LAPSE_ESTATE when it is not running. */
int etcd_members_kill(etcd_members *m, int i, int sig);
/* Starts member i again on its data dir and ports, and waits (up to
 * timeout_ms) until it answers a linearizable read. Returns 0,
 * LAPSE_ESTATE (running), LAPSE_EIO or LAPSE_ETIMEDOUT. */
int etcd_members_restart(etcd_members *m, int i, int timeout_ms);
/* Waits until member i answers a linearizable read (it is in a cluster that
 * has a leader), up to timeout_ms. Returns 0 or LAPSE_ETIMEDOUT. */
int etcd_members_wait_healthy(etcd_members *m, int i, int timeout_ms);

#endif
