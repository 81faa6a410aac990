/*
 * registers.h: the register workload of invariant 8 (docs/chaos.md).
 *
 * REG_THREADS threads beside the main workload, each with a client of its
 * own (so one may act on a map another has seen replaced), call
 * on REG_KEYS items of chaos_plain at a time, outside the model's k<i> (so
 * invariants 1-3 never judge them): strongly consistent gets, puts of a
 * fresh value ("val", unique over the run) and conditional puts (val = the
 * value this thread last saw there). Every thread calls every key, so calls
 * overlap. Every call's outcome and the monotonic instants around it go into
 * the key's history (linear.h); a get that failed has no effect and is left
 * out. Every REG_EPOCH_MS the threads move on to REG_KEYS fresh keys
 * ("reg-<epoch>-<k>"): short histories keep the search's worst case (calls
 * of unknown outcome) small. A key that holds REG_MAX_UNKNOWN writes of
 * unknown outcome is only read from then on: a burst of timeouts (a primary
 * killed twice in a row) would otherwise leave hundreds of them on the
 * last epoch's keys, past what the search can decide. After the settle, one more read of every key
 * ends its history, and check_linear (check.h) judges them.
 *
 * Thread-safety: each key's history is guarded by its mutex while the
 * threads run; reg_final_reads, check_linear and the linear plant read
 * them on the main thread after reg_join.
 */
#ifndef LAPSE_CHAOS_REGISTERS_H
#define LAPSE_CHAOS_REGISTERS_H

#include <pthread.h>
#include <stdatomic.h>

#include "../rpc/rpc.h"
#include "linear.h"
#include "run.h"

#define REG_KEYS 4
#define REG_THREADS 3
#define REG_EPOCH_MS 2000
#define REG_TABLE 1 /* the model's chaos_plain */
#define REG_MAX_UNKNOWN 8

typedef struct reg_history {
    pthread_mutex_t mu;
    lin_op *ops;
    size_t n, cap;
    int unknown; /* ops of outcome LIN_UNKNOWN among them */
} reg_history;

typedef struct registers {
    reg_history *key; /* [nkeys]: key k of epoch e at e * REG_KEYS + k */
    int nkeys;
    int64_t t0_us; /* when the threads started: times in reports are relative to it */
    pthread_t threads[REG_THREADS];
    int nthreads; /* started */
} registers;

/* The name of r->regs->key[h]: "reg-<epoch>-<k>". */
void reg_key_name(int h, char *buf, size_t len);
/* Monotonic microseconds. */
int64_t reg_now_us(void);

/* Allocates r->regs and starts the threads (they stop with r->stop).
 * Returns 0 or an errno value. */
int reg_start(run *r);
/* Joins the threads (after r->stop is set). */
void reg_join(run *r);
/* Reads every key called once more with r->admin, into its history; a
 * read that fails is retried for a few seconds (the cluster has settled). */
void reg_final_reads(run *r);
/* Reads every key of the current epoch once straight from the node of
 * client c (nodecall_get), as a client whose map still names that node
 * would: each answer is recorded as a read by "thread" REG_THREADS + 1; a
 * refusal (the node knows it may not answer) has no effect. The etcd-cut
 * fault calls it on the node it cut off. Returns how many answered. */
int reg_read_at(run *r, rpc_client *c);
/* Frees r->regs (joined). Accepts a run without it. */
void reg_free(run *r);

#endif
