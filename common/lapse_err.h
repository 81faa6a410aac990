/*
 * lapse_err.h: the one project-wide status code enum.
 *
 * Every function in Lapse that can fail returns int: 0 (LAPSE_OK) on success,
 * otherwise one of these codes. Detail text goes into a caller-supplied buffer.
 * The wire enum lapse.Status (proto/lapse.proto) maps one to one onto these
 * values, so a code crosses the network unchanged.
 *
 * This header is public: it is installed beside lapse.h and includes nothing.
 * Thread-safety: lapse_strerror() is safe from any thread.
 *
 * Invariants:
 *  1. Values are stable; new codes are appended, never renumbered.
 *  2. LAPSE_OK is 0 and every error is positive.
 */
#ifndef LAPSE_ERR_H
#define LAPSE_ERR_H

#ifdef __cplusplus
extern "C" {
#endif

enum lapse_status {
    LAPSE_OK = 0,
    LAPSE_EINVAL = 1,       /* bad input: malformed JSON, wrong type, bad name */
    LAPSE_ENOMEM = 2,       /* allocation failed */
    LAPSE_ENOTFOUND = 3,    /* the table (or node) does not exist */
    LAPSE_EEXISTS = 4,      /* the table already exists */
    LAPSE_ECONDITION = 5,   /* a conditional write's condition was false */
    LAPSE_EWRONGNODE = 6,   /* this node does not own the partition */
    LAPSE_ETIMEDOUT = 7,    /* the deadline passed */
    LAPSE_EUNAVAILABLE = 8, /* peer unreachable, closed or not ready */
    LAPSE_ETOOBIG = 9,      /* item, batch or message over its size limit */
    LAPSE_EIO = 10,         /* storage failure */
    LAPSE_EPROTO = 11,      /* malformed message or protocol version mismatch */
    LAPSE_EPERM = 12,       /* admin token missing or wrong */
    LAPSE_ESTATE = 13,      /* operation not valid in the current state */
    LAPSE_EINTERNAL = 14,   /* a bug: an invariant did not hold */
    LAPSE_ECORRUPT = 15,    /* stored data failed to decode */
    LAPSE_EUSAGE = 16,      /* bad command-line usage */
    LAPSE_STATUS_COUNT = 17
};

/* Returns a static, human-readable name for code; never NULL. */
const char *lapse_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif
