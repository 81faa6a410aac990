/*
 * rpc_internal.h: helpers shared by the .c files of rpc/ (server, client and
 * wire conversions); not part of the module's interface (rpc.h and wire.h
 * are).
 *
 * Thread-safety: the helpers are pure functions of their arguments.
 */
#ifndef LAPSE_RPC_INTERNAL_H
#define LAPSE_RPC_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <nng/nng.h>

#include "../common/lapse_err.h"

/* Formats into err (truncating to errlen); does nothing if err is NULL or
 * errlen is 0. */
static inline void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Maps an NNG error onto lapse_status. Everything that means "the peer or the
 * socket is not there" is EUNAVAILABLE. */
static inline int from_nng(int rv)
{
    switch (rv) {
    case 0:
        return LAPSE_OK;
    case NNG_ETIMEDOUT:
        return LAPSE_ETIMEDOUT;
    case NNG_ENOMEM:
        return LAPSE_ENOMEM;
    case NNG_EMSGSIZE:
        return LAPSE_ETOOBIG;
    case NNG_EPROTO:
        return LAPSE_EPROTO;
    case NNG_EINVAL:
    case NNG_EADDRINVAL:
    case NNG_ENOTSUP:
        return LAPSE_EINVAL;
    default: /* ECLOSED, ECONNREFUSED, ECONNSHUT, ECONNRESET, EUNREACHABLE, ... */
        return LAPSE_EUNAVAILABLE;
    }
}

#endif /* LAPSE_RPC_INTERNAL_H */
