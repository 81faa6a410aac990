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

#include "../common/arena.h"
#include "../common/lapse_err.h"
#include "../common/schema.h"
#include "lapse.pb-c.h"

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

/* Key definitions (wire_key.c): to protobuf from a (NULL on OOM); from
 * protobuf with a non-empty name of at most SCHEMA_MAX_KEY_NAME bytes and
 * type S, N or B, else LAPSE_EINVAL with a reason naming what. */
Lapse__KeyDef *wire_key_to_pb(arena *a, const key_def *k);
int wire_key_from_pb(const Lapse__KeyDef *pb, key_def *out, const char *what, char *err,
                     size_t errlen);

/* A schema's LSIs, GSIs and stream (wire_index.c). wire_indexes_to_pb sets
 * pb's lsi, gsi and stream (absent without a stream) from t, allocating from
 * a: 0 or LAPSE_ENOMEM. wire_indexes_from_pb fills out's lsi, nlsi, gsi, ngsi
 * and stream from pb with structural checks (at most SCHEMA_MAX_LSI and
 * SCHEMA_MAX_GSI, names within SCHEMA_MAX_NAME, keys as wire_key_from_pb when
 * present, a known projection, an LSI's partition key absent or the
 * table's, which is dropped); a stream that is not enabled leaves
 * out->stream all zero. REQUIRES: out's name and pk already set. Returns 0
 * or LAPSE_EINVAL with a reason in err. */
int wire_indexes_to_pb(arena *a, const table_schema *t, Lapse__TableSchema *pb);
int wire_indexes_from_pb(const Lapse__TableSchema *pb, table_schema *out, char *err, size_t errlen);

#endif /* LAPSE_RPC_INTERNAL_H */
