/*
 * linear.h: whether one register's history is linearizable (invariant 8,
 * docs/chaos.md): the Wing-Gong search with Lowe's memoization of
 * (operations placed, register value), as Porcupine and Knossos do it.
 *
 * A history is the operations the register workload (registers.h) made on
 * one key, each with the monotonic instants of its call and its return.
 * The register holds a value; 0 means absent (no item). Values written are
 * unique over the run, so a read names the write it saw.
 *
 *   read    outcome OK only (a failed read has no effect and is not kept):
 *           saw `value`
 *   write   sets `value`
 *   cas     sets `value` if the register holds `expect` (a conditional
 *           put): OK when it did; FAILED (the condition was false) when the
 *           register did not hold `expect`
 *
 * A write or cas whose call failed otherwise (timeout, unavailable, a
 * refusal) is UNKNOWN: it may have taken effect at any moment after its
 * call, or never. Its return is unbounded, except that it must precede
 * every operation that saw its value (values are unique), so it is checked
 * as returning when the first of those returns. One that nobody saw is
 * first left out (taking effect at the very end is the same as never); only
 * if the history without it cannot be ordered, and it was called before a
 * refused cas returned (it may be why the register did not hold what the
 * cas expected), is it searched with an unbounded return, which can cost
 * time exponential in how many such calls there are: histories are kept
 * short (registers.h), and the search is cut at max_steps, the verdict then
 * LIN_UNDECIDED, never a violation.
 *
 * Thread-safety: pure functions of their arguments.
 */
#ifndef LAPSE_CHAOS_LINEAR_H
#define LAPSE_CHAOS_LINEAR_H

#include <stddef.h>
#include <stdint.h>

typedef enum { LIN_READ, LIN_WRITE, LIN_CAS } lin_kind;
typedef enum { LIN_OK, LIN_FAILED, LIN_UNKNOWN } lin_outcome;

typedef struct lin_op {
    lin_kind kind;
    lin_outcome outcome;
    uint64_t value;  /* read: seen (0: absent); write, cas: written */
    uint64_t expect; /* cas: required */
    int64_t call_us; /* monotonic microseconds: taken before the call */
    int64_t ret_us;  /* taken after the reply (ignored when UNKNOWN) */
    int thread;      /* the workload thread, for the report */
} lin_op;

typedef enum { LIN_LINEARIZABLE, LIN_VIOLATION, LIN_UNDECIDED } lin_verdict;

typedef struct lin_result {
    lin_verdict verdict;
    long steps;     /* search steps taken, over both passes */
    size_t longest; /* the most operations any order of the last pass placed */
    size_t stuck;   /* LIN_VIOLATION: index in ops of the first operation
                       (by call) that the longest order could not place */
} lin_result;

/* Checks the n operations of ops (any order; not modified) from an absent
 * register. max_steps bounds the search (<= 0: 50 million). */
lin_result lin_check(const lin_op *ops, size_t n, long max_steps);

/* One line describing op (for a violation's report): "cas 12->17 OK by
 * thread 2, +1.234..+1.240 s" with times relative to t0_us. */
void lin_describe(const lin_op *op, int64_t t0_us, char *buf, size_t len);

#endif
