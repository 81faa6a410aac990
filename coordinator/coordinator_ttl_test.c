/*
 * coordinator_ttl_test.c: black-box test of the coordinator's TTL
 * configuration (docs/ttl.md, "Configuration and propagation"): the
 * UpdateTimeToLive rules, the derived status from the nodes' progress
 * reports, durability across kill -9, the clock-skew pause in ClusterStatus
 * and the admin token. The real lapse-coordinator runs as a separate process
 * (fixture.h) with three fake nodes whose heartbeats carry TtlProgress; the
 * fake nodes mostly have no servers, so pushes fail and progress arrives
 * through heartbeats (one test gives them servers that answer pushes with
 * progress). Tests run in order against one coordinator. Waits are bounded
 * by a condition with a deadline, never bare sleeps.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../common/clock.h"
#include "coordinator_testutil.h"

#define ACT_ENABLE LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__ENABLE
#define ACT_DISABLE LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__DISABLE
#define ACT_PAUSE LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__PAUSE
#define ACT_RESUME LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__RESUME
#define STATUS_WAIT_MS 5000

/* Ids of the test tables, set when they are created. */
static uint32_t events_id, solo_id, solo_owner;

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static int update_ttl(const char *table, int action, const char *attr, int64_t offset,
                      int32_t guard, Lapse__Response **resp, char *err, size_t errlen)
{
    Lapse__UpdateTimeToLiveRequest body = LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__INIT;
    body.table = (char *)table;
    body.action = (Lapse__UpdateTimeToLiveRequest__Action)action;
    body.attribute = (char *)(attr != NULL ? attr : "");
    body.offset_seconds = offset;
    body.ignore_older_than_years = guard;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_UPDATE_TTL;
    req.update_ttl = &body;
    return fixture_call(&req, resp, err, errlen);
}

static int describe_ttl(const char *table, Lapse__Response **resp, char *err, size_t errlen)
{
    Lapse__DescribeTimeToLiveRequest body = LAPSE__DESCRIBE_TIME_TO_LIVE_REQUEST__INIT;
    body.table = (char *)table;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_DESCRIBE_TTL;
    req.describe_ttl = &body;
    return fixture_call(&req, resp, err, errlen);
}

/* A refused change: code and a message containing says. */
static void expect_refused(const char *table, int action, const char *attr, int64_t offset,
                           int32_t guard, int code, const char *says)
{
    char err[512];
    Lapse__Response *resp = NULL;
    assert_code(update_ttl(table, action, attr, offset, guard, &resp, err, sizeof(err)), code,
                err);
    if (strstr(err, says) == NULL) {
        fail_msg("action %d on %s: message '%s' does not say '%s'", action, table, err, says);
    }
    rpc_response_free(resp);
}

/* Makes a change that must succeed; returns the reply (caller frees). */
static Lapse__Response *change(const char *table, int action, const char *attr, int64_t offset,
                               int32_t guard)
{
    char err[512];
    Lapse__Response *resp = NULL;
    assert_code(update_ttl(table, action, attr, offset, guard, &resp, err, sizeof(err)), 0, err);
    assert_int_equal(resp->body_case, LAPSE__RESPONSE__BODY_UPDATE_TTL);
    assert_non_null(resp->update_ttl->description);
    assert_non_null(resp->update_ttl->description->config);
    return resp;
}

/* A fresh description of table; caller frees *resp. */
static const Lapse__TtlDescription *describe(const char *table, Lapse__Response **resp)
{
    char err[512];
    assert_code(describe_ttl(table, resp, err, sizeof(err)), 0, err);
    assert_int_equal((*resp)->body_case, LAPSE__RESPONSE__BODY_DESCRIBE_TTL);
    assert_non_null((*resp)->describe_ttl->description);
    return (*resp)->describe_ttl->description;
}

static void expect_status(const char *table, const char *want)
{
    Lapse__Response *resp = NULL;
    const Lapse__TtlDescription *d = describe(table, &resp);
    if (strcmp(d->status, want) != 0) {
        fail_msg("TTL status of %s is %s, expected %s (log: %s)", table, d->status, want,
                 fx.log_path);
    }
    rpc_response_free(resp);
}

/* Waits until the status of table is want, or fails. */
static void wait_status(const char *table, const char *want)
{
    clock_mono deadline = clock_mono_after_ms(STATUS_WAIT_MS);
    char last[32] = "";
    do {
        Lapse__Response *resp = NULL;
        const Lapse__TtlDescription *d = describe(table, &resp);
        snprintf(last, sizeof(last), "%s", d->status);
        rpc_response_free(resp);
        if (strcmp(last, want) == 0) {
            return;
        }
        clock_sleep_ms(20);
    } while (clock_mono_remaining_ms(deadline) > 0);
    fail_msg("TTL status of %s still %s after %d ms, expected %s (log: %s)", table, last,
             STATUS_WAIT_MS, want, fx.log_path);
}

/* Every fake node reports (config_version, done) on table. */
static void report_all(uint32_t table_id, uint64_t config_version, int done)
{
    for (uint32_t id = 1; id <= FIXTURE_NODES; id++) {
        fixture_set_ttl_progress(id, table_id, config_version, done);
    }
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

/* Three fake nodes, an 8-partition table over all of them and a 1-partition
 * table on one; DescribeTimeToLive of a never-configured table is DISABLED
 * with every holder listed, none reported. */
static void test_setup_and_describe_unconfigured(void **state)
{
    (void)state;
    char err[512];
    Lapse__Response *resp = NULL;
    for (uint32_t id = 1; id <= FIXTURE_NODES; id++) {
        assert_code(fixture_register_node(id, fx.node_url[id], &resp, err, sizeof(err)), 0, err);
        rpc_response_free(resp);
    }
    fixture_set_alive(FIXTURE_ALL_ALIVE);
    assert_code(fixture_create_table("events", "Id", NULL, 8, &resp, err, sizeof(err)), 0, err);
    events_id = resp->create_table->table->schema->id;
    rpc_response_free(resp);
    assert_code(fixture_create_table("solo", "Id", NULL, 1, &resp, err, sizeof(err)), 0, err);
    solo_id = resp->create_table->table->schema->id;
    solo_owner = resp->create_table->table->partitions[0]->node_ids[0];
    rpc_response_free(resp);

    const Lapse__TtlDescription *d = describe("events", &resp);
    assert_string_equal(d->status, "DISABLED");
    assert_false(d->config->enabled);
    assert_string_equal(d->config->attribute, "");
    assert_int_equal(d->config->config_version, 0);
    assert_int_equal(d->n_nodes, FIXTURE_NODES);
    for (size_t i = 0; i < d->n_nodes; i++) {
        assert_int_equal(d->nodes[i]->node_id, i + 1);
        assert_false(d->nodes[i]->reported);
        assert_null(d->nodes[i]->progress);
    }
    rpc_response_free(resp);
    d = describe("solo", &resp);
    assert_int_equal(d->n_nodes, 1);
    assert_int_equal(d->nodes[0]->node_id, solo_owner);
    rpc_response_free(resp);

    assert_code(describe_ttl("nope", &resp, err, sizeof(err)), LAPSE_ENOTFOUND, err);
    assert_non_null(strstr(err, "nope"));
    rpc_response_free(resp);
}

/* Bad arguments are EINVAL, unknown tables ENOTFOUND, and DynamoDB's state
 * rules on a never-configured table ESTATE, each with a clear message. */
static void test_update_errors(void **state)
{
    (void)state;
    char longname[300];
    memset(longname, 'a', 256);
    longname[256] = '\0';
    expect_refused("nope", ACT_ENABLE, "exp", 0, 0, LAPSE_ENOTFOUND, "table nope does not exist");
    expect_refused("events", ACT_ENABLE, "", 0, 0, LAPSE_EINVAL, "attribute name is required");
    expect_refused("events", ACT_ENABLE, longname, 0, 0, LAPSE_EINVAL, "at most 255");
    expect_refused("events", ACT_ENABLE, "exp", -1, 0, LAPSE_EINVAL, "must not be negative");
    expect_refused("events", ACT_ENABLE, "exp", 0, -1, LAPSE_EINVAL, "ignore_older_than_years");
    expect_refused("events", 7, "exp", 0, 0, LAPSE_EINVAL, "unknown TimeToLive action");
    expect_refused("events", ACT_DISABLE, NULL, 0, 0, LAPSE_ESTATE,
                   "TimeToLive is already disabled on table events");
    expect_refused("events", ACT_PAUSE, NULL, 0, 0, LAPSE_ESTATE,
                   "TimeToLive is not enabled on table events");
    expect_refused("events", ACT_RESUME, NULL, 0, 0, LAPSE_ESTATE,
                   "TimeToLive is not enabled on table events");
    /* 255 bytes is allowed (checked by a successful enable on solo later). */
    expect_status("events", "DISABLED");
}

/* ENABLE: durable config with config_version = the new map version and the
 * guard defaulted to 5; ENABLING until every holder reported that version
 * with backfill done (a holder still backfilling, or on an older version,
 * keeps it ENABLING); the rules while ENABLING and ENABLED. */
static void test_enable_propagates(void **state)
{
    (void)state;
    Lapse__Response *resp = change("events", ACT_ENABLE, "exp", 10, 0);
    const Lapse__TtlDescription *d = resp->update_ttl->description;
    assert_string_equal(d->status, "ENABLING"); /* no fake node answers pushes */
    assert_true(d->config->enabled);
    assert_string_equal(d->config->attribute, "exp");
    assert_int_equal(d->config->offset_seconds, 10);
    assert_int_equal(d->config->ignore_older_than_years, 5);
    assert_false(d->config->paused);
    uint64_t cv = d->config->config_version;
    assert_int_equal(cv, resp->pmap_version);
    rpc_response_free(resp);

    /* The map carries it to nodes. */
    Lapse__PartitionMap *map = fixture_get_map(&resp);
    int seen = 0;
    for (size_t i = 0; i < map->n_tables; i++) {
        const Lapse__TableSchema *ts = map->tables[i]->schema;
        if (ts->id == events_id) {
            assert_non_null(ts->ttl);
            assert_true(ts->ttl->enabled);
            assert_int_equal(ts->ttl->config_version, cv);
            seen = 1;
        }
    }
    assert_true(seen);
    rpc_response_free(resp);

    expect_refused("events", ACT_ENABLE, "exp", 10, 0, LAPSE_ESTATE,
                   "TimeToLive is already enabled on table events");
    expect_refused("events", ACT_ENABLE, "other", 0, 0, LAPSE_ESTATE, "disable it first");
    expect_refused("events", ACT_DISABLE, NULL, 0, 0, LAPSE_ESTATE,
                   "TimeToLive is being enabled on table events; retry when ENABLED");

    /* Nodes 1 and 2 are done, node 3 is still backfilling. */
    fixture_set_ttl_progress(1, events_id, cv, 1);
    fixture_set_ttl_progress(2, events_id, cv, 1);
    fixture_set_ttl_progress(3, events_id, cv, 0);
    fixture_wait_heartbeat_round();
    fixture_wait_heartbeat_round();
    d = describe("events", &resp);
    assert_string_equal(d->status, "ENABLING");
    for (size_t i = 0; i < d->n_nodes; i++) {
        assert_true(d->nodes[i]->reported);
        assert_non_null(d->nodes[i]->progress);
        assert_int_equal(d->nodes[i]->progress->config_version, cv);
        assert_int_equal(d->nodes[i]->progress->backfill_done, d->nodes[i]->node_id != 3);
        assert_int_equal(d->nodes[i]->progress->partitions_total, 2);
    }
    rpc_response_free(resp);

    /* Done, but on an older config version: still ENABLING. */
    fixture_set_ttl_progress(3, events_id, cv - 1, 1);
    fixture_wait_heartbeat_round();
    fixture_wait_heartbeat_round();
    expect_status("events", "ENABLING");

    fixture_set_ttl_progress(3, events_id, cv, 1);
    wait_status("events", "ENABLED");
    /* Still the rules once ENABLED. */
    expect_refused("events", ACT_ENABLE, "exp", 10, 0, LAPSE_ESTATE,
                   "TimeToLive is already enabled on table events");
}

/* PAUSE and RESUME change only `paused`: the map version moves (nodes get
 * it), config_version and the status do not; each is refused twice. */
static void test_pause_resume(void **state)
{
    (void)state;
    Lapse__Response *before_resp = NULL;
    const Lapse__TtlDescription *before = describe("events", &before_resp);
    uint64_t cv = before->config->config_version;
    uint64_t v0 = before_resp->pmap_version;
    rpc_response_free(before_resp);

    Lapse__Response *resp = change("events", ACT_PAUSE, NULL, 0, 0);
    const Lapse__TtlDescription *d = resp->update_ttl->description;
    assert_true(d->config->paused);
    assert_true(d->config->enabled);
    assert_int_equal(d->config->config_version, cv);
    assert_string_equal(d->status, "ENABLED");
    assert_int_equal(resp->pmap_version, v0 + 1);
    rpc_response_free(resp);
    expect_refused("events", ACT_PAUSE, NULL, 0, 0, LAPSE_ESTATE,
                   "TimeToLive is already paused on table events");

    resp = change("events", ACT_RESUME, NULL, 0, 0);
    d = resp->update_ttl->description;
    assert_false(d->config->paused);
    assert_int_equal(d->config->config_version, cv);
    assert_string_equal(d->status, "ENABLED");
    assert_int_equal(resp->pmap_version, v0 + 2);
    rpc_response_free(resp);
    expect_refused("events", ACT_RESUME, NULL, 0, 0, LAPSE_ESTATE,
                   "TimeToLive is not paused on table events");
}

/* Only the holders count: a one-partition table waits for its owner alone,
 * however long the owner stays silent, and ignores the other nodes. */
static void test_only_holders_count(void **state)
{
    (void)state;
    char attr[256];
    memset(attr, 'x', 255);
    attr[255] = '\0';
    Lapse__Response *resp = change("solo", ACT_ENABLE, attr, 0, 7);
    uint64_t cv = resp->update_ttl->description->config->config_version;
    assert_int_equal(resp->update_ttl->description->config->ignore_older_than_years, 7);
    assert_string_equal(resp->update_ttl->description->config->attribute, attr);
    rpc_response_free(resp);
    for (uint32_t id = 1; id <= FIXTURE_NODES; id++) {
        if (id != solo_owner) {
            fixture_set_ttl_progress(id, solo_id, cv, 1);
        }
    }
    /* The owner never reports: ENABLING through several rounds. */
    for (int i = 0; i < 3; i++) {
        fixture_wait_heartbeat_round();
    }
    expect_status("solo", "ENABLING");
    fixture_set_ttl_progress(solo_owner, solo_id, cv, 1);
    wait_status("solo", "ENABLED");
}

/* DISABLE: DISABLING until every holder dropped the index at the new
 * version, then DISABLED; the attribute is kept; ENABLE while DISABLING is
 * refused. */
static void test_disable_propagates(void **state)
{
    (void)state;
    Lapse__Response *resp = change("events", ACT_DISABLE, NULL, 0, 0);
    const Lapse__TtlDescription *d = resp->update_ttl->description;
    assert_string_equal(d->status, "DISABLING");
    assert_false(d->config->enabled);
    assert_string_equal(d->config->attribute, "exp");
    uint64_t cv = d->config->config_version;
    assert_int_equal(cv, resp->pmap_version);
    rpc_response_free(resp);

    expect_refused("events", ACT_ENABLE, "exp", 0, 0, LAPSE_ESTATE,
                   "TimeToLive is being disabled on table events; retry when DISABLED");
    expect_refused("events", ACT_DISABLE, NULL, 0, 0, LAPSE_ESTATE,
                   "TimeToLive is already disabled on table events");
    expect_refused("events", ACT_PAUSE, NULL, 0, 0, LAPSE_ESTATE, "not enabled");

    fixture_set_ttl_progress(1, events_id, cv, 1);
    fixture_set_ttl_progress(2, events_id, cv, 0);
    fixture_set_ttl_progress(3, events_id, cv, 1);
    fixture_wait_heartbeat_round();
    fixture_wait_heartbeat_round();
    expect_status("events", "DISABLING");
    fixture_set_ttl_progress(2, events_id, cv, 1);
    wait_status("events", "DISABLED");
}

/* A node that is down during an enable keeps the table ENABLING; when it
 * returns (and, being behind, pulls the map) its report completes it. */
static void test_down_node_completes_on_rejoin(void **state)
{
    (void)state;
    fixture_set_alive(FIXTURE_ALL_ALIVE & ~(1u << 3));
    clock_mono deadline = clock_mono_after_ms(8000);
    while (fixture_node_state(3) != LAPSE__NODE_STATE__NODE_DOWN) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node 3 still UP after 8 s of silence");
        }
        clock_sleep_ms(50);
    }
    Lapse__Response *resp = change("events", ACT_ENABLE, "exp2", 0, 0);
    uint64_t cv = resp->update_ttl->description->config->config_version;
    assert_string_equal(resp->update_ttl->description->status, "ENABLING");
    rpc_response_free(resp);
    fixture_set_ttl_progress(1, events_id, cv, 1);
    fixture_set_ttl_progress(2, events_id, cv, 1);
    fixture_set_ttl_progress(3, events_id, cv, 1); /* sent once it is back */
    fixture_wait_heartbeat_round();
    fixture_wait_heartbeat_round();
    expect_status("events", "ENABLING");
    const Lapse__TtlDescription *d = describe("events", &resp);
    for (size_t i = 0; i < d->n_nodes; i++) {
        if (d->nodes[i]->node_id == 3) {
            /* Its last report is of the previous (disable) version. */
            assert_true(d->nodes[i]->progress->config_version < cv);
        }
    }
    rpc_response_free(resp);

    fixture_set_alive(FIXTURE_ALL_ALIVE);
    wait_status("events", "ENABLED");
    assert_int_equal(fixture_node_state(3), LAPSE__NODE_STATE__NODE_UP);
}

/* A node that reports its scanners paused for clock skew shows it in
 * ClusterStatus, and the coordinator logs a warning; it clears again. */
static void test_clock_pause_in_cluster_status(void **state)
{
    (void)state;
    fixture_set_ttl_paused(FIXTURE_SKEW_NODE, 1);
    fixture_wait_heartbeat_round();
    char err[256];
    Lapse__Response *resp = NULL;
    assert_code(fixture_cluster_status(&resp, err, sizeof(err)), 0, err);
    for (uint32_t id = 1; id <= FIXTURE_NODES; id++) {
        const Lapse__NodeStatus *ns = fixture_find_status(resp->cluster_status, id);
        assert_non_null(ns);
        assert_int_equal(ns->ttl_paused_for_clock, id == FIXTURE_SKEW_NODE);
        if (id == FIXTURE_SKEW_NODE) {
            assert_true(ns->clock_skew_ms > FIXTURE_SKEW_MS - 1000);
        }
    }
    rpc_response_free(resp);
    if (!fixture_file_contains(fx.log_path, "paused its TTL scanners for clock skew")) {
        fail_msg("no warning about the pause in %s", fx.log_path);
    }

    fixture_set_ttl_paused(FIXTURE_SKEW_NODE, 0);
    fixture_wait_heartbeat_round();
    assert_code(fixture_cluster_status(&resp, err, sizeof(err)), 0, err);
    assert_false(fixture_find_status(resp->cluster_status, FIXTURE_SKEW_NODE)->ttl_paused_for_clock);
    rpc_response_free(resp);
    assert_true(fixture_file_contains(fx.log_path, "resumed its TTL scanners"));
}

/* A fake node server that takes every pushed map and, as a node with no
 * items would, reports every configured table applied and backfilled in
 * its reply. arg is unused. */
static void fake_node_handler(void *arg, const Lapse__Request *req, Lapse__Response *resp,
                              arena *a, int64_t deadline_mono_ms)
{
    (void)arg;
    (void)deadline_mono_ms;
    if (req->body_case != LAPSE__REQUEST__BODY_PUSH_PARTITION_MAP ||
        req->push_partition_map->map == NULL) {
        rpc_set_error(resp, a, LAPSE_EINVAL, "fake node takes pushes only");
        return;
    }
    const Lapse__PartitionMap *map = req->push_partition_map->map;
    Lapse__PushPartitionMapResponse *m = arena_alloc(a, sizeof(*m));
    Lapse__TtlProgress **ttl = arena_alloc(a, (map->n_tables + 1) * sizeof(*ttl));
    if (m == NULL || ttl == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__push_partition_map_response__init(m);
    for (size_t i = 0; i < map->n_tables; i++) {
        const Lapse__TableSchema *ts = map->tables[i]->schema;
        if (ts->ttl == NULL || ts->ttl->config_version == 0) {
            continue;
        }
        Lapse__TtlProgress *p = arena_alloc(a, sizeof(*p));
        if (p == NULL) {
            rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
            return;
        }
        lapse__ttl_progress__init(p);
        p->table_id = ts->id;
        p->config_version = ts->ttl->config_version;
        p->backfill_done = 1;
        ttl[m->n_ttl++] = p;
    }
    m->ttl = ttl;
    resp->body_case = LAPSE__RESPONSE__BODY_PUSH_PARTITION_MAP;
    resp->push_partition_map = m;
}

/* Progress in PushPartitionMap replies counts before UpdateTimeToLive
 * replies: with nodes that apply the map at once, an empty table is
 * ENABLED (and then DISABLED) in the reply itself. */
static void test_push_reply_completes_in_reply(void **state)
{
    (void)state;
    rpc_server *srv[FIXTURE_NODES + 1] = {NULL};
    char err[512];
    for (uint32_t id = 1; id <= FIXTURE_NODES; id++) {
        rpc_server_options opt = {0};
        assert_code(rpc_server_open(&srv[id], fx.node_url[id], &opt, fake_node_handler, NULL, err,
                                    sizeof(err)),
                    0, err);
    }
    Lapse__Response *resp = NULL;
    assert_code(fixture_create_table("empty", "Id", NULL, 4, &resp, err, sizeof(err)), 0, err);
    rpc_response_free(resp);

    resp = change("empty", ACT_ENABLE, "exp", 0, 0);
    const Lapse__TtlDescription *d = resp->update_ttl->description;
    assert_string_equal(d->status, "ENABLED");
    for (size_t i = 0; i < d->n_nodes; i++) {
        assert_true(d->nodes[i]->reported);
        assert_int_equal(d->nodes[i]->progress->config_version, d->config->config_version);
    }
    rpc_response_free(resp);
    resp = change("empty", ACT_DISABLE, NULL, 0, 0);
    assert_string_equal(resp->update_ttl->description->status, "DISABLED");
    rpc_response_free(resp);
    /* Heartbeats that carry no (or older) progress do not undo it. */
    fixture_wait_heartbeat_round();
    expect_status("empty", "DISABLED");

    for (uint32_t id = 1; id <= FIXTURE_NODES; id++) {
        rpc_server_close(srv[id]);
    }
    assert_code(fixture_delete_table("empty", &resp, err, sizeof(err)), 0, err);
    rpc_response_free(resp);
}

/* kill -9 and restart: the TTL config comes back from disk unchanged; the
 * status is re-derived from the reports the nodes send again. */
static void test_config_survives_kill9(void **state)
{
    (void)state;
    Lapse__Response *before_resp = NULL;
    const Lapse__TtlDescription *before = describe("events", &before_resp);
    assert_string_equal(before->status, "ENABLED");
    fixture_set_alive(0); /* no report reaches the new process until below */
    uint64_t cv = before->config->config_version;

    kill(fx.pid, SIGKILL);
    int status;
    assert_true(fixture_wait_exit(fx.pid, 10000, &status));
    fx.pid = 0;
    fixture_start_coordinator();

    Lapse__Response *resp = NULL;
    const Lapse__TtlDescription *d = describe("events", &resp);
    assert_true(d->config->enabled);
    assert_string_equal(d->config->attribute, before->config->attribute);
    assert_int_equal(d->config->offset_seconds, before->config->offset_seconds);
    assert_int_equal(d->config->ignore_older_than_years,
                     before->config->ignore_older_than_years);
    assert_int_equal(d->config->config_version, cv);
    assert_string_equal(d->status, "ENABLING"); /* nobody reported since the restart */
    for (size_t i = 0; i < d->n_nodes; i++) {
        assert_false(d->nodes[i]->reported);
    }
    rpc_response_free(resp);
    rpc_response_free(before_resp);
    d = describe("solo", &resp);
    assert_int_equal(d->config->ignore_older_than_years, 7);
    rpc_response_free(resp);

    report_all(events_id, cv, 1);
    fixture_set_alive(FIXTURE_ALL_ALIVE);
    wait_status("events", "ENABLED");
    wait_status("solo", "ENABLED"); /* the fake nodes still report solo */
}

/* Writes text to path. */
static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Restarts the coordinator (SIGTERM, exit 0) with extra flags. */
static void restart_with(const char *flag, const char *value)
{
    kill(fx.pid, SIGTERM);
    int status = 0;
    assert_true(fixture_wait_exit(fx.pid, 10000, &status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    fx.pid = 0;
    fx.extra_args[0] = flag;
    fx.extra_args[1] = value;
    fx.extra_args[2] = NULL;
    fixture_start_coordinator();
}

/* A bad token file stops the start with exit 1 and a reason. */
static void test_bad_admin_token_file(void **state)
{
    (void)state;
    char empty[1200], newline[1200], missing[1200];
    snprintf(empty, sizeof(empty), "%s/empty.token", fx.run_dir);
    snprintf(newline, sizeof(newline), "%s/newline.token", fx.run_dir);
    snprintf(missing, sizeof(missing), "%s/no-such.token", fx.run_dir);
    write_file(empty, "");
    write_file(newline, "\n");
    struct {
        const char *file;
        const char *says;
    } cases[] = {
        {missing, "cannot open admin token file"},
        {empty, "is empty"},
        {newline, "is empty"},
        {fx.run_dir, "admin token file"}, /* a directory: unreadable */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char log[1200], data[1200], url[64];
        snprintf(log, sizeof(log), "%s/token-%zu.log", fx.run_dir, i);
        snprintf(data, sizeof(data), "%s/token-data-%zu", fx.run_dir, i);
        snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", freeport_loopback());
        const char *args[] = {"--listen", url, "--data", data, "--admin-token-file", cases[i].file,
                              NULL};
        pid_t pid = fixture_spawn(log, args);
        int status = 0;
        if (!fixture_wait_exit(pid, 10000, &status)) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("case %zu: a coordinator with a bad token file kept running", i);
        }
        fixture_assert_no_sanitizer_report(log);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) != 1 || !fixture_file_contains(log, cases[i].says)) {
            fail_msg("case %zu: exit %d, expected 1 saying '%s' (see %s)", i, WEXITSTATUS(status),
                     cases[i].says, log);
        }
    }
}

/* With --admin-token-file, CreateTable, DeleteTable and UpdateTimeToLive
 * need the token (missing or wrong: EPERM, logged without the token); other
 * calls, heartbeats included, need none. */
static void test_admin_token(void **state)
{
    (void)state;
    static const char secret[] = "s3cret-Token";
    char path[1200];
    snprintf(path, sizeof(path), "%s/admin.token", fx.run_dir);
    write_file(path, "s3cret-Token\n"); /* one trailing newline is stripped */
    restart_with("--admin-token-file", path);

    const char *tokens[] = {NULL, "wrong", "s3cret-Token\n", "s3cret-Toke"};
    for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++) {
        fx.admin_token = tokens[i];
        char err[512];
        Lapse__Response *resp = NULL;
        assert_code(fixture_create_table("guarded", "Id", NULL, 4, &resp, err, sizeof(err)),
                    LAPSE_EPERM, err);
        assert_non_null(strstr(err, "admin token missing or wrong"));
        rpc_response_free(resp);
        assert_code(fixture_delete_table("solo", &resp, err, sizeof(err)), LAPSE_EPERM, err);
        rpc_response_free(resp);
        assert_code(update_ttl("solo", ACT_PAUSE, NULL, 0, 0, &resp, err, sizeof(err)),
                    LAPSE_EPERM, err);
        rpc_response_free(resp);
    }
    assert_true(fixture_file_contains(fx.log_path, "refused CreateTable on table guarded"));
    assert_true(fixture_file_contains(fx.log_path, "refused DeleteTable on table solo"));
    assert_true(fixture_file_contains(fx.log_path, "refused UpdateTimeToLive on table solo"));
    assert_false(fixture_file_contains(fx.log_path, secret));

    /* Other calls need no token. */
    fx.admin_token = NULL;
    wait_status("solo", "ENABLED"); /* once the nodes reported to the new process */
    char err[512];
    Lapse__Response *resp = NULL;
    assert_code(fixture_describe("solo", &resp, err, sizeof(err)), 0, err);
    rpc_response_free(resp);
    assert_code(fixture_cluster_status(&resp, err, sizeof(err)), 0, err);
    rpc_response_free(resp);
    fixture_wait_heartbeat_round();
    assert_int_equal(fixture_node_state(1), LAPSE__NODE_STATE__NODE_UP);

    /* The right token: every admin call goes through. */
    fx.admin_token = secret;
    assert_code(fixture_create_table("guarded", "Id", NULL, 4, &resp, err, sizeof(err)), 0, err);
    rpc_response_free(resp);
    resp = change("guarded", ACT_ENABLE, "exp", 0, 0);
    rpc_response_free(resp);
    resp = change("solo", ACT_PAUSE, NULL, 0, 0);
    rpc_response_free(resp);
    assert_code(fixture_delete_table("guarded", &resp, err, sizeof(err)), 0, err);
    rpc_response_free(resp);
    assert_code(describe_ttl("guarded", &resp, err, sizeof(err)), LAPSE_ENOTFOUND, err);
    rpc_response_free(resp);
    assert_false(fixture_file_contains(fx.log_path, secret));
    fx.admin_token = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setup_and_describe_unconfigured),
        cmocka_unit_test(test_update_errors),
        cmocka_unit_test(test_enable_propagates),
        cmocka_unit_test(test_pause_resume),
        cmocka_unit_test(test_only_holders_count),
        cmocka_unit_test(test_disable_propagates),
        cmocka_unit_test(test_down_node_completes_on_rejoin),
        cmocka_unit_test(test_clock_pause_in_cluster_status),
        cmocka_unit_test(test_push_reply_completes_in_reply),
        cmocka_unit_test(test_config_survives_kill9),
        cmocka_unit_test(test_bad_admin_token_file),
        cmocka_unit_test(test_admin_token),
    };
    return cmocka_run_group_tests(tests, fixture_setup, fixture_teardown);
}
