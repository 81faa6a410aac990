/*
 * procs.h: the processes of a chaos run (index 0: the coordinator, 1..nodes:
 * the nodes, then the other coordinators on etcd) as the faults treat them:
 * named, killed and counted as injected faults, restarted, their links
 * healed, and checked for exits nobody caused.
 *
 * Thread-safety: main thread only (the only thread that touches the
 * cluster).
 */
#ifndef LAPSE_CHAOS_PROCS_H
#define LAPSE_CHAOS_PROCS_H

#include <stddef.h>
#include <stdint.h>

#include "run.h"

/* How many processes the run has (nodes and coordinators). */
int procs_count(run *r);
/* "coordinator", "coordinator N" or "node N" for process idx, into buf. */
void procs_name(run *r, int idx, char *buf, size_t len);
/* The coordinator to kill: the one that leads (on etcd), else the one. */
int procs_coord_victim(run *r);

/* Counts one injected fault, for the running scenario's kinds too. */
void procs_injected(run *r);
/* kill -9 of process idx, logged with why and counted as injected. */
void procs_kill9(run *r, int idx, const char *why);
/* Waits (up to 20 s) until every node is UP; logs when not. */
void procs_wait_up(run *r);
/* Restarts process idx on its data dir if it is down; logged. */
void procs_restart(run *r, int idx);
/* Sleeps delay_ms, restarts process idx and waits for the nodes. */
void procs_restart_after(run *r, int idx, int64_t delay_ms);
/* Brings node's link back up, retrying: a link left down would fail the
 * whole run for the wrong reason. Returns 0 or -1. */
int procs_heal(run *r, int node);

/* Notes (once each) processes that exited without our kill, restarting
 * them. Returns how many were newly found. */
int procs_check_crashes(run *r);
/* Brings every process back: heal cut links, SIGCONT, restart what is down,
 * wait until every node is UP (bounded). Logs daemons that exited on their
 * own. Returns 0 or LAPSE_ETIMEDOUT. */
int procs_restore(run *r);

#endif
