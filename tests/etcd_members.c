/*
 * etcd_members.c: real etcd members for tests. See etcd_members.h.
 */
#include "etcd_members.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/lapse_err.h"
#include "../etcd/etcd.h"
#include "cluster.h"

extern char **environ;

typedef struct member {
    pid_t pid; /* 0 when not running */
    int client_port;
    int peer_port;
    char host[48];     /* 127.0.0.1, or this member's entry of $LAPSE_ETCD_HOSTS */
    char url[96];      /* http://host:client_port */
    char peer_url[96]; /* http://host:peer_port */
    char data_dir[640];
    char log_path[640];
} member;

struct etcd_members {
    int n;
    char run_dir[512];
    char endpoints[ETCD_MEMBERS_MAX * 64];
    char initial[ETCD_MEMBERS_MAX * 96]; /* --initial-cluster */
    char token[96];                      /* --initial-cluster-token: unique per try */
    member m[ETCD_MEMBERS_MAX];
};

/* A free port none of m's members uses. */
static int fresh_port(const etcd_members *m)
{
    int taken[2 * ETCD_MEMBERS_MAX];
    size_t n = 0;
    for (int i = 0; i < m->n; i++) {
        taken[n++] = m->m[i].client_port;
        taken[n++] = m->m[i].peer_port;
    }
    return cluster_free_port_except(taken, n);
}

/* Sets member i's host: entry i of $LAPSE_ETCD_HOSTS ("A,B,C": one IPv4
 * address per member, set by the chaos harness's namespace mode), else
 * 127.0.0.1. Returns 0, or LAPSE_EINVAL when the list is too short or an
 * entry is not an address. */
static int member_host(member *e, int i, char *err, size_t errlen)
{
    const char *list = getenv("LAPSE_ETCD_HOSTS");
    snprintf(e->host, sizeof(e->host), "127.0.0.1");
    if (list == NULL || *list == '\0') {
        return 0;
    }
    const char *p = list;
    for (int k = 0; k < i && p != NULL; k++) {
        p = strchr(p, ',');
        p = p != NULL ? p + 1 : NULL;
    }
    size_t len = p != NULL ? strcspn(p, ",") : 0;
    if (len == 0 || len >= sizeof(e->host) || strspn(p, "0123456789.") < len) {
        snprintf(err, errlen, "LAPSE_ETCD_HOSTS=%.200s names no address for etcd member %d", list,
                 i);
        return LAPSE_EINVAL;
    }
    snprintf(e->host, sizeof(e->host), "%.*s", (int)len, p);
    return 0;
}

/* Gives every member fresh ports and an empty data dir; try makes the
 * cluster token (and so the cluster) new. */
static int plan(etcd_members *m, int try, char *err, size_t errlen)
{
    memset(m->m, 0, sizeof(m->m));
    m->endpoints[0] = m->initial[0] = '\0';
    snprintf(m->token, sizeof(m->token), "lapse-test-%d-%d", (int)getpid(), try);
    for (int i = 0; i < m->n; i++) {
        member *e = &m->m[i];
        int rv = member_host(e, i, err, errlen);
        if (rv != 0) {
            return rv;
        }
        if ((e->client_port = fresh_port(m)) == 0 || (e->peer_port = fresh_port(m)) == 0) {
            snprintf(err, errlen, "etcd members: no free ports");
            return LAPSE_EIO;
        }
        /* A copy: gcc's -Wrestrict (Debug builds) cannot tell e->host from
         * the fields written here, all of them inside *m. */
        char host[sizeof(e->host)];
        memcpy(host, e->host, sizeof(host));
        snprintf(e->url, sizeof(e->url), "http://%s:%d", host, e->client_port);
        snprintf(e->peer_url, sizeof(e->peer_url), "http://%s:%d", host, e->peer_port);
        snprintf(e->data_dir, sizeof(e->data_dir), "%s/etcd%d-%d", m->run_dir, i, try);
        snprintf(e->log_path, sizeof(e->log_path), "%s/etcd%d.log", m->run_dir, i);
        size_t k = strlen(m->endpoints);
        snprintf(m->endpoints + k, sizeof(m->endpoints) - k, "%s%s", i > 0 ? "," : "", e->url);
        k = strlen(m->initial);
        snprintf(m->initial + k, sizeof(m->initial) - k, "%sm%d=%s", i > 0 ? "," : "", i,
                 e->peer_url);
    }
    return 0;
}

static int spawn_member(etcd_members *m, int i)
{
    member *e = &m->m[i];
    const char *bin = getenv("LAPSE_ETCD");
    char name[16];
    snprintf(name, sizeof(name), "m%d", i);
    /* On a restart the data dir holds the membership and these initial
     * flags are ignored. */
    char *argv[] = {(char *)(bin != NULL && bin[0] != '\0' ? bin : "etcd"),
                    "--name", name,
                    "--data-dir", e->data_dir,
                    "--listen-client-urls", e->url,
                    "--advertise-client-urls", e->url,
                    "--listen-peer-urls", e->peer_url,
                    "--initial-advertise-peer-urls", e->peer_url,
                    "--initial-cluster", m->initial,
                    "--initial-cluster-token", m->token,
                    "--initial-cluster-state", "new",
                    "--heartbeat-interval", "50",
                    "--election-timeout", "500",
                    /* A member cut off by a partition does not depose the
                     * leader when it returns (docs/operations.md). */
                    "--pre-vote",
                    "--logger", "zap",
                    "--log-level", "warn",
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, e->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    int rv = posix_spawnp(&e->pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rv != 0) {
        e->pid = 0;
        return LAPSE_EIO;
    }
    return 0;
}

/* Whether member i is still running (reaps it when it is not). */
static int alive(etcd_members *m, int i)
{
    member *e = &m->m[i];
    int st;
    if (e->pid > 0 && waitpid(e->pid, &st, WNOHANG) == e->pid) {
        e->pid = 0;
    }
    return e->pid > 0;
}

int etcd_members_wait_healthy(etcd_members *m, int i, int timeout_ms)
{
    etcd *ec;
    char err[256];
    if (etcd_open(&ec, m->m[i].url, 300, err, sizeof(err)) != 0) {
        return LAPSE_EIO;
    }
    clock_mono deadline = clock_mono_after_ms(timeout_ms);
    int rv = LAPSE_ETIMEDOUT;
    while (alive(m, i)) {
        etcd_kvs kvs;
        if (etcd_range(ec, "/health-probe", 0, 0, 1, &kvs, err, sizeof(err)) == 0) {
            etcd_kvs_fini(&kvs);
            rv = 0;
            break;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            break;
        }
        clock_sleep_ms(50);
    }
    etcd_close(ec);
    return rv;
}

static void stop_all(etcd_members *m)
{
    for (int i = 0; i < m->n; i++) {
        if (m->m[i].pid > 0) {
            etcd_members_kill(m, i, SIGTERM);
        }
    }
}

int etcd_members_start(etcd_members **out, int n, char *err, size_t errlen)
{
    *out = NULL;
    if (n < 1 || n > ETCD_MEMBERS_MAX) {
        snprintf(err, errlen, "etcd members: %d is not 1..%d", n, ETCD_MEMBERS_MAX);
        return LAPSE_EINVAL;
    }
    etcd_members *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return LAPSE_ENOMEM;
    }
    m->n = n;
    if (cluster_mkdtemp(m->run_dir, sizeof(m->run_dir), "etcd", err, errlen) != 0) {
        free(m);
        return LAPSE_EIO;
    }
    int rv = LAPSE_EUNAVAILABLE;
    for (int try = 0; try < 3 && rv != 0; try++) {
        if ((rv = plan(m, try, err, errlen)) != 0) {
            break;
        }
        rv = 0;
        for (int i = 0; i < n && rv == 0; i++) {
            if ((rv = spawn_member(m, i)) != 0) {
                snprintf(err, errlen, "etcd members: cannot start etcd (%s): is etcd-server "
                         "installed? (deploy/install-deps.sh)", strerror(errno));
            }
        }
        for (int i = 0; i < n && rv == 0; i++) {
            if ((rv = etcd_members_wait_healthy(m, i, 15000)) != 0) {
                snprintf(err, errlen, "etcd member %d did not become healthy (log %s)", i,
                         m->m[i].log_path);
            }
        }
        if (rv != 0) {
            stop_all(m);
            if (rv == LAPSE_EIO) {
                break; /* no etcd binary: trying again will not help */
            }
        }
    }
    if (rv != 0) {
        etcd_members_free(m, 0);
        return rv;
    }
    *out = m;
    return 0;
}

void etcd_members_free(etcd_members *m, int remove_dir)
{
    if (m == NULL) {
        return;
    }
    stop_all(m);
    if (remove_dir) {
        cluster_rm_rf(m->run_dir);
    }
    free(m);
}

const char *etcd_members_endpoints(const etcd_members *m)
{
    return m->endpoints;
}

const char *etcd_members_endpoint(const etcd_members *m, int i)
{
    return i >= 0 && i < m->n ? m->m[i].url : NULL;
}

const char *etcd_members_run_dir(const etcd_members *m)
{
    return m->run_dir;
}

int etcd_members_count(const etcd_members *m)
{
    return m->n;
}

pid_t etcd_members_pid(const etcd_members *m, int i)
{
    return i >= 0 && i < m->n ? m->m[i].pid : 0;
}

int etcd_members_kill(etcd_members *m, int i, int sig)
{
    if (i < 0 || i >= m->n || !alive(m, i)) {
        return LAPSE_ESTATE;
    }
    member *e = &m->m[i];
    kill(e->pid, sig);
    if (sig != SIGKILL && sig != SIGTERM) {
        return 0;
    }
    if (sig == SIGTERM) {
        kill(e->pid, SIGCONT); /* a stopped member cannot handle SIGTERM */
        clock_mono deadline = clock_mono_after_ms(5000);
        while (alive(m, i) && clock_mono_remaining_ms(deadline) > 0) {
            clock_sleep_ms(10);
        }
        if (e->pid > 0) {
            kill(e->pid, SIGKILL);
        }
    }
    if (e->pid > 0) {
        waitpid(e->pid, NULL, 0);
        e->pid = 0;
    }
    return 0;
}

int etcd_members_restart(etcd_members *m, int i, int timeout_ms)
{
    if (i < 0 || i >= m->n || alive(m, i)) {
        return LAPSE_ESTATE;
    }
    int rv = spawn_member(m, i);
    return rv != 0 ? rv : etcd_members_wait_healthy(m, i, timeout_ms);
}
