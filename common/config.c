/*
 * config.c: config files to "--key=value" flags (config.h).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "lapse_err.h"

#define CONFIG_FLAG "--config"

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Trims blanks at both ends of [s, s + strlen(s)) in place; returns the new
 * start. */
static char *trim(char *s)
{
    while (is_blank(*s)) {
        s++;
    }
    size_t n = strlen(s);
    while (n > 0 && is_blank(s[n - 1])) {
        s[--n] = '\0';
    }
    return s;
}

/* Cuts a comment: '#' at the start or after a space or tab. */
static void cut_comment(char *s)
{
    for (char *p = s; *p != '\0'; p++) {
        if (*p == '#' && (p == s || p[-1] == ' ' || p[-1] == '\t')) {
            *p = '\0';
            return;
        }
    }
}

static const struct option *find_option(const struct option *opts, const char *name)
{
    for (const struct option *o = opts; o->name != NULL; o++) {
        if (strcmp(o->name, name) == 0) {
            return o;
        }
    }
    return NULL;
}

/* Writes the keys a file may set, comma separated, into out. */
static void list_keys(const struct option *opts, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (const struct option *o = opts; o->name != NULL; o++) {
        if (strcmp(o->name, "help") == 0 || strcmp(o->name, "config") == 0 ||
            strncmp(o->name, "debug-", 6) == 0) { /* hidden test flags stay hidden */
            continue;
        }
        int n = snprintf(out + used, len - used, "%s%s", used > 0 ? ", " : "", o->name);
        if (n < 0 || (size_t)n >= len - used) {
            return;
        }
        used += (size_t)n;
    }
}

/* The keys a file has set so far (true or false alike), to refuse a key
 * set twice. */
typedef struct seen_keys {
    char **keys; /* owned copies */
    int *lines;  /* lines[i]: where keys[i] was set */
    int n;
} seen_keys;

/* Returns the line key was set at, or 0. */
static int seen_line(const seen_keys *sk, const char *key)
{
    for (int i = 0; i < sk->n; i++) {
        if (strcmp(sk->keys[i], key) == 0) {
            return sk->lines[i];
        }
    }
    return 0;
}

/* Records key (copied). Returns 0 or LAPSE_ENOMEM. */
static int seen_add(seen_keys *sk, const char *key, int line)
{
    char **keys = realloc(sk->keys, (size_t)(sk->n + 1) * sizeof(*keys));
    if (keys == NULL) {
        return LAPSE_ENOMEM;
    }
    sk->keys = keys;
    int *lines = realloc(sk->lines, (size_t)(sk->n + 1) * sizeof(*lines));
    if (lines == NULL) {
        return LAPSE_ENOMEM;
    }
    sk->lines = lines;
    if ((sk->keys[sk->n] = strdup(key)) == NULL) {
        return LAPSE_ENOMEM;
    }
    sk->lines[sk->n++] = line;
    return 0;
}

static void seen_fini(seen_keys *sk)
{
    for (int i = 0; i < sk->n; i++) {
        free(sk->keys[i]);
    }
    free(sk->keys);
    free(sk->lines);
}

/* Appends "--key=value", or "--key" when value is NULL (line `line`), to
 * ca. Returns 0 or LAPSE_ENOMEM. */
static int add_setting(config_argv *ca, const char *key, const char *value, int line)
{
    char **settings = realloc(ca->settings, (size_t)(ca->nsettings + 1) * sizeof(*settings));
    if (settings == NULL) {
        return LAPSE_ENOMEM;
    }
    ca->settings = settings;
    int *lines = realloc(ca->lines, (size_t)(ca->nsettings + 1) * sizeof(*lines));
    if (lines == NULL) {
        return LAPSE_ENOMEM;
    }
    ca->lines = lines;
    size_t n = strlen(key) + (value != NULL ? strlen(value) : 0) + 4;
    char *s = malloc(n);
    if (s == NULL) {
        return LAPSE_ENOMEM;
    }
    if (value != NULL) {
        snprintf(s, n, "--%s=%s", key, value);
    } else {
        snprintf(s, n, "--%s", key);
    }
    ca->settings[ca->nsettings] = s;
    ca->lines[ca->nsettings] = line;
    ca->nsettings++;
    return 0;
}

/* Parses one line (modified in place) of ca->path. Returns 0 (a setting was
 * added, or the line is blank, a comment or a switch set to false) or an
 * error code with err set. */
static int parse_line(config_argv *ca, seen_keys *sk, char *text, int line,
                      const struct option *opts, char *err, size_t errlen)
{
    const char *path = ca->path;
    cut_comment(text);
    char *s = trim(text);
    if (*s == '\0') {
        return 0;
    }
    char *eq = strchr(s, '=');
    if (eq == NULL) {
        return errf(LAPSE_EUSAGE, err, errlen, "%s:%d: expected 'key = value', not '%s'", path,
                    line, s);
    }
    *eq = '\0';
    char *key = trim(s);
    char *value = trim(eq + 1);
    if (*key == '\0') {
        return errf(LAPSE_EUSAGE, err, errlen, "%s:%d: expected 'key = value', the key is missing",
                    path, line);
    }
    if (key[0] == '-') {
        return errf(LAPSE_EUSAGE, err, errlen,
                    "%s:%d: write the key without its dashes ('%s' not '%s')", path, line,
                    key + strspn(key, "-"), key);
    }
    if (strcmp(key, "config") == 0) {
        return errf(LAPSE_EUSAGE, err, errlen, "%s:%d: a config file cannot name another one", path,
                    line);
    }
    const struct option *o = find_option(opts, key);
    if (o == NULL) {
        char keys[1024];
        list_keys(opts, keys, sizeof(keys));
        return errf(LAPSE_EUSAGE, err, errlen, "%s:%d: unknown key '%s' (known: %s)", path, line,
                    key, keys);
    }
    if (strcmp(key, "help") == 0) {
        return errf(LAPSE_EUSAGE, err, errlen, "%s:%d: 'help' cannot be set in a config file", path,
                    line);
    }
    if (*value == '\0') {
        return errf(LAPSE_EUSAGE, err, errlen, "%s:%d: '%s' has no value", path, line, key);
    }
    int first = seen_line(sk, key);
    if (first != 0) {
        return errf(LAPSE_EUSAGE, err, errlen, "%s:%d: '%s' is already set at line %d", path, line,
                    key, first);
    }
    /* A switch (a flag without a value) is "true", which adds it, or
     * "false", which leaves it out. */
    int add = 1;
    if (o->has_arg == no_argument) {
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0) {
            return errf(LAPSE_EUSAGE, err, errlen, "%s:%d: '%s' is true or false, not '%s'", path,
                        line, key, value);
        }
        add = strcmp(value, "true") == 0;
        value = NULL;
    }
    if (seen_add(sk, key, line) != 0 || (add && add_setting(ca, key, value, line) != 0)) {
        return errf(LAPSE_ENOMEM, err, errlen, "%s:%d: out of memory", path, line);
    }
    return 0;
}

/* Reads every setting of ca->path into ca. Returns 0 or an error code with
 * err set. */
static int read_file(config_argv *ca, const struct option *opts, char *err, size_t errlen)
{
    FILE *fp = fopen(ca->path, "r");
    if (fp == NULL) {
        return errf(LAPSE_EIO, err, errlen, "%s: cannot open config file: %s", ca->path,
                    strerror(errno));
    }
    seen_keys sk = {0};
    char *text = NULL;
    size_t cap = 0;
    int line = 0, rv = 0;
    ssize_t n;
    errno = 0;
    while ((n = getline(&text, &cap, fp)) >= 0) {
        line++;
        if ((size_t)n != strlen(text)) {
            rv =
                errf(LAPSE_EUSAGE, err, errlen, "%s:%d: the line holds a NUL byte", ca->path, line);
            break;
        }
        if ((rv = parse_line(ca, &sk, text, line, opts, err, errlen)) != 0) {
            break;
        }
        errno = 0;
    }
    if (rv == 0 && ferror(fp)) {
        rv = errf(LAPSE_EIO, err, errlen, "%s: cannot read config file: %s", ca->path,
                  strerror(errno != 0 ? errno : EIO));
    }
    seen_fini(&sk);
    free(text);
    fclose(fp);
    return rv;
}

int config_argv_init(config_argv *ca, int argc, char **argv, const struct option *opts, char *err,
                     size_t errlen)
{
    memset(ca, 0, sizeof(*ca));
    if (errlen > 0) {
        err[0] = '\0';
    }
    int rv = 0;
    int config_at = -1;  /* index of the --config element; its value may follow */
    int config_args = 0; /* elements it takes: 1 (--config=FILE) or 2 */
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            break;
        }
        const char *v = NULL;
        int take;
        if (strcmp(argv[i], CONFIG_FLAG) == 0) {
            if (i + 1 >= argc) {
                return errf(LAPSE_EUSAGE, err, errlen, CONFIG_FLAG " needs a value (a file)");
            }
            v = argv[i + 1];
            take = 2;
        } else if (strncmp(argv[i], CONFIG_FLAG "=", sizeof(CONFIG_FLAG)) == 0) {
            v = argv[i] + sizeof(CONFIG_FLAG);
            take = 1;
        } else {
            continue;
        }
        if (file != NULL) {
            return errf(LAPSE_EUSAGE, err, errlen, CONFIG_FLAG " is given twice");
        }
        if (*v == '\0') {
            return errf(LAPSE_EUSAGE, err, errlen, CONFIG_FLAG " needs a value (a file)");
        }
        file = v;
        config_at = i;
        config_args = take;
        i += take - 1;
    }
    if (file != NULL) {
        if ((ca->path = strdup(file)) == NULL) {
            rv = errf(LAPSE_ENOMEM, err, errlen, "out of memory");
            goto fail;
        }
        if ((rv = read_file(ca, opts, err, errlen)) != 0) {
            goto fail;
        }
    }

    ca->argv = calloc((size_t)argc + (size_t)ca->nsettings + 1, sizeof(char *));
    if (ca->argv == NULL) {
        rv = errf(LAPSE_ENOMEM, err, errlen, "out of memory");
        goto fail;
    }
    int n = 0;
    ca->argv[n++] = argv[0];
    for (int i = 0; i < ca->nsettings; i++) {
        ca->argv[n++] = ca->settings[i];
    }
    for (int i = 1; i < argc; i++) {
        if (i == config_at) {
            i += config_args - 1;
            continue;
        }
        ca->argv[n++] = argv[i];
    }
    ca->argv[n] = NULL;
    ca->argc = n;
    return 0;

fail:
    config_argv_fini(ca);
    return rv;
}

void config_argv_fini(config_argv *ca)
{
    if (ca == NULL) {
        return;
    }
    for (int i = 0; i < ca->nsettings; i++) {
        free(ca->settings[i]);
    }
    free(ca->settings);
    free(ca->lines);
    free(ca->argv);
    free(ca->path);
    memset(ca, 0, sizeof(*ca));
}

const char *config_argv_where(const config_argv *ca, const char *value, char *buf, size_t len)
{
    if (ca == NULL || value == NULL) {
        return NULL;
    }
    for (int i = 0; i < ca->nsettings; i++) {
        uintptr_t s = (uintptr_t)ca->settings[i], v = (uintptr_t)value;
        if (v >= s && v <= s + strlen(ca->settings[i])) {
            snprintf(buf, len, "%s:%d", ca->path, ca->lines[i]);
            return buf;
        }
    }
    return NULL;
}
