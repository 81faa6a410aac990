/*
 * cluster.c: real daemons for black-box tests. See cluster.h.
 */
#include "cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../client/lapse.h"
#include "../common/lapse_err.h"
#include "../etcd/etcd.h"
#include "../rpc/rpc.h"
#include "cluster_int.h"

extern char **environ;

/* Whether process idx is a coordinator. */
static int is_coord(const cluster *c, int idx)
{
    return idx == 0 || idx > c->nodes;
}

/* Rebuilds coord_urls from the coordinators' current ports. */
static void list_coordinators(cluster *c)
{
    c->coord_urls[0] = '\0';
    for (int k = 0; k < c->coordinators; k++) {
        size_t n = strlen(c->coord_urls);
        snprintf(c->coord_urls + n, sizeof(c->coord_urls) - n, "%s%s", k > 0 ? "," : "",
                 c->procs[cluster_coordinator_index(c, k)].url);
    }
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int port_of_addr(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    return colon != NULL ? atoi(colon + 1) : 0;
}

/* A free port that no process of c uses yet. */
static int distinct_free_port(const cluster *c)
{
    int taken[2 * (CLUSTER_MAX_NODES + CLUSTER_MAX_COORDINATORS)];
    size_t n = 0;
    for (int i = 0; i < c->nprocs; i++) {
        taken[n++] = c->procs[i].port;
        taken[n++] = port_of_addr(c->procs[i].metrics_addr);
    }
    return cluster_free_port_except(taken, n);
}

/* Gives process idx fresh ports (its metrics port too when it has one). */
static void pick_ports(cluster *c, int idx, int metrics)
{
    proc *p = &c->procs[idx];
    p->port = 0;
    p->metrics_addr[0] = '\0';
    p->port = distinct_free_port(c);
    snprintf(p->url, sizeof(p->url), "tcp://127.0.0.1:%d", p->port);
    if (metrics) {
        snprintf(p->metrics_addr, sizeof(p->metrics_addr), "127.0.0.1:%d", distinct_free_port(c));
    }
}

/* Notices processes that exited by themselves, without blocking. */
static void reap(cluster *c)
{
    for (int i = 0; i < c->nprocs; i++) {
        proc *p = &c->procs[i];
        int st;
        if (p->pid > 0 && waitpid(p->pid, &st, WNOHANG) == p->pid) {
            p->pid = 0;
            p->exit_status = st;
            if (!p->killed) {
                p->crashed = 1;
                p->crash_status = st;
                p->crash_count++;
            }
        }
    }
}

static int spawn_proc(cluster *c, int idx)
{
    proc *p = &c->procs[idx];
    char bin[640], id[16];
    char *argv[40];
    int argc = 0;
    char extra[512];

    if (is_coord(c, idx)) {
        snprintf(bin, sizeof(bin), "%s/lapse-coordinator", c->bin_dir);
        argv[argc++] = bin;
        argv[argc++] = "--listen";
        argv[argc++] = p->url;
        if (c->etcd != NULL) {
            argv[argc++] = "--etcd";
            argv[argc++] = (char *)etcd_members_endpoints(c->etcd);
            argv[argc++] = "--cluster-name";
            argv[argc++] = CLUSTER_NAME;
        } else {
            argv[argc++] = "--data";
            argv[argc++] = p->data_dir;
        }
        snprintf(extra, sizeof(extra), "%s", c->coord_args);
    } else {
        snprintf(bin, sizeof(bin), "%s/lapse-node", c->bin_dir);
        snprintf(id, sizeof(id), "%d", idx);
        argv[argc++] = bin;
        argv[argc++] = "--id";
        argv[argc++] = id;
        argv[argc++] = "--listen";
        argv[argc++] = p->url;
        argv[argc++] = "--coordinator";
        argv[argc++] = c->coord_urls;
        argv[argc++] = "--data";
        argv[argc++] = p->data_dir;
        if (c->etcd != NULL) { /* liveness by an etcd lease */
            argv[argc++] = "--etcd";
            argv[argc++] = (char *)etcd_members_endpoints(c->etcd);
            argv[argc++] = "--cluster-name";
            argv[argc++] = CLUSTER_NAME;
        }
        if (p->metrics_addr[0] != '\0') {
            argv[argc++] = "--metrics-listen";
            argv[argc++] = p->metrics_addr;
        }
        if (c->zone[idx][0] != '\0') {
            argv[argc++] = "--zone";
            argv[argc++] = c->zone[idx];
        }
        snprintf(extra, sizeof(extra), "%s", c->node_args);
    }
    for (char *save = NULL, *tok = strtok_r(extra, " ", &save); tok && argc < 38;
         tok = strtok_r(NULL, " ", &save)) {
        argv[argc++] = tok;
    }
    argv[argc] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, p->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    int rv = posix_spawn(&p->pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rv != 0) {
        p->pid = 0;
        return LAPSE_EIO;
    }
    p->killed = 0;
    if (!c->quiet) {
        fprintf(stderr, "cluster: started %s pid %d on %s\n", is_coord(c, idx) ? "coordinator" : id,
                (int)p->pid, p->url);
    }
    return 0;
}

static int count_up(const char *status_json)
{
    json_error_t jerr;
    json_t *root = json_loads(status_json, 0, &jerr);
    int up = 0;
    if (root == NULL) {
        return -1;
    }
    json_t *nodes = json_object_get(root, "Nodes");
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n)
    {
        const char *st = json_string_value(json_object_get(n, "State"));
        if (st != NULL && strcmp(st, "UP") == 0) {
            up++;
        }
    }
    json_decref(root);
    return up;
}

const char *cluster_node_state(lapse_client *cl, uint32_t id, char *out, size_t len)
{
    char *js = NULL;
    lapse_error e;
    snprintf(out, len, "%s", "");
    if (lapse_cluster_status(cl, &js, &e) != 0) {
        return out;
    }
    json_t *root = json_loads(js, 0, NULL);
    lapse_free(js);
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(root, "Nodes"), i, n)
    {
        if (json_integer_value(json_object_get(n, "NodeId")) == (json_int_t)id) {
            const char *st = json_string_value(json_object_get(n, "State"));
            snprintf(out, len, "%s", st != NULL ? st : "");
        }
    }
    json_decref(root);
    return out;
}

int cluster_wait_up(cluster *c, int nodes, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    lapse_client *cl = NULL;
    int rv = LAPSE_ETIMEDOUT;
    while (now_ms() < deadline) {
        lapse_error e;
        char *js = NULL;
        if (cl == NULL && lapse_connect(&cl, c->coord_urls, &e) != 0) {
            cl = NULL;
        }
        if (cl != NULL) {
            lapse_set_timeout_ms(cl, 1000);
            if (lapse_cluster_status(cl, &js, &e) == 0) {
                int up = count_up(js);
                lapse_free(js);
                if (up >= nodes) {
                    rv = 0;
                    break;
                }
            }
        }
        sleep_ms(50);
    }
    lapse_close(cl);
    return rv;
}

static int log_says_in_use(const char *path)
{
    char buf[8192];
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, "in use") != NULL;
}

/* Process i exited during start-up: when it lost a port to another process
 * (its log says "in use"), forgets that exit and picks it fresh ports.
 * Returns 0, or -1 when it exited for another reason or clashed too often. */
static int clash_reset(cluster *c, int i, int metrics)
{
    proc *p = &c->procs[i];
    if (++p->port_retries > 3 || !log_says_in_use(p->log_path)) {
        return -1;
    }
    fprintf(stderr, "cluster: %s %d lost its port to another process: new ports\n",
            is_coord(c, i) ? "coordinator" : "node", i);
    p->crashed = 0; /* not a crash of the daemon's making */
    p->crash_count = 0;
    p->crash_status = 0;
    pick_ports(c, i, !is_coord(c, i) && metrics);
    list_coordinators(c);
    return 0;
}

/* Restarts, on fresh ports, the processes that exited during start-up
 * because a port was taken; a new coordinator address restarts the nodes
 * too (each once, with new ports of its own if it had clashed as well).
 * Returns 0, or -1 when a process exited for another reason or clashed too
 * often (start-up has failed). */
static int respawn_port_clashes(cluster *c, int metrics)
{
    reap(c);
    for (int i = 0; i < c->nprocs; i++) {
        if (!c->procs[i].crashed) {
            continue;
        }
        if (clash_reset(c, i, metrics) != 0 || spawn_proc(c, i) != 0) {
            return -1;
        }
        for (int k = 1; is_coord(c, i) && k <= c->nodes; k++) {
            if (c->procs[k].crashed) {
                if (clash_reset(c, k, metrics) != 0) {
                    return -1;
                }
            } else if (c->procs[k].pid > 0) {
                cluster_kill(c, k, SIGKILL);
            }
            if (spawn_proc(c, k) != 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* NNG frees a closed client's dialer and pipes on its own thread, which a
 * test's exit can beat: LeakSanitizer then reports them (it failed CI once).
 * A test program that starts a cluster frees them at exit. */
static pthread_once_t fini_once = PTHREAD_ONCE_INIT;

static void register_fini(void)
{
    atexit(rpc_fini);
}

int cluster_start(cluster **out, const cluster_options *opt, char *err, size_t errlen)
{
    *out = NULL;
    pthread_once(&fini_once, register_fini);
    if (opt->nodes < 1 || opt->nodes > CLUSTER_MAX_NODES) {
        snprintf(err, errlen, "node count must be 1..%d", CLUSTER_MAX_NODES);
        return LAPSE_EINVAL;
    }
    if (opt->coordinators < 0 || opt->coordinators > CLUSTER_MAX_COORDINATORS ||
        (opt->coordinators > 1 && opt->etcd < 1)) {
        snprintf(err, errlen, "coordinator count must be 1..%d, and above 1 only with etcd",
                 CLUSTER_MAX_COORDINATORS);
        return LAPSE_EINVAL;
    }
    cluster *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    c->nodes = opt->nodes;
    c->coordinators = opt->coordinators > 0 ? opt->coordinators : 1;
    c->nprocs = c->nodes + c->coordinators;
    c->quiet = opt->quiet;
    const char *bin = opt->bin_dir ? opt->bin_dir : getenv("LAPSE_BIN_DIR");
    snprintf(c->bin_dir, sizeof(c->bin_dir), "%s", bin ? bin : "./build/bin");
    snprintf(c->node_args, sizeof(c->node_args), "%s", opt->node_args ? opt->node_args : "");
    snprintf(c->coord_args, sizeof(c->coord_args), "%s",
             opt->coordinator_args ? opt->coordinator_args : "");
    for (int i = 1, at = 0; opt->node_zones != NULL && i <= c->nodes; i++) {
        size_t len = strcspn(opt->node_zones + at, ",");
        snprintf(c->zone[i], sizeof(c->zone[i]), "%.*s", (int)len, opt->node_zones + at);
        at += (int)len;
        if (opt->node_zones[at] == '\0') {
            break;
        }
        at++;
    }
    if (opt->run_dir != NULL) {
        snprintf(c->run_dir, sizeof(c->run_dir), "%s", opt->run_dir);
        mkdir(c->run_dir, 0755);
    } else if (cluster_mkdtemp(c->run_dir, sizeof(c->run_dir), "cluster", err, errlen) != 0) {
        free(c);
        return LAPSE_EIO;
    }
    if (opt->etcd > 0 && etcd_members_start(&c->etcd, opt->etcd, err, errlen) != 0) {
        cluster_free(c, 0);
        return LAPSE_EUNAVAILABLE;
    }
    for (int i = 0; i < c->nprocs; i++) {
        proc *p = &c->procs[i];
        const char *name = is_coord(c, i) ? "coordinator" : "node";
        int n = i > c->nodes ? i - c->nodes + 1 : i; /* coordinator 2, 3, ... */
        p->exit_status = -1;
        pick_ports(c, i, !is_coord(c, i) && opt->metrics);
        if (i == 0) {
            snprintf(p->data_dir, sizeof(p->data_dir), "%s/%s", c->run_dir, name);
            snprintf(p->log_path, sizeof(p->log_path), "%s/%s.log", c->run_dir, name);
        } else {
            snprintf(p->data_dir, sizeof(p->data_dir), "%s/%s%d", c->run_dir, name, n);
            snprintf(p->log_path, sizeof(p->log_path), "%s/%s%d.log", c->run_dir, name, n);
        }
    }
    list_coordinators(c);
    for (int i = 0; i < c->nprocs; i++) {
        if (spawn_proc(c, i) != 0) {
            snprintf(err, errlen, "cannot start %s/%s", c->bin_dir,
                     is_coord(c, i) ? "lapse-coordinator" : "lapse-node");
            cluster_free(c, 0);
            return LAPSE_EIO;
        }
    }
    /* Another test may take a port between our pick and the daemon's bind:
     * a daemon that exits on "in use" starts again on fresh ports. */
    int64_t deadline = now_ms() + 20000;
    int up = LAPSE_ETIMEDOUT;
    while (up != 0 && now_ms() < deadline) {
        up = cluster_wait_up(c, c->nodes, 500);
        if (up != 0 && respawn_port_clashes(c, opt->metrics) != 0) {
            break;
        }
    }
    if (up != 0) {
        reap(c);
        snprintf(err, errlen, "cluster did not come up within 20 s (logs in %s)", c->run_dir);
        cluster_free(c, 0);
        return LAPSE_EUNAVAILABLE;
    }
    *out = c;
    return 0;
}

/* A daemon that outlived its grace after SIGTERM: every thread's stack
 * (gdb, where the machine has it) goes to <log>.stacks, and our own frames
 * (the lines that name a source file of ours) to stderr, as CI keeps the
 * test's output but not the run directory. */
static void dump_stacks(const proc *p)
{
    char path[700], cmd[1600];
    snprintf(path, sizeof(path), "%s.stacks", p->log_path);
    snprintf(cmd, sizeof(cmd),
             "command -v gdb > /dev/null && timeout 60 gdb -p %d -batch -ex 'thread apply all bt' "
             "> '%s' 2>&1",
             (int)p->pid, path);
    if (system(cmd) != 0) {
        fprintf(stderr, "cluster: no stacks of pid %d (no gdb, or it failed)\n", (int)p->pid);
        return;
    }
    static const char *ours[] = {"node/",        "rpc/",       "etcd/",   "partition/", "storage/",
                                 "coordinator/", "placement/", "common/", "dynamodb/",  NULL};
    FILE *f = fopen(path, "r");
    char line[1024], thread[160] = "";
    int shown = 0;
    fprintf(stderr,
            "cluster: pid %d outlived its 10 s after SIGTERM; its threads' frames of ours "
            "(all of it in %s):\n",
            (int)p->pid, path);
    while (f != NULL && fgets(line, sizeof(line), f) != NULL && shown < 200) {
        if (strncmp(line, "Thread ", 7) == 0) {
            /* A thread's header is shown with its first frame of ours. */
            snprintf(thread, sizeof(thread), "%.150s", line);
            continue;
        }
        for (int i = 0; ours[i] != NULL; i++) {
            if (strstr(line, ours[i]) != NULL) {
                fprintf(stderr, "%s%s", thread, line);
                thread[0] = '\0';
                shown++;
                break;
            }
        }
    }
    if (f != NULL) {
        fclose(f);
    }
}

int cluster_kill(cluster *c, int idx, int sig)
{
    if (idx < 0 || idx >= c->nprocs) {
        return LAPSE_EINVAL;
    }
    reap(c);
    proc *p = &c->procs[idx];
    if (p->pid <= 0) {
        return LAPSE_ESTATE;
    }
    if (sig == SIGKILL || sig == SIGTERM) {
        p->killed = 1;
        kill(p->pid, SIGCONT); /* a stopped process must run to see SIGTERM */
        kill(p->pid, sig);
        int64_t deadline = now_ms() + 10000;
        int st, dumped = 0;
        while (waitpid(p->pid, &st, WNOHANG) == 0) {
            if (now_ms() > deadline) {
                if (sig == SIGTERM && !dumped) {
                    dump_stacks(p);
                    dumped = 1;
                }
                kill(p->pid, SIGKILL);
                deadline = now_ms() + 10000;
            }
            sleep_ms(5);
        }
        p->exit_status = st;
        if (!c->quiet) {
            fprintf(stderr, "cluster: %s process %d (pid %d)\n",
                    sig == SIGKILL ? "killed -9" : "terminated", idx, (int)p->pid);
        }
        p->pid = 0;
        return 0;
    }
    return kill(p->pid, sig) == 0 ? 0 : LAPSE_ESTATE;
}

int cluster_restart(cluster *c, int idx)
{
    if (idx < 0 || idx >= c->nprocs) {
        return LAPSE_EINVAL;
    }
    reap(c);
    if (c->procs[idx].pid > 0) {
        return LAPSE_ESTATE;
    }
    return spawn_proc(c, idx);
}

int cluster_crashed(cluster *c, int *status)
{
    reap(c);
    for (int i = 0; i < c->nprocs; i++) {
        if (c->procs[i].crashed) {
            if (status != NULL) {
                *status = c->procs[i].crash_status;
            }
            return i;
        }
    }
    return -1;
}

int cluster_start_client(cluster **out, const cluster_options *opt, lapse_client **client)
{
    char err[512];
    lapse_error e;
    *client = NULL;
    if (cluster_start(out, opt, err, sizeof(err)) != 0) {
        fprintf(stderr, "cluster_start: %s\n", err);
        return -1;
    }
    if (lapse_connect(client, cluster_coordinator_url(*out), &e) != 0) {
        fprintf(stderr, "lapse_connect: %s\n", e.message);
        cluster_free(*out, 1);
        *out = NULL;
        *client = NULL;
        return -1;
    }
    return 0;
}

void cluster_free(cluster *c, int remove_dir)
{
    if (c == NULL) {
        return;
    }
    if (remove_dir && getenv("LAPSE_TEST_KEEP") != NULL) {
        remove_dir = 0; /* logs and data kept for a look (CONTRIBUTING.md) */
        fprintf(stderr, "cluster: LAPSE_TEST_KEEP: kept %s\n", c->run_dir);
    }
    /* Nodes first, so none logs the coordinator's disappearance; etcd last. */
    for (int i = c->nodes; i >= 1; i--) {
        if (c->procs[i].pid > 0) {
            cluster_kill(c, i, SIGTERM);
        }
    }
    for (int k = 0; k < c->coordinators; k++) {
        int i = cluster_coordinator_index(c, k);
        if (c->procs[i].pid > 0) {
            cluster_kill(c, i, SIGTERM);
        }
    }
    etcd_members_free(c->etcd, remove_dir); /* its WAL alone is 64 MB */
    if (remove_dir) {
        cluster_rm_rf(c->run_dir);
    }
    free(c);
}

const char *cluster_coordinator_url(const cluster *c)
{
    return c->coord_urls;
}

int cluster_coordinators(const cluster *c)
{
    return c->coordinators;
}

int cluster_coordinator_index(const cluster *c, int k)
{
    return k <= 0 ? 0 : c->nodes + k;
}

etcd_members *cluster_etcd(cluster *c)
{
    return c->etcd;
}

/* Whether the leader's proclaimed --listen URL is coordinator URL url. Ports
 * tell them apart: the chaos harness's namespace mode
 * (chaos-tests/netns-daemon.sh) starts coordinators given
 * tcp://127.0.0.1:PORT listening on tcp://0.0.0.0:PORT, which they proclaim. */
static int same_coordinator(const char *url, const char *proclaimed)
{
    const char *a = strrchr(url, ':'), *b = strrchr(proclaimed, ':');
    if (strcmp(url, proclaimed) == 0) {
        return 1;
    }
    return a != NULL && b != NULL && strcmp(a, b) == 0 &&
           strncmp(proclaimed, "tcp://0.0.0.0:", 14) == 0;
}

int cluster_leader(cluster *c, int not_idx, int timeout_ms)
{
    etcd *ec;
    char err[256];
    if (c->etcd == NULL ||
        etcd_open(&ec, etcd_members_endpoints(c->etcd), 2000, err, sizeof(err)) != 0) {
        return -1;
    }
    int64_t deadline = now_ms() + timeout_ms;
    int found = -1;
    do {
        etcd_kv kv;
        if (etcd_election_leader(ec, CLUSTER_ELECTION, &kv, err, sizeof(err)) == 0) {
            for (int k = 0; k < c->coordinators && found < 0; k++) {
                int idx = cluster_coordinator_index(c, k);
                if (idx != not_idx && c->procs[idx].pid > 0 &&
                    same_coordinator(c->procs[idx].url, kv.value)) {
                    found = idx;
                }
            }
            etcd_kv_fini(&kv);
        }
        if (found < 0) {
            sleep_ms(5);
        }
    } while (found < 0 && now_ms() < deadline);
    etcd_close(ec);
    return found;
}

const char *cluster_node_url(const cluster *c, int node)
{
    return (node >= 1 && node <= c->nodes) ? c->procs[node].url : NULL;
}

const char *cluster_url(const cluster *c, int idx)
{
    return (idx >= 0 && idx < c->nprocs) ? c->procs[idx].url : NULL;
}

const char *cluster_run_dir(const cluster *c)
{
    return c->run_dir;
}

const char *cluster_metrics_addr(const cluster *c, int node)
{
    if (node < 1 || node > c->nodes || c->procs[node].metrics_addr[0] == '\0') {
        return NULL;
    }
    return c->procs[node].metrics_addr;
}

int cluster_nodes(const cluster *c)
{
    return c->nodes;
}

pid_t cluster_pid(const cluster *c, int idx)
{
    return (idx >= 0 && idx < c->nprocs) ? c->procs[idx].pid : 0;
}

int cluster_crash_count(cluster *c, int idx)
{
    if (idx < 0 || idx >= c->nprocs) {
        return 0;
    }
    reap(c);
    return c->procs[idx].crash_count;
}

int cluster_exit_status(const cluster *c, int idx)
{
    return (idx >= 0 && idx < c->nprocs) ? c->procs[idx].exit_status : -1;
}
