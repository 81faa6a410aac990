/*
 * demo_test: `make demo` (deploy/demo.sh) works: run against a real
 * three-node cluster on free ports, it must exit 0 after every SessionData
 * session was deleted and its TTL delete arrived on the stream, and what it
 * printed must show both. It is run twice, as an operator might: the second
 * run drops the first run's table. The first run finds the cluster through
 * LAPSE_COORDINATOR, the second through LAPSE_PORT alone, as after
 * `LAPSE_PORT=N make cluster`.
 */
#include "testutil.h"

#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef LAPSE_SOURCE_DIR
#error "LAPSE_SOURCE_DIR must name the source tree"
#endif

#define SESSIONS 6

/* Runs the demo with its output in out (caller frees); returns its status.
 * by_port: name the cluster by LAPSE_PORT only, else by LAPSE_COORDINATOR. */
static int run_demo(cluster *c, int by_port, char **out)
{
    const char *bin = getenv("LAPSE_BIN_DIR") != NULL ? getenv("LAPSE_BIN_DIR") : "./build/bin";
    const char *url = cluster_coordinator_url(c);
    const char *colon = strrchr(url, ':');
    assert_non_null(colon);
    char where[300];
    if (by_port) {
        snprintf(where, sizeof where, "env -u LAPSE_COORDINATOR LAPSE_PORT=%s", colon + 1);
    } else {
        snprintf(where, sizeof where, "env -u LAPSE_PORT LAPSE_COORDINATOR='%s'", url);
    }
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof(cmd), "%s DEMO_SESSIONS=%d %s/deploy/demo.sh '%s' 2>&1", where, SESSIONS,
             LAPSE_SOURCE_DIR, bin);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    buf[len] = 0;
    *out = buf;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static size_t count(const char *hay, const char *needle)
{
    size_t k = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle)) {
        k++;
    }
    return k;
}

static void demo_runs_twice(void **state)
{
    (void)state;
    cluster *c = start_cluster(3, NULL);
    for (int run = 1; run <= 2; run++) {
        char *out = NULL;
        int rv = run_demo(c, run == 2, &out);
        if (rv != 0) {
            fail_msg("demo run %d exited %d:\n%s", run, rv, out);
        }
        /* Each TTL delete arrived once, tagged as the TTL service's. */
        size_t ttl = count(out, "\"principalId\":\"lapse.ttl\"");
        if (ttl != SESSIONS + 1) { /* + the closing sentence */
            fail_msg("demo run %d printed %zu lapse.ttl records, want %d:\n%s", run, ttl - 1,
                     SESSIONS, out);
        }
        assert_non_null(strstr(out, " 0 sessions left"));
        if (run == 2) {
            assert_non_null(strstr(out, "Dropping the previous demo's SessionData"));
        }
        free(out);
    }
    int crashed = cluster_crashed(c, NULL);
    cluster_free(c, crashed < 0);
    assert_true(crashed < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(demo_runs_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
