/*
 * netns.c: the network-namespace mode of a chaos run. See netns.h and
 * docs/chaos.md "The partition fault".
 */
#include "netns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#ifndef LAPSE_CHAOS_NETNS_SCRIPT
#define LAPSE_CHAOS_NETNS_SCRIPT "deploy/netns-cluster.sh"
#endif
#ifndef LAPSE_CHAOS_NETNS_WRAPPER
#define LAPSE_CHAOS_NETNS_WRAPPER "chaos-tests/netns-daemon.sh"
#endif

/* Subnets tried in turn; netns-cluster.sh refuses one the root namespace uses. */
static const char *const subnets[] = {"10.77.0", "10.78.0", "172.31.77"};

/* ============================== helpers ============================== */

/* Runs argv (argv[0] a path, or a name looked up in PATH) with LAPSE_HOME set
 * to ns->home, output appended to ns->log_path. Returns its exit status, or
 * -1 when it could not run or was killed. */
static int run_cmd(chaos_netns *ns, char *const argv[])
{
    size_t n = 0;
    while (environ[n] != NULL) {
        n++;
    }
    char **envp = calloc(n + 2, sizeof(char *));
    char home_env[600];
    if (envp == NULL) {
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "LAPSE_HOME=", 11) != 0) {
            envp[k++] = environ[i];
        }
    }
    snprintf(home_env, sizeof(home_env), "LAPSE_HOME=%s", ns->home);
    envp[k++] = home_env;
    envp[k] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, ns->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rv = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    if (rv != 0) {
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            return -1;
        }
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The last non-empty line of the script's log, for error messages. */
static void log_tail(const chaos_netns *ns, char *buf, size_t len)
{
    char line[512];
    buf[0] = '\0';
    FILE *f = fopen(ns->log_path, "r");
    if (f == NULL) {
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] != '\0') {
            snprintf(buf, len, "%.255s", line);
        }
    }
    fclose(f);
}

static void rm_rf(const char *path)
{
    char *argv[] = {"rm", "-rf", (char *)path, NULL};
    pid_t pid;
    if (posix_spawnp(&pid, "rm", NULL, NULL, argv, environ) == 0) {
        waitpid(pid, NULL, 0);
    }
}

/* Deletes namespaces lapse-ch<pid>-* whose process is gone: a run killed
 * before netns_close (Ctrl-C) leaves them. Only names of that exact shape
 * are touched. */
static void sweep_stale(chaos_netns *ns)
{
    DIR *d = opendir("/run/netns");
    if (d == NULL) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int pid = 0, len = 0;
        char role[8] = "";
        if (sscanf(e->d_name, "lapse-ch%d-%7[a-z0-9]%n", &pid, role, &len) != 2 ||
            e->d_name[len] != '\0' || pid <= 0 || pid == (int)getpid()) {
            continue;
        }
        /* Node namespaces n1..n9: a dead run may have asked for any count. */
        int node_role = role[0] == 'n' && role[1] >= '1' && role[1] <= '9' && role[2] == '\0';
        if (strcmp(role, "br") != 0 && strcmp(role, "c") != 0 && strcmp(role, "c2") != 0 &&
            !node_role) {
            continue;
        }
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) {
            continue;
        }
        char *argv[] = {"ip", "netns", "del", e->d_name, NULL};
        if (run_cmd(ns, argv) == 0) {
            fprintf(stderr, "lapse-chaos: deleted namespace %s left by a dead run (pid %d)\n",
                    e->d_name, pid);
        }
    }
    closedir(d);
}

/* ============================== open and close ============================== */

int netns_open(chaos_netns *ns, const char *real_bin_dir, int nodes, char *why, size_t whylen)
{
    memset(ns, 0, sizeof(*ns));
    ns->orig_fd = -1;
    if (nodes < 3 || nodes > NETNS_MAX_NODES) {
        snprintf(why, whylen, "%d nodes asked for, the namespaces hold 3 to %d", nodes,
                 NETNS_MAX_NODES);
        return -1;
    }
    ns->nodes = nodes;
    if (geteuid() != 0) {
        snprintf(why, whylen, "needs root (network namespaces)");
        return -1;
    }
    if (access(LAPSE_CHAOS_NETNS_SCRIPT, X_OK) != 0 ||
        access(LAPSE_CHAOS_NETNS_WRAPPER, X_OK) != 0) {
        snprintf(why, whylen, "%s or %s is missing", LAPSE_CHAOS_NETNS_SCRIPT,
                 LAPSE_CHAOS_NETNS_WRAPPER);
        return -1;
    }
    const char *bin = real_bin_dir ? real_bin_dir : getenv("LAPSE_BIN_DIR");
    char real[PATH_MAX];
    if (realpath(bin ? bin : "./build/bin", real) == NULL) {
        snprintf(why, whylen, "bin dir %s: %s", bin ? bin : "./build/bin", strerror(errno));
        return -1;
    }
    const char *tmp = getenv("LAPSE_TEST_TMP");
    if (tmp == NULL || *tmp == '\0') {
        tmp = "/tmp";
    }
    mkdir(tmp, 0755);
    snprintf(ns->prefix, sizeof(ns->prefix), "lapse-ch%d", (int)getpid());
    snprintf(ns->home, sizeof(ns->home), "%s/chaos-netns-XXXXXX", tmp);
    if (mkdtemp(ns->home) == NULL) {
        snprintf(why, whylen, "mkdtemp %s: %s", ns->home, strerror(errno));
        return -1;
    }
    snprintf(ns->log_path, sizeof(ns->log_path), "%s/netns.log", ns->home);
    snprintf(ns->bin_dir, sizeof(ns->bin_dir), "%s/bin", ns->home);
    char link_path[700];
    if (mkdir(ns->bin_dir, 0755) != 0) {
        goto fail_io;
    }
    snprintf(link_path, sizeof(link_path), "%s/lapse-coordinator", ns->bin_dir);
    if (symlink(LAPSE_CHAOS_NETNS_WRAPPER, link_path) != 0) {
        goto fail_io;
    }
    snprintf(link_path, sizeof(link_path), "%s/lapse-node", ns->bin_dir);
    if (symlink(LAPSE_CHAOS_NETNS_WRAPPER, link_path) != 0) {
        goto fail_io;
    }
    snprintf(link_path, sizeof(link_path), "%s/etcd", ns->bin_dir);
    if (symlink(LAPSE_CHAOS_NETNS_WRAPPER, link_path) != 0) {
        goto fail_io;
    }

    char *probe[] = {"ip", "netns", "list", NULL};
    if (run_cmd(ns, probe) != 0) {
        snprintf(why, whylen, "'ip netns' does not work here");
        rm_rf(ns->home);
        return -1;
    }
    sweep_stale(ns);

    /* The first subnet the script accepts (it refuses one in use). */
    int up = 0;
    char tail[256] = "", count[8];
    snprintf(count, sizeof(count), "%d", nodes);
    for (size_t i = 0; i < sizeof(subnets) / sizeof(subnets[0]) && !up; i++) {
        char subnet[32];
        snprintf(subnet, sizeof(subnet), "%s.0/24", subnets[i]);
        char *argv[] = {LAPSE_CHAOS_NETNS_SCRIPT,
                        "net-up",
                        "--prefix",
                        ns->prefix,
                        "--subnet",
                        subnet,
                        "--nodes",
                        count,
                        NULL};
        if (run_cmd(ns, argv) == 0) {
            snprintf(ns->base, sizeof(ns->base), "%s", subnets[i]);
            up = 1;
        } else {
            log_tail(ns, tail, sizeof(tail));
            if (strstr(tail, "overlaps") == NULL) {
                break;
            }
        }
    }
    if (!up) {
        snprintf(why, whylen, "netns-cluster.sh net-up failed: %.255s", tail);
        rm_rf(ns->home); /* net-up removes what it made when it fails */
        return -1;
    }

    int target = -1;
    char path[64];
    snprintf(path, sizeof(path), "/run/netns/%s-c", ns->prefix);
    if ((ns->orig_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0 ||
        (target = open(path, O_RDONLY | O_CLOEXEC)) < 0 || setns(target, CLONE_NEWNET) != 0) {
        snprintf(why, whylen, "cannot join %s: %s", path, strerror(errno));
        if (target >= 0) {
            close(target);
        }
        char *down[] = {LAPSE_CHAOS_NETNS_SCRIPT, "net-down", NULL};
        run_cmd(ns, down);
        if (ns->orig_fd >= 0) {
            close(ns->orig_fd);
        }
        rm_rf(ns->home);
        return -1;
    }
    close(target);
    /* For the wrappers, which cluster.c starts with this environment. */
    setenv("LAPSE_CHAOS_NETNS_PREFIX", ns->prefix, 1);
    setenv("LAPSE_CHAOS_NETNS_BASE", ns->base, 1);
    setenv("LAPSE_CHAOS_REAL_BIN_DIR", real, 1);
    setenv("LAPSE_CHAOS_NETNS_NODES", count, 1);
    /* etcd members (tests/etcd_members.c) on the node hosts' addresses,
     * started through the wrapper in those namespaces: member i beside node
     * i + 1, so a partition cuts a host's node and member together. Three
     * members on the first three hosts whatever the node count: the run
     * asks for three (chaos.c), and a fourth would only make the quorum
     * larger without outliving more failures. */
    const char *etcd = getenv("LAPSE_ETCD");
    snprintf(ns->prev_etcd, sizeof(ns->prev_etcd), "%s", etcd != NULL ? etcd : "");
    setenv("LAPSE_CHAOS_REAL_ETCD", etcd != NULL && etcd[0] != '\0' ? etcd : "etcd", 1);
    snprintf(link_path, sizeof(link_path), "%s/etcd", ns->bin_dir);
    setenv("LAPSE_ETCD", link_path, 1);
    char hosts[64];
    snprintf(hosts, sizeof(hosts), "%s.11,%s.12,%s.13", ns->base, ns->base, ns->base);
    setenv("LAPSE_ETCD_HOSTS", hosts, 1);
    ns->open = 1;
    return 0;

fail_io:
    snprintf(why, whylen, "setting up %s: %s", ns->bin_dir, strerror(errno));
    rm_rf(ns->home);
    return -1;
}

void netns_close(chaos_netns *ns)
{
    if (ns == NULL || !ns->open) {
        return;
    }
    for (int i = 1; i <= ns->nodes; i++) {
        if (ns->cut[i]) {
            netns_cut(ns, i, 0);
        }
        if (ns->oneway[i]) {
            netns_oneway(ns, i, 0);
        }
    }
    if (setns(ns->orig_fd, CLONE_NEWNET) != 0) {
        fprintf(stderr, "lapse-chaos: cannot return to the original namespace: %s\n",
                strerror(errno));
    }
    close(ns->orig_fd);
    ns->orig_fd = -1;
    char *argv[] = {LAPSE_CHAOS_NETNS_SCRIPT, "net-down", NULL};
    if (run_cmd(ns, argv) == 0) {
        rm_rf(ns->home);
    } else {
        fprintf(stderr, "lapse-chaos: netns-cluster.sh net-down failed; see %s\n", ns->log_path);
    }
    unsetenv("LAPSE_CHAOS_NETNS_PREFIX");
    unsetenv("LAPSE_CHAOS_NETNS_BASE");
    unsetenv("LAPSE_CHAOS_REAL_BIN_DIR");
    unsetenv("LAPSE_CHAOS_NETNS_NODES");
    unsetenv("LAPSE_CHAOS_REAL_ETCD");
    unsetenv("LAPSE_ETCD_HOSTS");
    if (ns->prev_etcd[0] != '\0') {
        setenv("LAPSE_ETCD", ns->prev_etcd, 1);
    } else {
        unsetenv("LAPSE_ETCD");
    }
    ns->open = 0;
}

int netns_cut(chaos_netns *ns, int node, int down)
{
    if (ns == NULL || !ns->open || node < 1 || node > ns->nodes) {
        return -1;
    }
    char n[12];
    snprintf(n, sizeof(n), "%d", node);
    char *argv[] = {LAPSE_CHAOS_NETNS_SCRIPT, down ? "partition" : "heal", n, NULL};
    if (run_cmd(ns, argv) != 0) {
        return -1;
    }
    ns->cut[node] = down;
    return 0;
}

int netns_oneway(chaos_netns *ns, int from, int to)
{
    if (ns == NULL || !ns->open || from < 1 || from > ns->nodes || to < 0 || to > ns->nodes ||
        to == from) {
        return -1;
    }
    char a[12], b[12];
    snprintf(a, sizeof(a), "%d", from);
    snprintf(b, sizeof(b), "%d", to);
    char *cut[] = {LAPSE_CHAOS_NETNS_SCRIPT, "cut-oneway", a, b, NULL};
    char *heal[] = {LAPSE_CHAOS_NETNS_SCRIPT, "heal-oneway", a, NULL};
    if (run_cmd(ns, to != 0 ? cut : heal) != 0) {
        return -1;
    }
    ns->oneway[from] = to;
    return 0;
}
