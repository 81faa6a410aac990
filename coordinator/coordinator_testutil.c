/* coordinator_testutil.c: the process fixture of the coordinator tests.
 * Contract in coordinator_testutil.h. */
#include "coordinator_testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
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

#include "../common/clock.h"

extern char **environ;

/* ------------------------------------------------------------------------ */
/* Fixture: one coordinator process, one client, fake node heartbeats       */
/* ------------------------------------------------------------------------ */

fixture fx;

/* The heartbeat thread's state. */
static struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int stop;                           /* guarded by mu */
    unsigned alive;                     /* bit i: node i heartbeats; guarded by mu */
    int in_round;                       /* a heartbeat round is running; guarded by mu */
    int64_t last_ok[FIXTURE_NODES + 1]; /* mono ms of the last OK heartbeat; guarded by mu */
    uint64_t rounds;                    /* completed rounds; guarded by mu */
    /* What each fake node reports; guarded by mu. */
    Lapse__TtlProgress ttl[FIXTURE_NODES + 1][FIXTURE_MAX_TTL];
    size_t nttl[FIXTURE_NODES + 1];
    int paused[FIXTURE_NODES + 1];
} hb;

/* Starts lapse-coordinator with argv[1..] = args (NULL-terminated), stdout
 * and stderr appended to log. Returns the pid, or fails the test. */
pid_t fixture_spawn(const char *log, const char **args)
{
    const char *argv[32];
    size_t n = 0;
    argv[n++] = fx.bin;
    for (size_t i = 0; args[i] != NULL && n < 31; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = 0;
    int rv = posix_spawn(&pid, fx.bin, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rv != 0) {
        fail_msg("posix_spawn %s: %s", fx.bin, strerror(rv));
    }
    return pid;
}

/* Waits up to timeout_ms for pid to exit. Returns 1 with *status set, or 0. */
int fixture_wait_exit(pid_t pid, int timeout_ms, int *status)
{
    clock_mono deadline = clock_mono_after_ms(timeout_ms);
    do {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) {
            return 1;
        }
        if (r < 0 && errno != EINTR) {
            return 0;
        }
        clock_sleep_ms(20);
    } while (clock_mono_remaining_ms(deadline) > 0);
    return 0;
}

int fixture_file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    size_t cap = 1 << 20, n = 0;
    char *text = malloc(cap + 1);
    if (text != NULL) {
        n = fread(text, 1, cap, f);
        text[n] = '\0';
    }
    fclose(f);
    int found = text != NULL && strstr(text, needle) != NULL;
    free(text);
    return found;
}

/* In sanitized builds the daemon reports to its log; any report fails. */
void fixture_assert_no_sanitizer_report(const char *log)
{
    if (fixture_file_contains(log, "Sanitizer") || fixture_file_contains(log, "runtime error:")) {
        fail_msg("sanitizer report in %s", log);
    }
}

/* One call to the coordinator; *resp is NULL on a transport error. */
int fixture_call(Lapse__Request *req, Lapse__Response **resp, char *err, size_t errlen)
{
    *resp = NULL;
    err[0] = '\0';
    if (fx.admin_token != NULL) {
        req->admin_token = (char *)fx.admin_token;
    }
    return rpc_call(fx.cli, req, FIXTURE_CALL_TIMEOUT_MS, resp, err, errlen);
}

int fixture_cluster_status(Lapse__Response **resp, char *err, size_t errlen)
{
    Lapse__ClusterStatusRequest body = LAPSE__CLUSTER_STATUS_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_CLUSTER_STATUS;
    req.cluster_status = &body;
    return fixture_call(&req, resp, err, errlen);
}

/* Waits until the coordinator answers ClusterStatus, or fails the test. */
static void wait_ready(void)
{
    clock_mono deadline = clock_mono_after_ms(15000);
    char err[256] = "";
    int rv;
    do {
        Lapse__ClusterStatusRequest body = LAPSE__CLUSTER_STATUS_REQUEST__INIT;
        Lapse__Request req = LAPSE__REQUEST__INIT;
        req.body_case = LAPSE__REQUEST__BODY_CLUSTER_STATUS;
        req.cluster_status = &body;
        Lapse__Response *resp = NULL;
        rv = rpc_call(fx.cli, &req, 300, &resp, err, sizeof(err));
        rpc_response_free(resp);
        if (rv == 0) {
            return;
        }
        clock_sleep_ms(20);
    } while (clock_mono_remaining_ms(deadline) > 0);
    fail_msg("coordinator not ready on %s: %s (log: %s)", fx.url, err, fx.log_path);
}

void fixture_start_coordinator(void)
{
    const char *args[16] = {"--listen", fx.url, "--data", fx.data_dir, "--log-level", "debug"};
    size_t n = 6;
    for (size_t i = 0; fx.extra_args[i] != NULL && n + 1 < 16; i++) {
        args[n++] = fx.extra_args[i];
    }
    args[n] = NULL;
    fx.pid = fixture_spawn(fx.log_path, args);
    wait_ready();
}

/* A heartbeat with TTL reports; never carries fx.admin_token (the heartbeat
 * thread must not read fields the test thread writes). */
static int heartbeat_ttl(uint32_t id, uint64_t version, int64_t clock_ms, Lapse__TtlProgress **ttl,
                         size_t nttl, int paused, Lapse__Response **resp, char *err, size_t errlen)
{
    Lapse__HeartbeatRequest body = LAPSE__HEARTBEAT_REQUEST__INIT;
    body.node_id = id;
    body.pmap_version = version;
    body.clock_ms = clock_ms;
    body.ttl = ttl;
    body.n_ttl = nttl;
    body.ttl_paused_for_clock = paused != 0;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_HEARTBEAT;
    req.heartbeat = &body;
    *resp = NULL;
    err[0] = '\0';
    return rpc_call(fx.cli, &req, FIXTURE_CALL_TIMEOUT_MS, resp, err, errlen);
}

int fixture_heartbeat(uint32_t id, uint64_t version, int64_t clock_ms, Lapse__Response **resp,
                      char *err, size_t errlen)
{
    return heartbeat_ttl(id, version, clock_ms, NULL, 0, 0, resp, err, errlen);
}

/* Heartbeats every alive fake node every 300 ms, as a node does. */
static void *hb_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&hb.mu);
    while (!hb.stop) {
        unsigned alive = hb.alive;
        hb.in_round = 1;
        pthread_mutex_unlock(&hb.mu);
        for (uint32_t id = 1; id <= FIXTURE_NODES; id++) {
            if (!(alive & (1u << id))) {
                continue;
            }
            int64_t skew = id == FIXTURE_SKEW_NODE ? FIXTURE_SKEW_MS : 0;
            Lapse__TtlProgress prog[FIXTURE_MAX_TTL];
            Lapse__TtlProgress *ptrs[FIXTURE_MAX_TTL];
            pthread_mutex_lock(&hb.mu);
            size_t nttl = hb.nttl[id];
            int paused = hb.paused[id];
            for (size_t i = 0; i < nttl; i++) {
                prog[i] = hb.ttl[id][i];
                ptrs[i] = &prog[i];
            }
            pthread_mutex_unlock(&hb.mu);
            Lapse__Response *resp = NULL;
            char err[256];
            int rv = heartbeat_ttl(id, 0, clock_wall_now().ms + skew, ptrs, nttl, paused, &resp,
                                   err, sizeof(err));
            rpc_response_free(resp);
            if (rv == 0) {
                pthread_mutex_lock(&hb.mu);
                hb.last_ok[id] = clock_mono_now().ms;
                pthread_mutex_unlock(&hb.mu);
            }
        }
        pthread_mutex_lock(&hb.mu);
        hb.in_round = 0;
        hb.rounds++;
        pthread_cond_broadcast(&hb.cond);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 300 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (!hb.stop) {
            pthread_cond_timedwait(&hb.cond, &hb.mu, &ts);
        }
    }
    pthread_mutex_unlock(&hb.mu);
    return NULL;
}

/* Sets which fake nodes heartbeat, and waits for a running round to end so
 * that no heartbeat of the old set arrives afterwards. */
void fixture_set_alive(unsigned mask)
{
    pthread_mutex_lock(&hb.mu);
    hb.alive = mask;
    while (hb.in_round) {
        pthread_cond_wait(&hb.cond, &hb.mu);
    }
    pthread_cond_broadcast(&hb.cond);
    pthread_mutex_unlock(&hb.mu);
}

void fixture_set_ttl_progress(uint32_t id, uint32_t table_id, uint64_t config_version,
                              int backfill_done)
{
    assert_true(id >= 1 && id <= FIXTURE_NODES);
    pthread_mutex_lock(&hb.mu);
    size_t i = 0;
    while (i < hb.nttl[id] && hb.ttl[id][i].table_id != table_id) {
        i++;
    }
    if (i == hb.nttl[id] && i < FIXTURE_MAX_TTL) {
        hb.nttl[id]++;
    }
    if (i < FIXTURE_MAX_TTL) {
        Lapse__TtlProgress p = LAPSE__TTL_PROGRESS__INIT;
        p.table_id = table_id;
        p.config_version = config_version;
        p.backfill_done = backfill_done != 0;
        p.backfill_items = backfill_done ? 42 : 7;
        p.partitions_done = backfill_done ? 2 : 1;
        p.partitions_total = 2;
        hb.ttl[id][i] = p;
    }
    pthread_mutex_unlock(&hb.mu);
    assert_true(i < FIXTURE_MAX_TTL);
}

void fixture_set_ttl_paused(uint32_t id, int paused)
{
    assert_true(id >= 1 && id <= FIXTURE_NODES);
    pthread_mutex_lock(&hb.mu);
    hb.paused[id] = paused;
    pthread_mutex_unlock(&hb.mu);
}

void fixture_wait_heartbeat_round(void)
{
    pthread_mutex_lock(&hb.mu);
    /* A round running now may have copied the old reports: wait for the
     * end of the next full one. */
    uint64_t want = hb.rounds + (hb.in_round ? 2 : 1);
    pthread_cond_broadcast(&hb.cond); /* start it now rather than in 300 ms */
    while (hb.rounds < want && !hb.stop) {
        pthread_cond_wait(&hb.cond, &hb.mu);
    }
    pthread_mutex_unlock(&hb.mu);
}

int fixture_setup(void **state)
{
    (void)state;
    const char *bin_dir = getenv("LAPSE_BIN_DIR");
    const char *tmp = getenv("LAPSE_TEST_TMP");
    snprintf(fx.bin, sizeof(fx.bin), "%s/lapse-coordinator", bin_dir ? bin_dir : "./bin");
    if (tmp == NULL) {
        tmp = "/tmp";
    }
    mkdir(tmp, 0755);
    snprintf(fx.run_dir, sizeof(fx.run_dir), "%s/coordinator_test.XXXXXX", tmp);
    if (mkdtemp(fx.run_dir) == NULL) {
        fprintf(stderr, "mkdtemp %s: %s\n", fx.run_dir, strerror(errno));
        return -1;
    }
    snprintf(fx.data_dir, sizeof(fx.data_dir), "%s/data", fx.run_dir);
    snprintf(fx.log_path, sizeof(fx.log_path), "%s/coordinator.log", fx.run_dir);
    int port = freeport_loopback();
    snprintf(fx.url, sizeof(fx.url), "tcp://127.0.0.1:%d", port);
    for (int id = 1; id <= FIXTURE_NODES; id++) {
        snprintf(fx.node_url[id], sizeof(fx.node_url[id]), "tcp://127.0.0.1:%d",
                 freeport_loopback());
    }
    char err[256];
    if (port == 0 || rpc_client_open(&fx.cli, fx.url, err, sizeof(err)) != 0) {
        fprintf(stderr, "no port or client: %s\n", err);
        return -1;
    }
    pthread_mutex_init(&hb.mu, NULL);
    pthread_cond_init(&hb.cond, NULL);
    fixture_start_coordinator();
    if (pthread_create(&hb.thread, NULL, hb_main, NULL) != 0) {
        return -1;
    }
    return 0;
}

int fixture_teardown(void **state)
{
    (void)state;
    pthread_mutex_lock(&hb.mu);
    hb.stop = 1;
    pthread_cond_broadcast(&hb.cond);
    pthread_mutex_unlock(&hb.mu);
    pthread_join(hb.thread, NULL);
    int rv = 0;
    if (fx.pid > 0) {
        /* SIGTERM is a clean shutdown with exit status 0. */
        int status = 0;
        kill(fx.pid, SIGTERM);
        if (!fixture_wait_exit(fx.pid, 10000, &status)) {
            fprintf(stderr, "coordinator ignored SIGTERM (log: %s)\n", fx.log_path);
            kill(fx.pid, SIGKILL);
            waitpid(fx.pid, &status, 0);
            rv = -1;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "coordinator exited with status %d after SIGTERM (log: %s)\n", status,
                    fx.log_path);
            rv = -1;
        } else if (fixture_file_contains(fx.log_path, "Sanitizer") ||
                   fixture_file_contains(fx.log_path, "runtime error:")) {
            fprintf(stderr, "sanitizer report in %s\n", fx.log_path);
            rv = -1;
        } else if (!fixture_file_contains(fx.log_path, "shutting down")) {
            fprintf(stderr, "no shutdown log line in %s\n", fx.log_path);
            rv = -1;
        }
        fx.pid = 0;
    }
    rpc_client_close(fx.cli);
    return rv;
}

/* ------------------------------------------------------------------------ */
/* Helpers for calls                                                        */
/* ------------------------------------------------------------------------ */

int fixture_register_node(uint32_t id, const char *address, Lapse__Response **resp, char *err,
                          size_t errlen)
{
    Lapse__RegisterNodeRequest body = LAPSE__REGISTER_NODE_REQUEST__INIT;
    body.node_id = id;
    body.address = (char *)address;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_REGISTER_NODE;
    req.register_node = &body;
    return fixture_call(&req, resp, err, errlen);
}

int fixture_create_table(const char *name, const char *pk, const char *sk, uint32_t partitions,
                         Lapse__Response **resp, char *err, size_t errlen)
{
    Lapse__KeyDef pkd = LAPSE__KEY_DEF__INIT;
    Lapse__KeyDef skd = LAPSE__KEY_DEF__INIT;
    Lapse__TableSchema schema = LAPSE__TABLE_SCHEMA__INIT;
    schema.name = (char *)name;
    if (pk != NULL) {
        pkd.name = (char *)pk;
        pkd.type = LAPSE__KEY_TYPE__KEY_S;
        schema.partition_key = &pkd;
    }
    if (sk != NULL) {
        skd.name = (char *)sk;
        skd.type = LAPSE__KEY_TYPE__KEY_N;
        schema.sort_key = &skd;
    }
    schema.partitions = partitions;
    Lapse__CreateTableRequest body = LAPSE__CREATE_TABLE_REQUEST__INIT;
    body.schema = &schema;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_CREATE_TABLE;
    req.create_table = &body;
    return fixture_call(&req, resp, err, errlen);
}

static int table_call(int which, const char *name, Lapse__Response **resp, char *err, size_t errlen)
{
    Lapse__DescribeTableRequest d = LAPSE__DESCRIBE_TABLE_REQUEST__INIT;
    Lapse__DeleteTableRequest del = LAPSE__DELETE_TABLE_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    if (which == LAPSE__REQUEST__BODY_DESCRIBE_TABLE) {
        d.table = (char *)name;
        req.body_case = LAPSE__REQUEST__BODY_DESCRIBE_TABLE;
        req.describe_table = &d;
    } else {
        del.table = (char *)name;
        req.body_case = LAPSE__REQUEST__BODY_DELETE_TABLE;
        req.delete_table = &del;
    }
    return fixture_call(&req, resp, err, errlen);
}

int fixture_describe(const char *name, Lapse__Response **resp, char *err, size_t errlen)
{
    return table_call(LAPSE__REQUEST__BODY_DESCRIBE_TABLE, name, resp, err, errlen);
}

int fixture_delete_table(const char *name, Lapse__Response **resp, char *err, size_t errlen)
{
    return table_call(LAPSE__REQUEST__BODY_DELETE_TABLE, name, resp, err, errlen);
}

Lapse__PartitionMap *fixture_get_map(Lapse__Response **resp)
{
    Lapse__GetPartitionMapRequest body = LAPSE__GET_PARTITION_MAP_REQUEST__INIT;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_GET_PARTITION_MAP;
    req.get_partition_map = &body;
    char err[256];
    assert_code(fixture_call(&req, resp, err, sizeof(err)), 0, err);
    assert_int_equal((*resp)->body_case, LAPSE__RESPONSE__BODY_GET_PARTITION_MAP);
    assert_non_null((*resp)->get_partition_map->map);
    return (*resp)->get_partition_map->map;
}

const Lapse__NodeStatus *fixture_find_status(const Lapse__ClusterStatusResponse *cs, uint32_t id)
{
    for (size_t i = 0; i < cs->n_nodes; i++) {
        if (cs->nodes[i]->id == id) {
            return cs->nodes[i];
        }
    }
    return NULL;
}

/* State of node id in a fresh ClusterStatus. */
int fixture_node_state(uint32_t id)
{
    Lapse__Response *resp = NULL;
    char err[256];
    assert_code(fixture_cluster_status(&resp, err, sizeof(err)), 0, err);
    const Lapse__NodeStatus *ns = fixture_find_status(resp->cluster_status, id);
    assert_non_null(ns);
    int st = ns->state;
    rpc_response_free(resp);
    return st;
}

int64_t fixture_last_heartbeat_ms(uint32_t id)
{
    pthread_mutex_lock(&hb.mu);
    int64_t t = id <= FIXTURE_NODES ? hb.last_ok[id] : 0;
    pthread_mutex_unlock(&hb.mu);
    return t;
}
