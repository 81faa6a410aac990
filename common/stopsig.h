/*
 * stopsig.h: how a daemon takes its stop signals (SIGTERM, SIGINT): blocked
 * in every thread, and let in only where main waits for them, so a signal
 * never interrupts a worker's system call and the handler runs on main's
 * thread, where it only sets the daemon's own volatile sig_atomic_t flag.
 * SIGPIPE is ignored: a peer that hangs up is an error of that write.
 *
 * Thread-safety: call stopsig_block from main before any thread starts
 * (threads inherit the mask it sets).
 *
 * Invariants:
 *  1. After stopsig_block, SIGTERM and SIGINT are blocked in the calling
 *     thread and in every thread it starts afterwards.
 *  2. *waitset is the mask before the call without SIGTERM and SIGINT:
 *     sigsuspend(waitset), or pthread_sigmask(SIG_SETMASK, waitset) around
 *     a sleep, are the only places the handler can run.
 */
#ifndef LAPSE_STOPSIG_H
#define LAPSE_STOPSIG_H

#include <signal.h>

/* Blocks SIGTERM and SIGINT, makes on_stop their handler, ignores SIGPIPE,
 * and returns in *waitset the mask to wait for them with. on_stop only sets
 * a flag (it runs in signal context). */
void stopsig_block(void (*on_stop)(int), sigset_t *waitset);

#endif
