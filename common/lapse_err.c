/* lapse_err.c: names for the project-wide status codes (lapse_err.h), and
 * errf (errf.h). */
#include "lapse_err.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "errf.h"

static const char *const names[LAPSE_STATUS_COUNT] = {
    [LAPSE_OK] = "ok",
    [LAPSE_EINVAL] = "invalid argument",
    [LAPSE_ENOMEM] = "out of memory",
    [LAPSE_ENOTFOUND] = "not found",
    [LAPSE_EEXISTS] = "already exists",
    [LAPSE_ECONDITION] = "conditional check failed",
    [LAPSE_EWRONGNODE] = "wrong node",
    [LAPSE_ETIMEDOUT] = "timed out",
    [LAPSE_EUNAVAILABLE] = "unavailable",
    [LAPSE_ETOOBIG] = "too big",
    [LAPSE_EIO] = "i/o error",
    [LAPSE_EPROTO] = "protocol error",
    [LAPSE_EPERM] = "permission denied",
    [LAPSE_ESTATE] = "invalid state",
    [LAPSE_EINTERNAL] = "internal error",
    [LAPSE_ECORRUPT] = "corrupt data",
    [LAPSE_EUSAGE] = "usage error",
};

const char *lapse_strerror(int code)
{
    if (code < 0 || code >= LAPSE_STATUS_COUNT || names[code] == NULL) {
        return "unknown error";
    }
    return names[code];
}

int errf(int code, char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}
