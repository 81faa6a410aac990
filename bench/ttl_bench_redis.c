/*
 * ttl_bench_redis.c: lapse-ttl-bench's peer: Redis's active expiry under the
 * steady and burst workloads. Keys are set with PEXPIREAT and never read (a
 * read would expire them lazily); a key's lag comes from the keyspace
 * notification its active-expiry deletion publishes.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tests/cluster.h"
#include "redis_peer.h"
#include "resp.h"
#include "bench_util.h"
#include "ttl_bench_redis.h"

/* ======================================================================== */
/* Redis                                                                    */
/* ======================================================================== */

typedef struct redis_run {
    pid_t pid;
    int port;
    resp *cmd;
} redis_run;

/* effort: active-expire-effort (1 to 10), 0: Redis's default (1). */
static int redis_start(redis_run *r, int effort)
{
    char eff[16];
    r->port = cluster_free_port();
    snprintf(eff, sizeof(eff), "%d", effort > 0 ? effort : 1);
    const char *args[] = {"--save",     "",        "--appendonly",           "no",
                          "--loglevel", "warning", "--active-expire-effort", eff,
                          NULL};
    if ((r->pid = redis_spawn(r->port, args)) < 0) {
        return -1;
    }
    for (int i = 0; i < 200 && (r->cmd = resp_connect(r->port)) == NULL; i++) {
        sleep_ms(20);
    }
    if (r->cmd == NULL) {
        kill(r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
        return -1;
    }
    const char *cfg[] = {"CONFIG", "SET", "notify-keyspace-events", "Ex"};
    char err[256];
    resp_send(r->cmd, 4, cfg);
    resp_flush(r->cmd);
    return resp_read(r->cmd, err, sizeof(err));
}

static void redis_stop(redis_run *r)
{
    resp_close(r->cmd);
    kill(r->pid, SIGTERM);
    waitpid(r->pid, NULL, 0);
}

/* SET key v + PEXPIREAT key at_ms for keys prefix[from, to), pipelined;
 * at_ms NULL: SET only (a key without a TTL). */
static int redis_load(redis_run *r, const char *prefix, long long n,
                      int64_t (*at_ms)(void *, long long), void *arg, const char *what)
{
    char err[256];
    long long pending = 0;
    for (long long i = 0; i < n; i++) {
        char key[48], when[32];
        snprintf(key, sizeof(key), "%s%012lld", prefix, i);
        snprintf(when, sizeof(when), "%lld", at_ms != NULL ? (long long)at_ms(arg, i) : 0LL);
        const char *set[] = {"SET", key, "0123456789012345678901234567890123456789"};
        resp_send(r->cmd, 3, set);
        pending++;
        if (at_ms != NULL) {
            const char *exp[] = {"PEXPIREAT", key, when};
            resp_send(r->cmd, 3, exp);
            pending++;
        }
        if (pending >= 20000 || i == n - 1) {
            resp_flush(r->cmd);
            for (; pending > 0; pending--) {
                if (resp_read(r->cmd, err, sizeof(err)) != 0) {
                    fprintf(stderr, "redis: %s\n", err);
                    return -1;
                }
            }
            if (i % 100000 < 10000) {
                fprintf(stderr, "\rloading redis %s: %lld/%lld", what, i + 1, n);
            }
        }
    }
    fprintf(stderr, "\rloading redis %s: %lld/%lld\n", what, n, n);
    return 0;
}

static int64_t far_future_ms(void *arg, long long i)
{
    (void)arg;
    (void)i;
    return wall_ms() + 30LL * 86400 * 1000;
}

static int64_t planned_ms(void *arg, long long i)
{
    return due_s_of(arg, i) * 1000;
}

/* Collects expired notifications for keys prefix*; lag = receipt - due. */
static size_t redis_watch(resp *sub, const char *prefix, const due_plan *plan, long long total,
                          int64_t *lag, int64_t give_up_ms, int64_t *t_at /* per count: ms */)
{
    size_t seen = 0;
    size_t plen = strlen(prefix);
    while ((long long)seen < total && wall_ms() < give_up_ms) {
        char key[128];
        int rv = resp_read_message(sub, 200, key, sizeof(key));
        if (rv < 0) {
            break;
        }
        if (rv == 1 || strncmp(key, prefix, plen) != 0) {
            continue;
        }
        long long i = atoll(key + plen);
        int64_t now = wall_ms();
        if (lag != NULL) {
            lag[seen] = now - due_s_of(plan, i) * 1000;
        }
        if (t_at != NULL) {
            t_at[seen] = now - plan->t0_ms;
        }
        seen++;
    }
    return seen;
}

static resp *redis_subscribe(redis_run *r)
{
    resp *sub = resp_connect(r->port);
    const char *cmd[] = {"SUBSCRIBE", "__keyevent@0__:expired"};
    char ack[64];
    if (sub == NULL || resp_send(sub, 2, cmd) != 0 || resp_flush(sub) != 0 ||
        resp_read_message(sub, 5000, ack, sizeof(ack)) != 0) {
        resp_close(sub);
        return NULL;
    }
    return sub;
}

void redis_steady(const config *cfg)
{
    redis_run r;
    if (redis_start(&r, 0) != 0) {
        fprintf(stderr, "redis: cannot start redis-server\n");
        return;
    }
    resp *sub = redis_subscribe(&r);
    long long total = cfg->rate * cfg->seconds;
    if (sub == NULL ||
        redis_load(&r, "long", cfg->long_lived, far_future_ms, NULL, "long-lived") != 0) {
        goto out;
    }
    due_plan plan = {(wall_ms() / 1000 + 3 + total / 100000) * 1000, (double)cfg->rate / 1000};
    if (redis_load(&r, "due", total, planned_ms, &plan, "due") != 0) {
        goto out;
    }
    int64_t *lag = malloc((size_t)total * sizeof(*lag));
    int64_t end = due_s_of(&plan, total - 1) * 1000;
    size_t seen = redis_watch(sub, "due", &plan, total, lag, end + 180000, NULL);
    print_lags("redis", "steady", lag, seen, (size_t)total);
    if ((long long)seen < total) {
        printf("redis  steady   %lld of %lld due items still present 180 s after the last due "
               "instant\n",
               total - (long long)seen, total);
    }
    free(lag);
out:
    resp_close(sub);
    redis_stop(&r);
}

void redis_burst(const config *cfg)
{
    redis_run r;
    if (redis_start(&r, 0) != 0) {
        fprintf(stderr, "redis: cannot start redis-server\n");
        return;
    }
    resp *sub = redis_subscribe(&r);
    due_plan plan = {(wall_ms() / 1000 + 4 + cfg->burst / 100000) * 1000, 1e12};
    if (sub == NULL || redis_load(&r, "burst", cfg->burst, planned_ms, &plan, "burst") != 0) {
        goto out;
    }
    int64_t *at = malloc((size_t)cfg->burst * sizeof(*at));
    size_t seen = redis_watch(sub, "burst", &plan, cfg->burst, NULL, plan.t0_ms + 120000, at);
    long long n = cfg->burst;
    printf("redis  burst    %lld items due in one second:", n);
    /* A share not reached before the wait ended has no time: say so. */
    const struct {
        const char *name;
        long long count;
    } shares[] = {{"50%", n / 2 + 1}, {"99%", n * 99 / 100}, {"100%", n}};
    for (size_t k = 0; k < sizeof(shares) / sizeof(shares[0]); k++) {
        if ((long long)seen >= shares[k].count && shares[k].count > 0) {
            printf(" %s after %lld ms,", shares[k].name, (long long)at[shares[k].count - 1]);
        } else {
            printf(" %s not reached,", shares[k].name);
        }
    }
    printf(" %zu of %lld expirations seen%s\n", seen, n,
           (long long)seen < n ? ": the wait ended 120 s after the due instant" : "");
    free(at);
out:
    resp_close(sub);
    redis_stop(&r);
}

/* One fair run: --rate keys due for --seconds among --long-lived keys that
 * carry a far-future TTL too (volatile_all) or none, Redis at
 * active-expire-effort effort. Every due key is observed by its expired
 * event. Returns the p99 lag (ms), or -1 when not every due key's event
 * came within 120 s of the last due instant. */
static int64_t redis_fair(const config *cfg, int volatile_all, int effort)
{
    redis_run r;
    int64_t p99 = -1;
    char what[48];
    snprintf(what, sizeof(what), "fair %s e%d", volatile_all ? "all-vol" : "due-vol", effort);
    if (redis_start(&r, effort) != 0) {
        fprintf(stderr, "redis: cannot start redis-server\n");
        return -1;
    }
    resp *sub = redis_subscribe(&r);
    long long total = cfg->rate * cfg->seconds;
    if (sub == NULL || redis_load(&r, "long", cfg->long_lived, volatile_all ? far_future_ms : NULL,
                                  NULL, "long-lived") != 0) {
        goto out;
    }
    due_plan plan = {(wall_ms() / 1000 + 3 + total / 100000) * 1000, (double)cfg->rate / 1000};
    if (redis_load(&r, "due", total, planned_ms, &plan, "due") != 0) {
        goto out;
    }
    int64_t *lag = malloc((size_t)total * sizeof(*lag));
    int64_t end = due_s_of(&plan, total - 1) * 1000;
    size_t seen = redis_watch(sub, "due", &plan, total, lag, end + 120000, NULL);
    printf("redis  %-21s %s, active-expire-effort %d:\n", what,
           volatile_all ? "every key has a TTL" : "only the due keys have a TTL", effort);
    print_lags("redis", what, lag, seen, (size_t)total);
    if ((long long)seen == total) {
        p99 = lag[(size_t)((double)(seen - 1) * 0.99)];
    } else {
        printf("redis  %-21s the wait ended 120 s after the last due instant with %zu of %lld "
               "expired events\n",
               what, seen, total);
    }
    free(lag);
out:
    resp_close(sub);
    redis_stop(&r);
    return p99;
}

void redis_fair_all(const config *cfg, int64_t lapse_p99)
{
    int64_t best = -1;
    const char *best_case = "";
    static const struct {
        int volatile_all, effort;
        const char *name;
    } cases[] = {{0, 1, "only due keys volatile, effort 1"},
                 {0, 10, "only due keys volatile, effort 10"},
                 {1, 1, "every key volatile, effort 1"},
                 {1, 10, "every key volatile, effort 10"}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        int64_t p99 = redis_fair(cfg, cases[k].volatile_all, cases[k].effort);
        if (p99 >= 0 && (best < 0 || p99 < best)) {
            best = p99;
            best_case = cases[k].name;
        }
    }
    if (best >= 0 && lapse_p99 > 0) {
        printf("fair   p99: Lapse %lld ms, Redis's best case (%s) %lld ms: Redis / Lapse = %.1fx\n",
               (long long)lapse_p99, best_case, (long long)best, (double)best / (double)lapse_p99);
    } else {
        printf("fair   no ratio: Lapse p99 %lld ms, Redis's best p99 %lld ms (-1: not every due "
               "item observed)\n",
               (long long)lapse_p99, (long long)best);
    }
}
