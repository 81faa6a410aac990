/* metrics_test: the registry renders exact Prometheus text (grouping,
 * cumulative buckets, label escaping, value spelling), ignores and counts
 * misuse, stays exact under concurrent updates, calls its collector, and its
 * output passes `promtool check metrics` when promtool is installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "lapse_err.h"
#include "metrics.h"

extern char **environ;

#define PROMTOOL "/usr/bin/promtool"

static const double lag_bounds[] = {0.1, 1, 10};

/* Renders m into a fresh string; caller frees. */
static char *render(metrics *m)
{
    buf b;
    buf_init(&b);
    int rv = metrics_render(m, &b);
    if (rv != 0) {
        fail_msg("metrics_render: %s", lapse_strerror(rv));
    }
    return buf_detach(&b);
}

static void renders_exact_text(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    assert_non_null(m);
    char *empty = render(m);
    assert_string_equal(empty, "");
    free(empty);
    char la[64], lb[64];
    metrics_labels(la, sizeof la, "table", "a", NULL);
    metrics_labels(lb, sizeof lb, "table", "b", NULL);

    metrics_counter_add(m, "lapse_rpc_requests_total", "RPC requests.", NULL, 1);
    metrics_counter_add(m, "lapse_rpc_requests_total", "ignored later help", "", 2);
    metrics_counter_add(m, "lapse_ttl_deleted_items_total", "Items deleted.", lb, 1.5);
    metrics_counter_add(m, "lapse_ttl_deleted_items_total", "Items deleted.", la, 2);
    metrics_gauge_set(m, "lapse_clock_skew_seconds", "Clock skew.", NULL, 7);
    metrics_gauge_set(m, "lapse_clock_skew_seconds", "Clock skew.", NULL, -0.25);
    const char *lag = "lapse_ttl_deletion_lag_seconds";
    metrics_histogram_observe(m, lag, "Lag.", lag_bounds, 3, la, 0.25);
    metrics_histogram_observe(m, lag, "Lag.", lag_bounds, 3, la, 0.5);
    metrics_histogram_observe(m, lag, "Lag.", lag_bounds, 3, la, 0.0625);
    metrics_histogram_observe(m, lag, "Lag.", lag_bounds, 3, la, 20);
    metrics_histogram_observe(m, lag, "Lag.", lag_bounds, 3, lb, 1); /* le is inclusive */

    char *text = render(m);
    const char *want = "# HELP lapse_clock_skew_seconds Clock skew.\n"
                       "# TYPE lapse_clock_skew_seconds gauge\n"
                       "lapse_clock_skew_seconds -0.25\n"
                       "# HELP lapse_rpc_requests_total RPC requests.\n"
                       "# TYPE lapse_rpc_requests_total counter\n"
                       "lapse_rpc_requests_total 3\n"
                       "# HELP lapse_ttl_deleted_items_total Items deleted.\n"
                       "# TYPE lapse_ttl_deleted_items_total counter\n"
                       "lapse_ttl_deleted_items_total{table=\"a\"} 2\n"
                       "lapse_ttl_deleted_items_total{table=\"b\"} 1.5\n"
                       "# HELP lapse_ttl_deletion_lag_seconds Lag.\n"
                       "# TYPE lapse_ttl_deletion_lag_seconds histogram\n"
                       "lapse_ttl_deletion_lag_seconds_bucket{table=\"a\",le=\"0.1\"} 1\n"
                       "lapse_ttl_deletion_lag_seconds_bucket{table=\"a\",le=\"1\"} 3\n"
                       "lapse_ttl_deletion_lag_seconds_bucket{table=\"a\",le=\"10\"} 3\n"
                       "lapse_ttl_deletion_lag_seconds_bucket{table=\"a\",le=\"+Inf\"} 4\n"
                       "lapse_ttl_deletion_lag_seconds_sum{table=\"a\"} 20.8125\n"
                       "lapse_ttl_deletion_lag_seconds_count{table=\"a\"} 4\n"
                       "lapse_ttl_deletion_lag_seconds_bucket{table=\"b\",le=\"0.1\"} 0\n"
                       "lapse_ttl_deletion_lag_seconds_bucket{table=\"b\",le=\"1\"} 1\n"
                       "lapse_ttl_deletion_lag_seconds_bucket{table=\"b\",le=\"10\"} 1\n"
                       "lapse_ttl_deletion_lag_seconds_bucket{table=\"b\",le=\"+Inf\"} 1\n"
                       "lapse_ttl_deletion_lag_seconds_sum{table=\"b\"} 1\n"
                       "lapse_ttl_deletion_lag_seconds_count{table=\"b\"} 1\n";
    assert_string_equal(text, want);
    free(text);

    /* Rendering appends, and twice gives the same text. */
    buf b;
    buf_init(&b);
    assert_int_equal(buf_append_str(&b, "x\n"), 0);
    assert_int_equal(metrics_render(m, &b), 0);
    assert_string_equal((char *)b.data + 2, want);
    buf_fini(&b);
    metrics_free(m);
    metrics_free(NULL);
}

static void unlabelled_histogram_and_values(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    assert_non_null(m);
    /* A trailing +Inf bound is the implicit one; bounds given later are ignored. */
    const double b1[] = {0.5, INFINITY};
    const double b2[] = {1, 2, 3};
    metrics_histogram_observe(m, "h_seconds", "H.", b1, 2, NULL, 0.5);
    metrics_histogram_observe(m, "h_seconds", "H.", b2, 3, NULL, 2);
    metrics_gauge_set(m, "g_nan", "g.", NULL, NAN);
    metrics_gauge_set(m, "g_pinf", "g.", NULL, INFINITY);
    metrics_gauge_set(m, "g_ninf", "g.", NULL, -INFINITY);
    metrics_gauge_set(m, "g_big", "g.", NULL, 1e21);
    metrics_gauge_set(m, "g_tenth", "g.", NULL, 0.1);
    metrics_gauge_set(m, "g_third", "g.", NULL, 1.0 / 3);
    metrics_gauge_set(m, "g_negzero", "g.", NULL, -0.0);
    metrics_gauge_set(m, "g_int", "g.", NULL, 123456789012.0);
    metrics_gauge_set(m, "g_2p53", "g.", NULL, 9007199254740992.0);
    metrics_gauge_set(m, "g_tiny", "g.", NULL, 5e-324);
    metrics_gauge_set(m, "g_nohelp", NULL, NULL, 1);
    metrics_gauge_set(m, "g_helpesc", "a\\b\nc \"q\"", NULL, 1);
    char *text = render(m);
    const char *want = "# HELP g_2p53 g.\n# TYPE g_2p53 gauge\ng_2p53 9007199254740992\n"
                       "# HELP g_big g.\n# TYPE g_big gauge\ng_big 1e+21\n"
                       "# HELP g_helpesc a\\\\b\\nc \"q\"\n# TYPE g_helpesc gauge\ng_helpesc 1\n"
                       "# HELP g_int g.\n# TYPE g_int gauge\ng_int 123456789012\n"
                       "# HELP g_nan g.\n# TYPE g_nan gauge\ng_nan NaN\n"
                       "# HELP g_negzero g.\n# TYPE g_negzero gauge\ng_negzero 0\n"
                       "# HELP g_ninf g.\n# TYPE g_ninf gauge\ng_ninf -Inf\n"
                       "# TYPE g_nohelp gauge\ng_nohelp 1\n"
                       "# HELP g_pinf g.\n# TYPE g_pinf gauge\ng_pinf +Inf\n"
                       "# HELP g_tenth g.\n# TYPE g_tenth gauge\ng_tenth 0.1\n"
                       "# HELP g_third g.\n# TYPE g_third gauge\ng_third 0.3333333333333333\n"
                       "# HELP g_tiny g.\n# TYPE g_tiny gauge\ng_tiny 4.94065645841247e-324\n"
                       "# HELP h_seconds H.\n# TYPE h_seconds histogram\n"
                       "h_seconds_bucket{le=\"0.5\"} 1\n"
                       "h_seconds_bucket{le=\"+Inf\"} 2\n"
                       "h_seconds_sum 2.5\n"
                       "h_seconds_count 2\n";
    assert_string_equal(text, want);
    free(text);
    metrics_free(m);
}

static void labels_are_escaped(void **state)
{
    (void)state;
    char out[128];
    assert_ptr_equal(metrics_labels(out, sizeof out, "table", "a\"b\\c\nd", "reason", "x", NULL),
                     out);
    assert_string_equal(out, "table=\"a\\\"b\\\\c\\nd\",reason=\"x\"");
    char none[4];
    assert_string_equal(metrics_labels(none, sizeof none, NULL), "");

    /* Too small: only whole pairs are kept, so the text stays well-formed. */
    char small[16];
    assert_string_equal(metrics_labels(small, sizeof small, "a", "1", "bb", "22222222", NULL),
                        "a=\"1\"");
    /* Exactly fitting: a="1" is 5 bytes plus the NUL. */
    char exact[6];
    assert_string_equal(metrics_labels(exact, sizeof exact, "a", "1", NULL), "a=\"1\"");

    /* Escaped labels render verbatim and keep series apart. */
    metrics *m = metrics_new();
    assert_non_null(m);
    metrics_counter_add(m, "c_total", "C.", out, 1);
    metrics_counter_add(m, "c_total", "C.",
                        metrics_labels(small, sizeof small, "table", "a\"b", NULL), 2);
    char *text = render(m);
    assert_string_equal(text, "# HELP c_total C.\n# TYPE c_total counter\n"
                              "c_total{table=\"a\\\"b\"} 2\n"
                              "c_total{table=\"a\\\"b\\\\c\\nd\",reason=\"x\"} 1\n");
    free(text);
    metrics_free(m);
}

static void misuse_is_ignored_and_counted(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    assert_non_null(m);
    metrics_counter_add(m, "x_total", "X.", NULL, 5);
    metrics_gauge_set(m, "x_total", "X.", NULL, 1);                        /* type clash */
    metrics_gauge_set(m, "x_total", "X.", "table=\"t\"", 1);               /* clash, new series */
    metrics_histogram_observe(m, "x_total", "X.", lag_bounds, 3, NULL, 1); /* clash */
    metrics_counter_add(m, "x_total", "X.", NULL, -1);                     /* counters only grow */
    metrics_counter_add(m, "x_total", "X.", NULL, NAN);
    metrics_gauge_set(m, "bad-name", "B.", NULL, 1);
    metrics_gauge_set(m, "9starts_with_digit", "B.", NULL, 1);
    metrics_gauge_set(m, NULL, "B.", NULL, 1);
    metrics_gauge_set(m, "g", "G.", "table=unquoted", 1);
    metrics_gauge_set(m, "g", "G.", "table=\"unterminated", 1);
    metrics_gauge_set(m, "g", "G.", "__name__=\"x\"", 1);
    metrics_histogram_observe(m, "h", "H.", lag_bounds, 3, "le=\"1\"", 1); /* le is reserved */
    const double unsorted[] = {1, 0.5};
    metrics_histogram_observe(m, "h2", "H.", unsorted, 2, NULL, 1);
    metrics_histogram_observe(m, "h3", "H.", lag_bounds, 3, NULL, NAN);
    metrics_gauge_set(m, "lapse_metrics_misuse_total", "M.", NULL,
                      1); /* clash on the misuse counter */
    char *text = render(m);
    assert_string_equal(text, "# HELP h3 H.\n# TYPE h3 histogram\n"
                              "h3_bucket{le=\"0.1\"} 0\n"
                              "h3_bucket{le=\"1\"} 0\n"
                              "h3_bucket{le=\"10\"} 0\n"
                              "h3_bucket{le=\"+Inf\"} 0\n"
                              "h3_sum 0\n"
                              "h3_count 0\n"
                              "# HELP lapse_metrics_misuse_total Metric updates ignored because "
                              "of a type clash or a malformed name, label or value.\n"
                              "# TYPE lapse_metrics_misuse_total counter\n"
                              "lapse_metrics_misuse_total 15\n"
                              "# HELP x_total X.\n# TYPE x_total counter\nx_total 5\n");
    free(text);
    metrics_free(m);
}

#define THREADS 4
#define ADDS 10000

typedef struct worker {
    metrics *m;
    int id;
} worker;

static void *adder(void *arg)
{
    worker *w = arg;
    char labels[32];
    char id[8];
    snprintf(id, sizeof id, "%d", w->id);
    metrics_labels(labels, sizeof labels, "thread", id, NULL);
    for (int i = 0; i < ADDS; i++) {
        metrics_counter_add(w->m, "adds_total", "Adds.", NULL, 1);
        metrics_histogram_observe(w->m, "obs_seconds", "Obs.", lag_bounds, 3, labels, 0.5);
    }
    return NULL;
}

static void concurrent_adds_are_exact(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    assert_non_null(m);
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){m, i};
        assert_int_equal(pthread_create(&t[i], NULL, adder, &w[i]), 0);
    }
    for (int i = 0; i < 20; i++) { /* renders race with the updates */
        free(render(m));
    }
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
    }
    char *text = render(m);
    assert_non_null(strstr(text, "\nadds_total 40000\n"));
    for (int i = 0; i < THREADS; i++) {
        char line[128];
        snprintf(line, sizeof line, "\nobs_seconds_count{thread=\"%d\"} 10000\n", i);
        assert_non_null(strstr(text, line));
        snprintf(line, sizeof line, "\nobs_seconds_sum{thread=\"%d\"} 5000\n", i);
        assert_non_null(strstr(text, line));
    }
    free(text);
    metrics_free(m);
}

static void collect(void *arg, metrics *m)
{
    int *calls = arg;
    ++*calls;
    metrics_gauge_set(m, "lapse_ttl_expired_backlog_items", "Backlog.", "table=\"t\"", *calls);
}

static void collector_runs_on_render(void **state)
{
    (void)state;
    metrics *m = metrics_new();
    assert_non_null(m);
    int calls = 0;
    metrics_set_collector(m, collect, &calls);
    free(render(m));
    char *text = render(m);
    assert_int_equal(calls, 2);
    assert_string_equal(text, "# HELP lapse_ttl_expired_backlog_items Backlog.\n"
                              "# TYPE lapse_ttl_expired_backlog_items gauge\n"
                              "lapse_ttl_expired_backlog_items{table=\"t\"} 2\n");
    free(text);
    metrics_set_collector(m, NULL, NULL);
    free(render(m));
    assert_int_equal(calls, 2);
    metrics_free(m);
}

/* ===== promtool ===== */

/* Runs `promtool check metrics` on text; returns its exit status (or -1) and
 * its combined stdout/stderr in *output (caller frees). posix_spawn, never
 * fork: the project's rule for processes that may use NNG. */
static int promtool_check(const char *text, char **output)
{
    int in[2], out[2];
    if (pipe(in) != 0) {
        return -1;
    }
    if (pipe(out) != 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, out[1], 2);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    char *argv[] = {PROMTOOL, "check", "metrics", NULL};
    pid_t pid;
    int rv = posix_spawn(&pid, PROMTOOL, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rv != 0) {
        close(in[1]);
        close(out[0]);
        return -1;
    }
    /* The text is far below a pipe's capacity, so writing it all before
     * reading cannot deadlock even if promtool answers early. */
    size_t len = strlen(text);
    for (size_t off = 0; off < len;) {
        ssize_t n = write(in[1], text + off, len - off);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        off += (size_t)n;
    }
    close(in[1]);
    buf b;
    buf_init(&b);
    char tmp[4096];
    for (;;) {
        ssize_t n = read(out[0], tmp, sizeof tmp);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        buf_append(&b, tmp, (size_t)n);
    }
    close(out[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            buf_fini(&b);
            return -1;
        }
    }
    *output = buf_detach(&b);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void promtool_accepts_output(void **state)
{
    (void)state;
    if (access(PROMTOOL, X_OK) != 0) {
        skip(); /* deploy/install-deps.sh installs it (Debian prometheus) */
    }
    metrics *m = metrics_new();
    assert_non_null(m);
    char l1[128], l2[128];
    metrics_labels(l1, sizeof l1, "table", "SessionData", NULL);
    metrics_labels(l2, sizeof l2, "table", "we\"ird\\ta\nble", "reason", "not_a_number", NULL);
    metrics_counter_add(m, "lapse_ttl_deleted_items_total", "Items deleted by TTL.", l1, 12);
    metrics_counter_add(m, "lapse_rpc_requests_total", "RPC requests.", NULL, 3);
    metrics_gauge_set(m, "lapse_ttl_ignored_items", "Items whose TTL attribute is ignored.", l2, 4);
    metrics_gauge_set(m, "lapse_clock_skew_seconds", "Clock skew.", NULL, -0.001);
    metrics_gauge_set(m, "lapse_ttl_oldest_undeleted_age_seconds", "Oldest.", l1, NAN);
    metrics_gauge_set(m, "lapse_ttl_config_version", "Config version.", l1, INFINITY);
    metrics_gauge_set(m, "lapse_big", "Big.", NULL, 1e300);
    for (int i = 0; i < 10; i++) {
        metrics_histogram_observe(m, "lapse_ttl_deletion_lag_seconds", "Lag.", lag_bounds, 3, NULL,
                                  i * 0.37);
        metrics_histogram_observe(m, "lapse_ttl_deletion_lag_seconds", "Lag.", lag_bounds, 3, l1,
                                  i * 3.1);
    }
    metrics_gauge_set(m, "lapse_ttl_deletion_lag_seconds", "clash", NULL, 1); /* misuse line */
    char *text = render(m);
    char *output = NULL;
    int rv = promtool_check(text, &output);
    if (rv != 0 || output == NULL || output[0] != '\0') {
        fail_msg("promtool check metrics: exit %d, output:\n%s\ninput:\n%s", rv,
                 output ? output : "", text);
    }
    free(output);

    /* The check is not vacuous: promtool reports a counter without _total. */
    output = NULL;
    rv = promtool_check("# HELP bad Bad.\n# TYPE bad counter\nbad 1\n", &output);
    assert_true(rv != 0 || (output != NULL && output[0] != '\0'));
    free(output);
    free(text);
    metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(renders_exact_text),
        cmocka_unit_test(unlabelled_histogram_and_values),
        cmocka_unit_test(labels_are_escaped),
        cmocka_unit_test(misuse_is_ignored_and_counted),
        cmocka_unit_test(concurrent_adds_are_exact),
        cmocka_unit_test(collector_runs_on_render),
        cmocka_unit_test(promtool_accepts_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
