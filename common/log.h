/*
 * log.h: leveled log lines on stderr, with UTC time to the millisecond,
 * level and component: "2026-11-22T04:16:32.123Z INFO  node: listening on ...".
 *
 * Thread-safe: each line is written with one write(2) call.
 */
#ifndef LAPSE_LOG_H
#define LAPSE_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3 };

/* Sets the component name shown on each line (copied) and the lowest level
 * printed. Call once at start-up, before threads start. */
void log_init(const char *component, enum log_level min_level);
/* Parses "debug", "info", "warn", "error". Returns 0 or LAPSE_EINVAL. */
int log_level_parse(const char *s, enum log_level *out);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
