/*
 * node_testutil.c: processes, the partition map, setup and teardown for
 * node_test (node_testutil.h). Daemons start with posix_spawn (NNG is not
 * fork-safe); every wait is a loop on a condition with a deadline.
 */
#include "node_testutil.h"

extern char **environ;

node_test_state nt;

/* ------------------------------------------------------------------------ */
/* Processes                                                                 */
/* ------------------------------------------------------------------------ */

/* n distinct free TCP ports on 127.0.0.1: all bound at once (so the kernel
 * cannot hand out one twice), then released. 0 entries on failure. */
void free_ports(int *ports, int n)
{
    int fds[8];
    assert_true(n <= 8);
    for (int i = 0; i < n; i++) {
        struct sockaddr_in sa = {
            .sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sa);
        ports[i] = 0;
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (fds[i] >= 0 && bind(fds[i], (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
            getsockname(fds[i], (struct sockaddr *)&sa, &len) == 0) {
            ports[i] = ntohs(sa.sin_port);
        }
    }
    for (int i = 0; i < n; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
}

int free_port(void)
{
    int port;
    free_ports(&port, 1);
    return port;
}

/* Starts argv[0] from bin_dir with output appended to log. Returns the pid. */
pid_t spawn(char *const argv[], const char *log)
{
    char path[PATH_MAX];
    PATHF(path, "%s/%s", nt.bin_dir, argv[0]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = 0;
    int e = posix_spawn(&pid, path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0) {
        fail_msg("posix_spawn %s: %s", path, strerror(e));
    }
    return pid;
}

/* Waits up to timeout_ms for pid to exit. Returns its wait status, or -1. */
int wait_exit(pid_t pid, int timeout_ms)
{
    clock_mono deadline = clock_mono_after_ms(timeout_ms);
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            return st;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            return -1;
        }
        clock_sleep_ms(10);
    }
}

/* Runs lapse-node with args to completion (it must exit by itself). Returns
 * its exit code; the output goes to out.log in the run dir. */
int run_node_expect_exit(char *const argv[])
{
    char log[PATH_MAX];
    PATHF(log, "%s/short-runs.log", nt.root);
    pid_t pid = spawn(argv, log);
    int st = wait_exit(pid, 10000);
    if (st == -1) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("lapse-node did not exit");
    }
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

int log_contains(const char *log, const char *needle)
{
    FILE *f = fopen(log, "r");
    if (f == NULL) {
        return 0;
    }
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, needle) != NULL;
    }
    fclose(f);
    return found;
}

void stop_proc(proc *p, int sig)
{
    if (p->pid <= 0) {
        return;
    }
    kill(p->pid, sig);
    int st = wait_exit(p->pid, 10000);
    if (st == -1) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
    }
    if (sig == SIGTERM) {
        assert_true(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    p->pid = 0;
}

void start_node(int i)
{
    proc *p = &nt.node[i];
    char id[16];
    snprintf(id, sizeof(id), "%u", p->id);
    char *argv[] = {"lapse-node", "--id",   id,     "--listen",  p->url, "--coordinator",
                    nt.coord.url, "--data", p->dir, "--workers", "2",    NULL};
    p->pid = spawn(argv, p->log);
}

void start_coord(void)
{
    char *argv[] = {"lapse-coordinator", "--listen", nt.coord.url, "--data", nt.coord.dir, NULL};
    nt.coord.pid = spawn(argv, nt.coord.log);
}

/* ------------------------------------------------------------------------ */
/* The map: from the coordinator, or pushed by the test                      */
/* ------------------------------------------------------------------------ */

void adopt_map(const Lapse__PartitionMap *pb)
{
    char err[256];
    pmap_free(nt.map);
    nt.map = NULL;
    assert_int_equal(wire_pmap_from_pb(pb, &nt.map, err, sizeof(err)), 0);
    nt.t = pmap_table_find(nt.map, TABLE);
}

int coord_call(Lapse__Request *req, Lapse__Response **resp, char *err)
{
    err[0] = 0;
    return rpc_call(nt.cc, req, CALL_MS, resp, err, 256);
}

/* Waits until the coordinator reports both nodes UP. */
void wait_registered(void)
{
    clock_mono deadline = clock_mono_after_ms(20000);
    for (;;) {
        Lapse__Request req = LAPSE__REQUEST__INIT;
        Lapse__ClusterStatusRequest body = LAPSE__CLUSTER_STATUS_REQUEST__INIT;
        Lapse__Response *resp = NULL;
        char err[256];
        req.body_case = LAPSE__REQUEST__BODY_CLUSTER_STATUS;
        req.cluster_status = &body;
        int up = 0;
        if (coord_call(&req, &resp, err) == 0 && resp->cluster_status != NULL) {
            for (size_t i = 0; i < resp->cluster_status->n_nodes; i++) {
                up += resp->cluster_status->nodes[i]->state == LAPSE__NODE_STATE__NODE_UP;
            }
        }
        rpc_response_free(resp);
        if (up >= NODES) {
            return;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("nodes did not register with the coordinator");
        }
        clock_sleep_ms(50);
    }
}

void fetch_map(void)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__GetPartitionMapRequest body = LAPSE__GET_PARTITION_MAP_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    char err[256];
    req.body_case = LAPSE__REQUEST__BODY_GET_PARTITION_MAP;
    req.get_partition_map = &body;
    int rv = coord_call(&req, &resp, err);
    if (rv != 0) {
        fail_msg("GetPartitionMap: %s: %s", lapse_strerror(rv), err);
    }
    adopt_map(resp->get_partition_map->map);
    rpc_response_free(resp);
}

void create_table_via_coordinator(void)
{
    arena a;
    arena_init(&a);
    table_schema s = {0};
    snprintf(s.name, sizeof(s.name), "%s", TABLE);
    snprintf(s.pk.name, sizeof(s.pk.name), "pk");
    s.pk.type = ATTR_S;
    snprintf(s.sk.name, sizeof(s.sk.name), "sk");
    s.sk.type = ATTR_N;
    s.partitions = PARTS;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__CreateTableRequest body = LAPSE__CREATE_TABLE_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    char err[256];
    body.schema = wire_schema_to_pb(&a, &s);
    req.body_case = LAPSE__REQUEST__BODY_CREATE_TABLE;
    req.create_table = &body;
    int rv = coord_call(&req, &resp, err);
    if (rv != 0) {
        fail_msg("CreateTable: %s: %s", lapse_strerror(rv), err);
    }
    rpc_response_free(resp);
    arena_fini(&a);
    fetch_map();
    assert_non_null(nt.t);
}

/* Without a coordinator: a map with both nodes, partitions alternating. */
int push_map(int node, const pmap *pm, char *err)
{
    arena a;
    arena_init(&a);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__PushPartitionMapRequest body = LAPSE__PUSH_PARTITION_MAP_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.map = wire_pmap_to_pb(&a, pm);
    req.body_case = LAPSE__REQUEST__BODY_PUSH_PARTITION_MAP;
    req.push_partition_map = &body;
    int rv = rpc_call(nt.nc[node], &req, CALL_MS, &resp, err, 256);
    rpc_response_free(resp);
    arena_fini(&a);
    return rv;
}

void create_table_by_push(void)
{
    pmap *pm = pmap_new();
    table_schema s = {0};
    pmap_replicas parts[PARTS];
    s.id = 7;
    snprintf(s.name, sizeof(s.name), "%s", TABLE);
    snprintf(s.pk.name, sizeof(s.pk.name), "pk");
    s.pk.type = ATTR_S;
    snprintf(s.sk.name, sizeof(s.sk.name), "sk");
    s.sk.type = ATTR_N;
    s.partitions = PARTS;
    for (int n = 0; n < NODES; n++) {
        assert_int_equal(pmap_set_node(pm, nt.node[n].id, nt.node[n].url, PMAP_NODE_UP), 0);
    }
    for (uint32_t p = 0; p < PARTS; p++) {
        parts[p].n = 1;
        parts[p].ids[0] = nt.node[p % NODES].id;
    }
    assert_int_equal(pmap_add_table_assigned(pm, &s, parts), 0);
    pm->version = 5;
    for (int n = 0; n < NODES; n++) {
        char err[256];
        /* The node answers once its server is up. */
        clock_mono deadline = clock_mono_after_ms(10000);
        int rv;
        while ((rv = push_map(n, pm, err)) != 0 && clock_mono_remaining_ms(deadline) > 0) {
            clock_sleep_ms(20);
        }
        if (rv != 0) {
            fail_msg("PushPartitionMap to node %d: %s: %s", n, lapse_strerror(rv), err);
        }
    }
    nt.map = pm;
    nt.t = pmap_table_find(nt.map, TABLE);
}

/* Waits until node i answers a GetItem (any status but a transport error). */
void wait_serving(int i)
{
    clock_mono deadline = clock_mono_after_ms(15000);
    for (;;) {
        arena a;
        arena_init(&a);
        char err[256];
        item *got = NULL;
        nt.call_ms = 500;
        int rv = get(i, key_i(&a, 0), &got, err, NULL);
        nt.call_ms = 0;
        item_free(got);
        arena_fini(&a);
        if (rv != LAPSE_ETIMEDOUT && rv != LAPSE_EUNAVAILABLE) {
            return;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node %d does not answer", i);
        }
        clock_sleep_ms(20);
    }
}

/* ------------------------------------------------------------------------ */
/* Setup and teardown                                                        */
/* ------------------------------------------------------------------------ */

static void mkdirs(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
    mkdir(tmp, 0755);
}

/* Kills every daemon still running: at exit and when the test itself dies
 * (a failed sanitizer check aborts), so no daemon outlives the test. Only
 * async-signal-safe calls. */
static void kill_all(void)
{
    for (int n = 0; n < NODES; n++) {
        if (nt.node[n].pid > 0) {
            kill(nt.node[n].pid, SIGKILL);
        }
    }
    if (nt.coord.pid > 0) {
        kill(nt.coord.pid, SIGKILL);
    }
}

static void on_fatal(int sig)
{
    kill_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

int group_setup(void **state)
{
    (void)state;
    atexit(kill_all);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fatal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGABRT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    const char *bin = getenv("LAPSE_BIN_DIR");
    const char *tmp = getenv("LAPSE_TEST_TMP");
    snprintf(nt.bin_dir, sizeof(nt.bin_dir), "%s", bin != NULL ? bin : "./build/bin");
    char base[PATH_MAX];
    snprintf(base, sizeof(base), "%s", tmp != NULL ? tmp : "/tmp");
    mkdirs(base);
    PATHF(nt.root, "%s/node_test.XXXXXX", base);
    if (mkdtemp(nt.root) == NULL) {
        fprintf(stderr, "mkdtemp %s: %s\n", nt.root, strerror(errno));
        return -1;
    }
    char path[PATH_MAX];
    PATHF(path, "%s/lapse-coordinator", nt.bin_dir);
    /* NODE_TEST_PUSH_MAPS=1 plays the coordinator's part even when it is built. */
    nt.have_coord = access(path, X_OK) == 0 && getenv("NODE_TEST_PUSH_MAPS") == NULL;
    int ports[NODES + 1];
    free_ports(ports, NODES + 1);
    snprintf(nt.coord.url, sizeof(nt.coord.url), "tcp://127.0.0.1:%d", ports[NODES]);
    PATHF(nt.coord.dir, "%s/coordinator", nt.root);
    PATHF(nt.coord.log, "%s/coordinator.log", nt.root);
    for (int n = 0; n < NODES; n++) {
        nt.node[n].id = (uint32_t)n + 1;
        snprintf(nt.node[n].url, sizeof(nt.node[n].url), "tcp://127.0.0.1:%d", ports[n]);
        PATHF(nt.node[n].dir, "%s/node%d", nt.root, n + 1);
        PATHF(nt.node[n].log, "%s/node%d.log", nt.root, n + 1);
    }
    char err[256];
    if (rpc_client_open(&nt.cc, nt.coord.url, err, sizeof(err)) != 0) {
        return -1;
    }
    for (int n = 0; n < NODES; n++) {
        if (rpc_client_open(&nt.nc[n], nt.node[n].url, err, sizeof(err)) != 0) {
            return -1;
        }
    }
    fprintf(stderr, "run dir %s (%s coordinator)\n", nt.root,
            nt.have_coord ? "real" : "no: maps are pushed by the test");
    return 0;
}

int group_teardown(void **state)
{
    (void)state;
    for (int n = 0; n < NODES; n++) {
        if (nt.node[n].pid > 0) {
            kill(nt.node[n].pid, SIGKILL);
            waitpid(nt.node[n].pid, NULL, 0);
            nt.node[n].pid = 0;
        }
        rpc_client_close(nt.nc[n]);
    }
    if (nt.coord.pid > 0) {
        kill(nt.coord.pid, SIGKILL);
        waitpid(nt.coord.pid, NULL, 0);
        nt.coord.pid = 0;
    }
    rpc_client_close(nt.cc);
    pmap_free(nt.map);
    return 0;
}
