/*
 * errf.h: the one way a module says why a call failed: a reason formatted
 * into the caller's buffer, and the status code returned, so a failure is
 * one statement (`return errf(LAPSE_EINVAL, err, errlen, "...", ...)`).
 *
 * Thread-safety: pure; writes only the caller's buffer.
 */
#ifndef LAPSE_ERRF_H
#define LAPSE_ERRF_H

#include <stddef.h>

/* Formats the reason into err (when err is not NULL and errlen > 0,
 * truncated to fit, NUL-terminated) and returns code. */
int errf(int code, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
