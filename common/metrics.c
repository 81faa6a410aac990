/*
 * metrics.c: the registry behind metrics.h and its Prometheus text rendering
 * (exposition format 0.0.4).
 *
 * Layout: a family per metric name (type, help, histogram bounds, the list of
 * its series in creation order) and one open-addressing hash table of series
 * keyed by (name, labels). An update hashes name and labels, probes the table
 * and changes the series in place, so once a series exists an update takes
 * the mutex once and allocates nothing. Families are few (tens) and are only
 * searched linearly when a series is created.
 *
 * Rendering sorts families by name and series by label text, so the output
 * does not depend on which thread touched a series first.
 *
 * Two mutexes: mu guards all registry state; render_mu only serializes
 * metrics_render, so the collector never runs on two threads at once and runs
 * without mu held (it calls metrics_gauge_set, and its work must not stall
 * the hot-path updates).
 */
#include "metrics.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lapse_err.h"

#define MISUSE_NAME "lapse_metrics_misuse_total"
#define MISUSE_HELP                                                                                \
    "Metric updates ignored because of a type clash or a malformed name, label or value."

enum mtype { MT_COUNTER, MT_GAUGE, MT_HISTOGRAM };

static const char *const type_names[] = {"counter", "gauge", "histogram"};

typedef struct series series;

typedef struct family {
    char *name;
    char *help; /* "" when none was given */
    enum mtype type;
    double *bounds; /* histogram upper bounds, ascending, finite; NULL otherwise */
    size_t nbounds;
    series **series; /* in creation order */
    size_t nseries, capseries;
} family;

struct series {
    family *fam;
    char *labels; /* label text without braces; "" for none */
    uint64_t hash;
    double value;      /* counter or gauge */
    double sum;        /* histogram */
    uint64_t count;    /* histogram */
    uint64_t *buckets; /* histogram: nbounds + 1 per-bucket (not cumulative) counts */
};

struct metrics {
    pthread_mutex_t mu;        /* guards everything below */
    pthread_mutex_t render_mu; /* serializes metrics_render (collector + text) */
    family **fams;
    size_t nfams, capfams;
    series **slots; /* open addressing, linear probing; nslots is a power of 2 */
    size_t nslots, nused;
    metrics_collector collector;
    void *collector_arg;
};

/* ===== Helpers: hashing, validation ===== */

static uint64_t hash_key(const char *name, const char *labels)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h = (h ^ *p) * 1099511628211ULL;
    }
    h = (h ^ 0xff) * 1099511628211ULL; /* separator no name byte can be */
    for (const unsigned char *p = (const unsigned char *)labels; *p; p++) {
        h = (h ^ *p) * 1099511628211ULL;
    }
    return h;
}

static int is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_name_char(char c)
{
    return is_name_start(c) || (c >= '0' && c <= '9');
}

/* Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*. */
static int valid_metric_name(const char *s)
{
    if (s == NULL || !(is_name_start(*s) || *s == ':')) {
        return 0;
    }
    for (s++; *s; s++) {
        if (!(is_name_char(*s) || *s == ':')) {
            return 0;
        }
    }
    return 1;
}

/* Label text: name="value"(,name="value")* with \\ \" \n the only escapes in
 * values and no raw newline. A histogram may not use the label le. Checked
 * once per series, when it is created, so a bad label set is refused before it
 * could make the whole scrape unparseable. */
static int valid_labels(const char *s, int histogram)
{
    if (*s == '\0') {
        return 1;
    }
    for (;;) {
        const char *start = s;
        if (!is_name_start(*s)) {
            return 0;
        }
        while (is_name_char(*s)) {
            s++;
        }
        if (histogram && s - start == 2 && start[0] == 'l' && start[1] == 'e') {
            return 0;
        }
        if (s - start >= 2 && start[0] == '_' && start[1] == '_') {
            return 0; /* reserved for Prometheus' own labels */
        }
        if (*s++ != '=' || *s++ != '"') {
            return 0;
        }
        for (;; s++) {
            if (*s == '\0' || *s == '\n') {
                return 0;
            }
            if (*s == '"') {
                break;
            }
            if (*s == '\\') {
                s++;
                if (*s != '\\' && *s != '"' && *s != 'n') {
                    return 0;
                }
            }
        }
        s++; /* closing quote */
        if (*s == '\0') {
            return 1;
        }
        if (*s++ != ',') {
            return 0;
        }
    }
}

/* ===== Registry internals (mu held) ===== */

static void family_free(family *f)
{
    if (f == NULL) {
        return;
    }
    free(f->name);
    free(f->help);
    free(f->bounds);
    free(f->series);
    free(f);
}

static void series_free(series *s)
{
    if (s == NULL) {
        return;
    }
    free(s->labels);
    free(s->buckets);
    free(s);
}

static series *table_find(metrics *m, const char *name, const char *labels, uint64_t h)
{
    if (m->nslots == 0) {
        return NULL;
    }
    size_t mask = m->nslots - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        series *s = m->slots[i];
        if (s == NULL) {
            return NULL;
        }
        if (s->hash == h && strcmp(s->labels, labels) == 0 && strcmp(s->fam->name, name) == 0) {
            return s;
        }
    }
}

static void table_put(series **slots, size_t nslots, series *s)
{
    size_t mask = nslots - 1;
    size_t i = (size_t)s->hash & mask;
    while (slots[i] != NULL) {
        i = (i + 1) & mask;
    }
    slots[i] = s;
}

/* Makes room for one more series (load factor at most 1/2). 0 or LAPSE_ENOMEM. */
static int table_reserve(metrics *m)
{
    if ((m->nused + 1) * 2 <= m->nslots) {
        return 0;
    }
    size_t n = m->nslots ? m->nslots * 2 : 64;
    series **slots = calloc(n, sizeof *slots);
    if (slots == NULL) {
        return LAPSE_ENOMEM;
    }
    for (size_t i = 0; i < m->nslots; i++) {
        if (m->slots[i] != NULL) {
            table_put(slots, n, m->slots[i]);
        }
    }
    free(m->slots);
    m->slots = slots;
    m->nslots = n;
    return 0;
}

static family *family_find(metrics *m, const char *name)
{
    for (size_t i = 0; i < m->nfams; i++) {
        if (strcmp(m->fams[i]->name, name) == 0) {
            return m->fams[i];
        }
    }
    return NULL;
}

/* Creates the family; for a histogram, bounds must already be validated and a
 * trailing +Inf bound is dropped (the +Inf bucket is always there). */
static family *family_create(metrics *m, const char *name, const char *help, enum mtype type,
                             const double *bounds, size_t nbounds)
{
    if (m->nfams == m->capfams) {
        size_t cap = m->capfams ? m->capfams * 2 : 16;
        family **fams = realloc(m->fams, cap * sizeof *fams);
        if (fams == NULL) {
            return NULL;
        }
        m->fams = fams;
        m->capfams = cap;
    }
    family *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return NULL;
    }
    f->type = type;
    f->name = strdup(name);
    f->help = strdup(help ? help : "");
    if (f->name == NULL || f->help == NULL) {
        goto fail;
    }
    if (type == MT_HISTOGRAM) {
        if (nbounds > 0 && isinf(bounds[nbounds - 1])) {
            nbounds--;
        }
        if (nbounds > 0) {
            f->bounds = malloc(nbounds * sizeof *f->bounds);
            if (f->bounds == NULL) {
                goto fail;
            }
            memcpy(f->bounds, bounds, nbounds * sizeof *f->bounds);
        }
        f->nbounds = nbounds;
    }
    m->fams[m->nfams++] = f;
    return f;
fail:
    family_free(f);
    return NULL;
}

/* Bounds must be finite and strictly ascending, except that the last may be
 * +Inf. */
static int valid_bounds(const double *bounds, size_t nbounds)
{
    if (nbounds > 0 && bounds == NULL) {
        return 0;
    }
    for (size_t i = 0; i < nbounds; i++) {
        int last = i + 1 == nbounds;
        if (isnan(bounds[i]) || (isinf(bounds[i]) && !(last && bounds[i] > 0))) {
            return 0;
        }
        if (i > 0 && !(bounds[i] > bounds[i - 1])) {
            return 0;
        }
    }
    return 1;
}

static void misuse_locked(metrics *m);

/* Finds or creates the series (name, labels) of the given type. Returns NULL
 * (and counts a misuse, except for allocation failure) when the update must be
 * ignored. bounds are only looked at when the family is created. */
static series *series_get(metrics *m, const char *name, const char *help, enum mtype type,
                          const double *bounds, size_t nbounds, const char *labels)
{
    if (labels == NULL) {
        labels = "";
    }
    if (name == NULL) {
        misuse_locked(m);
        return NULL;
    }
    uint64_t h = hash_key(name, labels);
    series *s = table_find(m, name, labels, h);
    if (s != NULL) {
        if (s->fam->type != type) {
            misuse_locked(m);
            return NULL;
        }
        return s;
    }

    /* Slow path: a new series, maybe a new family. */
    family *f = family_find(m, name);
    if (f != NULL && f->type != type) {
        misuse_locked(m);
        return NULL;
    }
    if (!valid_labels(labels, type == MT_HISTOGRAM) ||
        (f == NULL &&
         (!valid_metric_name(name) || (type == MT_HISTOGRAM && !valid_bounds(bounds, nbounds))))) {
        misuse_locked(m);
        return NULL;
    }
    if (table_reserve(m) != 0) {
        return NULL;
    }
    if (f == NULL && (f = family_create(m, name, help, type, bounds, nbounds)) == NULL) {
        return NULL;
    }
    if (f->nseries == f->capseries) {
        size_t cap = f->capseries ? f->capseries * 2 : 4;
        series **v = realloc(f->series, cap * sizeof *v);
        if (v == NULL) {
            return NULL; /* an empty family renders nothing; it is reused later */
        }
        f->series = v;
        f->capseries = cap;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        return NULL;
    }
    s->fam = f;
    s->hash = h;
    s->labels = strdup(labels);
    if (s->labels == NULL) {
        series_free(s);
        return NULL;
    }
    if (type == MT_HISTOGRAM) {
        s->buckets = calloc(f->nbounds + 1, sizeof *s->buckets);
        if (s->buckets == NULL) {
            series_free(s);
            return NULL;
        }
    }
    f->series[f->nseries++] = s;
    table_put(m->slots, m->nslots, s);
    m->nused++;
    return s;
}

/* Counts one ignored update. Never recurses: a clash on the misuse counter's
 * own name is simply dropped. */
static void misuse_locked(metrics *m)
{
    const char *labels = "";
    series *s = table_find(m, MISUSE_NAME, labels, hash_key(MISUSE_NAME, labels));
    if (s == NULL) {
        family *f = family_find(m, MISUSE_NAME);
        if (f != NULL && f->type != MT_COUNTER) {
            return;
        }
        s = series_get(m, MISUSE_NAME, MISUSE_HELP, MT_COUNTER, NULL, 0, labels);
        if (s == NULL) {
            return;
        }
    } else if (s->fam->type != MT_COUNTER) {
        return;
    }
    s->value += 1;
}

/* ===== Public API: lifecycle and updates ===== */

metrics *metrics_new(void)
{
    metrics *m = calloc(1, sizeof *m);
    if (m == NULL) {
        return NULL;
    }
    if (pthread_mutex_init(&m->mu, NULL) != 0) {
        free(m);
        return NULL;
    }
    if (pthread_mutex_init(&m->render_mu, NULL) != 0) {
        pthread_mutex_destroy(&m->mu);
        free(m);
        return NULL;
    }
    return m;
}

void metrics_free(metrics *m)
{
    if (m == NULL) {
        return;
    }
    for (size_t i = 0; i < m->nfams; i++) {
        family *f = m->fams[i];
        for (size_t j = 0; j < f->nseries; j++) {
            series_free(f->series[j]);
        }
        family_free(f);
    }
    free(m->fams);
    free(m->slots);
    pthread_mutex_destroy(&m->render_mu);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void metrics_counter_add(metrics *m, const char *name, const char *help, const char *labels,
                         double v)
{
    if (m == NULL) {
        return;
    }
    pthread_mutex_lock(&m->mu);
    series *s = series_get(m, name, help, MT_COUNTER, NULL, 0, labels);
    if (s != NULL) {
        if (v >= 0) { /* also false for NaN: a counter never decreases */
            s->value += v;
        } else {
            misuse_locked(m);
        }
    }
    pthread_mutex_unlock(&m->mu);
}

void metrics_gauge_set(metrics *m, const char *name, const char *help, const char *labels, double v)
{
    if (m == NULL) {
        return;
    }
    pthread_mutex_lock(&m->mu);
    series *s = series_get(m, name, help, MT_GAUGE, NULL, 0, labels);
    if (s != NULL) {
        s->value = v;
    }
    pthread_mutex_unlock(&m->mu);
}

void metrics_histogram_observe(metrics *m, const char *name, const char *help, const double *bounds,
                               size_t nbounds, const char *labels, double v)
{
    if (m == NULL) {
        return;
    }
    pthread_mutex_lock(&m->mu);
    series *s = series_get(m, name, help, MT_HISTOGRAM, bounds, nbounds, labels);
    if (s != NULL) {
        if (isnan(v)) {
            misuse_locked(m); /* would poison _sum forever */
        } else {
            const family *f = s->fam;
            size_t i = 0;
            while (i < f->nbounds && !(v <= f->bounds[i])) {
                i++;
            }
            s->buckets[i]++;
            s->count++;
            s->sum += v;
        }
    }
    pthread_mutex_unlock(&m->mu);
}

void metrics_set_collector(metrics *m, metrics_collector fn, void *arg)
{
    if (m == NULL) {
        return;
    }
    pthread_mutex_lock(&m->mu);
    m->collector = fn;
    m->collector_arg = arg;
    pthread_mutex_unlock(&m->mu);
}

/* ===== Rendering ===== */

/* Formats v the way Prometheus' parser (Go strconv.ParseFloat) reads it back
 * exactly: integers in plain digits, other values in the shortest %.Ng that
 * round-trips (at most %.17g), and +Inf, -Inf, NaN spelled as Prometheus does. */
static void format_value(char *out, size_t outlen, double v)
{
    if (isnan(v)) {
        snprintf(out, outlen, "NaN");
    } else if (isinf(v)) {
        snprintf(out, outlen, v > 0 ? "+Inf" : "-Inf");
    } else if (v == 0) {
        snprintf(out, outlen, "0");                             /* also -0 */
    } else if (v == floor(v) && fabs(v) < 9007199254740992.0) { /* 2^53: exact */
        snprintf(out, outlen, "%.0f", v);
    } else {
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(out, outlen, "%.*g", prec, v);
            if (strtod(out, NULL) == v) {
                break;
            }
        }
    }
}

static int append_value(buf *out, double v)
{
    char tmp[40];
    format_value(tmp, sizeof tmp, v);
    return buf_append_str(out, tmp);
}

/* HELP text escapes only backslash and newline. */
static int append_help(buf *out, const char *s)
{
    int rv = 0;
    for (; *s && rv == 0; s++) {
        if (*s == '\\') {
            rv = buf_append_str(out, "\\\\");
        } else if (*s == '\n') {
            rv = buf_append_str(out, "\\n");
        } else {
            rv = buf_append_byte(out, (uint8_t)*s);
        }
    }
    return rv;
}

static int cmp_family(const void *a, const void *b)
{
    return strcmp((*(family *const *)a)->name, (*(family *const *)b)->name);
}

static int cmp_series(const void *a, const void *b)
{
    return strcmp((*(series *const *)a)->labels, (*(series *const *)b)->labels);
}

/* One line "name{labels} value\n"; labels may be "" (no braces). */
static int append_sample(buf *out, const char *name, const char *suffix, const char *labels,
                         double v)
{
    int rv;
    if ((rv = buf_printf(out, "%s%s", name, suffix)) != 0) {
        return rv;
    }
    if (*labels != '\0' && (rv = buf_printf(out, "{%s}", labels)) != 0) {
        return rv;
    }
    if ((rv = buf_append_byte(out, ' ')) != 0 || (rv = append_value(out, v)) != 0) {
        return rv;
    }
    return buf_append_byte(out, '\n');
}

static int render_histogram(buf *out, const family *f, const series *s)
{
    int rv;
    char le[40];
    uint64_t cum = 0;
    for (size_t i = 0; i <= f->nbounds; i++) {
        cum += s->buckets[i];
        if (i < f->nbounds) {
            format_value(le, sizeof le, f->bounds[i]);
        } else {
            snprintf(le, sizeof le, "+Inf");
        }
        rv = buf_printf(out, "%s_bucket{%s%sle=\"%s\"} ", f->name, s->labels, *s->labels ? "," : "",
                        le);
        if (rv != 0 || (rv = append_value(out, (double)cum)) != 0 ||
            (rv = buf_append_byte(out, '\n')) != 0) {
            return rv;
        }
    }
    if ((rv = append_sample(out, f->name, "_sum", s->labels, s->sum)) != 0) {
        return rv;
    }
    return append_sample(out, f->name, "_count", s->labels, (double)s->count);
}

static int render_locked(metrics *m, buf *out)
{
    int rv = 0;
    /* Sort in place: the hash table holds its own pointers, so reordering the
     * family and series arrays changes nothing but the render order. */
    if (m->nfams > 1) {
        qsort(m->fams, m->nfams, sizeof *m->fams, cmp_family);
    }
    for (size_t i = 0; i < m->nfams && rv == 0; i++) {
        family *f = m->fams[i];
        if (f->nseries == 0) {
            continue;
        }
        if (f->nseries > 1) {
            qsort(f->series, f->nseries, sizeof *f->series, cmp_series);
        }
        if (*f->help != '\0') {
            if ((rv = buf_printf(out, "# HELP %s ", f->name)) != 0 ||
                (rv = append_help(out, f->help)) != 0 || (rv = buf_append_byte(out, '\n')) != 0) {
                break;
            }
        }
        if ((rv = buf_printf(out, "# TYPE %s %s\n", f->name, type_names[f->type])) != 0) {
            break;
        }
        for (size_t j = 0; j < f->nseries && rv == 0; j++) {
            const series *s = f->series[j];
            if (f->type == MT_HISTOGRAM) {
                rv = render_histogram(out, f, s);
            } else {
                rv = append_sample(out, f->name, "", s->labels, s->value);
            }
        }
    }
    return rv;
}

int metrics_render(metrics *m, buf *out)
{
    size_t start = out->len;
    pthread_mutex_lock(&m->render_mu);

    pthread_mutex_lock(&m->mu);
    metrics_collector fn = m->collector;
    void *arg = m->collector_arg;
    pthread_mutex_unlock(&m->mu);
    if (fn != NULL) {
        fn(arg, m); /* without mu: it calls metrics_gauge_set */
    }

    pthread_mutex_lock(&m->mu);
    int rv = render_locked(m, out);
    pthread_mutex_unlock(&m->mu);
    pthread_mutex_unlock(&m->render_mu);
    if (rv != 0) {
        out->len = start; /* nothing appended on failure */
        if (out->cap > 0) {
            out->data[start] = 0;
        }
        return LAPSE_ENOMEM;
    }
    return 0;
}

/* ===== Label text ===== */

char *metrics_labels(char *out, size_t outlen, ...)
{
    if (out == NULL || outlen == 0) {
        return out;
    }
    out[0] = '\0';
    size_t len = 0; /* length of the complete pairs written so far */
    va_list ap;
    va_start(ap, outlen);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (k == NULL) {
            break;
        }
        const char *v = va_arg(ap, const char *);
        if (v == NULL) {
            v = "";
        }
        size_t vlen = 0; /* escaped length */
        for (const char *p = v; *p; p++) {
            vlen += (*p == '\\' || *p == '"' || *p == '\n') ? 2 : 1;
        }
        /* separator, name, =", value, ", NUL */
        size_t pos = len;
        size_t need = (len > 0) + strlen(k) + 2 + vlen + 1 + 1;
        if (pos + need > outlen) {
            break; /* keep only whole pairs: the text stays well-formed */
        }
        if (len > 0) {
            out[pos++] = ',';
        }
        memcpy(out + pos, k, strlen(k));
        pos += strlen(k);
        out[pos++] = '=';
        out[pos++] = '"';
        for (const char *p = v; *p; p++) {
            if (*p == '\\' || *p == '"') {
                out[pos++] = '\\';
                out[pos++] = *p;
            } else if (*p == '\n') {
                out[pos++] = '\\';
                out[pos++] = 'n';
            } else {
                out[pos++] = *p;
            }
        }
        out[pos++] = '"';
        out[pos] = '\0';
        len = pos;
    }
    va_end(ap);
    return out;
}
