/* log.c: leveled log lines on stderr (log.h). */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lapse_err.h"

#define LOG_LINE_MAX 4096

static char component[64] = "lapse";
static enum log_level min_level = LOG_INFO;

static const char *const level_names[] = {"DEBUG", "INFO ", "WARN ", "ERROR"};

void log_init(const char *comp, enum log_level level)
{
    if (comp != NULL) {
        snprintf(component, sizeof(component), "%s", comp);
    }
    min_level = level;
}

int log_level_parse(const char *s, enum log_level *out)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++) {
        if (s != NULL && strcmp(s, names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return LAPSE_EINVAL;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if (level < min_level || level > LOG_ERROR) {
        return;
    }
    char line[LOG_LINE_MAX];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line),
                     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, level_names[level], component);
    if (n < 0) {
        return;
    }
    size_t len = (size_t)n;
    if (len < sizeof(line) - 1) {
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(line + len, sizeof(line) - 1 - len, fmt, ap);
        va_end(ap);
        if (m > 0) {
            len += (size_t)m;
        }
    }
    if (len > sizeof(line) - 2) {
        len = sizeof(line) - 2; /* truncated; keep room for the newline */
    }
    while (len > 0 && line[len - 1] == '\n') {
        len--;
    }
    line[len++] = '\n';
    /* One write(2) per line keeps lines from threads whole; a short write on
     * a pipe is retried for the rest, which is still rare enough. */
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(STDERR_FILENO, line + off, len - off);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return;
        }
        off += (size_t)w;
    }
}
