/*
 * errors.c: filling a lapse_error (client_err, client_ok: client.h), for
 * every file of the client, route.c and client.c among them (its own file
 * so that neither calls back into the other).
 */
#include <stdarg.h>
#include <stdio.h>

#include "../common/lapse_err.h"
#include "client.h"

int client_err(lapse_error *err, int code, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

int client_ok(lapse_error *err)
{
    if (err != NULL) {
        err->code = LAPSE_OK;
        err->message[0] = '\0';
    }
    return 0;
}
