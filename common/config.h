/*
 * config.h: the daemons' config files (`--config FILE`), turned into
 * command-line flags so that one getopt_long loop parses both.
 *
 * A config file holds one setting per line, `key = value`, where key is a
 * long flag without its dashes (`listen = tcp://10.0.0.1:7401` is
 * `--listen=tcp://10.0.0.1:7401`). Blank lines are skipped; `#` starts a
 * comment when it begins a line or follows a space or tab. Spaces and tabs
 * around key and value are trimmed; the value is otherwise taken as written
 * (no quoting, no escapes). A switch (a flag without a value, such as
 * --ttl-naive-scan) is `key = true` or `key = false`. Every long flag but
 * help and config may be set. The format is documented in
 * docs/operations.md.
 *
 * config_argv_init builds a new argv: argv[0], then each setting of the file
 * as one "--key=value" element ("--key" for a switch set to true; nothing
 * for one set to false) in file order, then the command line without its
 * --config. getopt_long then reads the file's settings first and the
 * command line after, so a flag on the command line wins.
 *
 * Not thread-safe: call from main before any thread starts.
 *
 * Invariants of a config_argv after a successful config_argv_init:
 *   1. argv[argc] == NULL, and argv[0] is the program's argv[0].
 *   2. argv[1..nsettings] are the file's settings ("--key=value" or
 *      "--key", owned); every key is the name of a long option of opts
 *      other than "help" and "config", and appears once. The rest of argv
 *      is borrowed from the program's argv, in its order, without --config
 *      and its value.
 *   3. path is NULL exactly when no --config was given; then nsettings is 0.
 */
#ifndef LAPSE_CONFIG_H
#define LAPSE_CONFIG_H

#include <getopt.h>
#include <stddef.h>

typedef struct config_argv {
    int argc;        /* elements of argv before its final NULL */
    char **argv;     /* owned array (see above); pass it to getopt_long */
    char *path;      /* owned copy of --config's FILE; NULL: none given */
    char **settings; /* owned "--key=value" or "--key" strings, file order */
    int *lines;      /* lines[i]: the line of settings[i] in path */
    int nsettings;   /* entries in settings and lines */
} config_argv;

/* Builds ca from the program's argc/argv and opts (its getopt_long table,
 * which defines the valid keys). Recognizes `--config FILE` and
 * `--config=FILE` anywhere before a `--`.
 *
 * Returns 0; LAPSE_EUSAGE with "FILE:LINE: why" in err for a malformed
 * line, an unknown or repeated key, help, an empty value or a switch set
 * to neither true nor false, and with "why" for a --config without a value or given
 * twice; LAPSE_EIO with "FILE: why" when the file cannot be opened or
 * read; LAPSE_ENOMEM. On error ca holds nothing (config_argv_fini is
 * harmless). err may be NULL when errlen is 0.
 * REQUIRES: ca is not NULL; argv[0..argc-1] outlive ca (borrowed). */
int config_argv_init(config_argv *ca, int argc, char **argv, const struct option *opts, char *err,
                     size_t errlen);

/* Frees what ca owns and zeroes it. Accepts NULL and a zeroed ca. */
void config_argv_fini(config_argv *ca);

/* Says where a flag value came from. Returns buf, holding "FILE:LINE", when
 * value points into one of the file's settings (getopt_long's optarg while
 * it parses that setting), else NULL (the value came from the command line,
 * or value is NULL). glibc's getopt_long clears optarg on every call, so
 * after its loop ends optarg is NULL and errors found after the loop (a
 * required flag missing) are not blamed on the file.
 * REQUIRES: buf holds len bytes, len > 0. */
const char *config_argv_where(const config_argv *ca, const char *value, char *buf, size_t len);

#endif
