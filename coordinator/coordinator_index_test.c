/*
 * coordinator_index_test.c: black-box test of CreateTable with secondary
 * indexes and a stream against the real lapse-coordinator (fixture.h). Fake
 * node 1 is a real RPC server in this process that decodes every pushed map
 * as a node does (wire_pmap_from_pb), so the test sees what nodes receive.
 * The tests run in order against one coordinator; waits are bounded.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../rpc/wire.h"
#include "coordinator_testutil.h"

/* ------------------------------------------------------------------------ */
/* Fake node 1: records the maps pushed to it                               */
/* ------------------------------------------------------------------------ */

static struct {
    pthread_mutex_t mu;
    rpc_server *srv;
    pmap *last;    /* the last pushed map, decoded; guarded by mu */
    int refused;   /* pushes that did not decode; guarded by mu */
    char why[256]; /* the last refusal's reason; guarded by mu */
} node1 = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void node1_handler(void *arg, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                          int64_t deadline_mono_ms)
{
    (void)arg;
    (void)deadline_mono_ms;
    if (req->body_case != LAPSE__REQUEST__BODY_PUSH_PARTITION_MAP) {
        rpc_set_error(resp, a, LAPSE_EINVAL, "fake node: push only");
        return;
    }
    pmap *pm = NULL;
    char err[256] = "";
    int rv = wire_pmap_from_pb(req->push_partition_map->map, &pm, err, sizeof err);
    pthread_mutex_lock(&node1.mu);
    if (rv == 0 && pmap_check(pm)) {
        pmap_free(node1.last);
        node1.last = pm;
        pm = NULL;
    } else {
        node1.refused++;
        snprintf(node1.why, sizeof node1.why, "%s", err);
    }
    pthread_mutex_unlock(&node1.mu);
    pmap_free(pm);
    if (rv != 0) {
        rpc_set_error(resp, a, rv, "%s", err);
        return;
    }
    Lapse__PushPartitionMapResponse *m = arena_alloc(a, sizeof *m);
    if (m == NULL) {
        rpc_set_error(resp, a, LAPSE_ENOMEM, "out of memory");
        return;
    }
    lapse__push_partition_map_response__init(m);
    resp->body_case = LAPSE__RESPONSE__BODY_PUSH_PARTITION_MAP;
    resp->push_partition_map = m;
}

static int setup(void **state)
{
    if (fixture_setup(state) != 0) {
        return -1;
    }
    char err[256];
    if (rpc_server_open(&node1.srv, fx.node_url[1], NULL, node1_handler, NULL, err, sizeof err) !=
        0) {
        fprintf(stderr, "fake node 1 on %s: %s\n", fx.node_url[1], err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    rpc_server_close(node1.srv);
    pmap_free(node1.last);
    return fixture_teardown(state);
}

/* ------------------------------------------------------------------------ */
/* Building requests                                                        */
/* ------------------------------------------------------------------------ */

static Lapse__KeyDef *kd(arena *a, const char *name, Lapse__KeyType type)
{
    Lapse__KeyDef *k = arena_alloc(a, sizeof *k);
    lapse__key_def__init(k);
    k->name = arena_strdup(a, name);
    k->type = type;
    return k;
}

#define KS LAPSE__KEY_TYPE__KEY_S
#define KN LAPSE__KEY_TYPE__KEY_N

/* An index: pk NULL for an LSI, sk NULL for none. */
static Lapse__IndexDef *ix(arena *a, const char *name, const char *pk, Lapse__KeyType pkt,
                           const char *sk, Lapse__KeyType skt, int keys_only, uint32_t partitions)
{
    Lapse__IndexDef *d = arena_alloc(a, sizeof *d);
    lapse__index_def__init(d);
    d->id = 99; /* ignored: the coordinator numbers indexes */
    d->name = arena_strdup(a, name);
    d->partition_key = pk != NULL ? kd(a, pk, pkt) : NULL;
    d->sort_key = sk != NULL ? kd(a, sk, skt) : NULL;
    d->projection = keys_only ? LAPSE__INDEX_PROJECTION__PROJECTION_KEYS
                              : LAPSE__INDEX_PROJECTION__PROJECTION_ALL;
    d->partitions = partitions;
    return d;
}

/* A schema with pk Customer:S, sk OrderNo:N (when with_sk) and partitions. */
static Lapse__TableSchema *schema(arena *a, const char *name, int with_sk, uint32_t partitions)
{
    Lapse__TableSchema *s = arena_alloc(a, sizeof *s);
    lapse__table_schema__init(s);
    s->name = arena_strdup(a, name);
    s->partition_key = kd(a, "Customer", KS);
    s->sort_key = with_sk ? kd(a, "OrderNo", KN) : NULL;
    s->partitions = partitions;
    return s;
}

static void add_index(arena *a, Lapse__IndexDef ***v, size_t *n, Lapse__IndexDef *d)
{
    Lapse__IndexDef **nv = arena_alloc(a, (*n + 1) * sizeof *nv);
    if (*n > 0) {
        memcpy(nv, *v, *n * sizeof *nv);
    }
    nv[(*n)++] = d;
    *v = nv;
}

static Lapse__StreamConfig *stream(arena *a, int enabled, int exclude_ttl, uint32_t hours)
{
    Lapse__StreamConfig *s = arena_alloc(a, sizeof *s);
    lapse__stream_config__init(s);
    s->enabled = enabled;
    s->exclude_ttl_deletes = exclude_ttl;
    s->retention_hours = hours;
    return s;
}

static int create(Lapse__TableSchema *s, Lapse__Response **resp, char *err, size_t errlen)
{
    Lapse__CreateTableRequest body = LAPSE__CREATE_TABLE_REQUEST__INIT;
    body.schema = s;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_CREATE_TABLE;
    req.create_table = &body;
    return fixture_call(&req, resp, err, errlen);
}

/* The packed bytes of a table map (caller frees), for exact comparisons. */
static uint8_t *packed(const Lapse__TableMap *t, size_t *n)
{
    *n = lapse__table_map__get_packed_size(t);
    uint8_t *b = malloc(*n + 1);
    assert_non_null(b);
    lapse__table_map__pack(t, b);
    return b;
}

static void assert_same_table(const Lapse__TableMap *x, const Lapse__TableMap *y)
{
    size_t nx, ny;
    uint8_t *bx = packed(x, &nx), *by = packed(y, &ny);
    if (nx != ny || memcmp(bx, by, nx) != 0) {
        fail_msg("table maps of %s differ (%zu and %zu bytes)", x->schema->name, nx, ny);
    }
    free(bx);
    free(by);
}

static const Lapse__TableMap *find_table(const Lapse__PartitionMap *m, const char *name)
{
    for (size_t i = 0; i < m->n_tables; i++) {
        if (strcmp(m->tables[i]->schema->name, name) == 0) {
            return m->tables[i];
        }
    }
    fail_msg("table %s not in the map", name);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

static void test_nodes_up(void **state)
{
    (void)state;
    char err[256];
    for (uint32_t id = 1; id <= FIXTURE_NODES; id++) {
        Lapse__Response *resp = NULL;
        assert_code(fixture_register_node(id, fx.node_url[id], &resp, err, sizeof(err)), 0, err);
        rpc_response_free(resp);
    }
    fixture_set_alive(FIXTURE_ALL_ALIVE);
}

/* Ids 1.. (LSIs then GSIs), GSI partitions default to the table's, the
 * stream's defaults; GSI partitions and shards placed balanced over the UP
 * nodes, shards away from their partition's owner; the reply, DescribeTable
 * and the map node 1 was pushed all agree. */
static void test_create_indexed_table(void **state)
{
    (void)state;
    char err[256];
    arena a;
    arena_init(&a);
    Lapse__TableSchema *s = schema(&a, "orders", 1, 8);
    add_index(&a, &s->lsi, &s->n_lsi, ix(&a, "ByDate", NULL, 0, "Date", KS, 0, 0));
    add_index(&a, &s->gsi, &s->n_gsi, ix(&a, "ByStatus", "Status", KS, "Date", KS, 1, 0));
    add_index(&a, &s->gsi, &s->n_gsi, ix(&a, "ByProduct", "Product", KS, NULL, 0, 0, 4));
    s->stream = stream(&a, 1, 0, 0);
    s->stream->view = LAPSE__STREAM_VIEW__STREAM_VIEW_NEW_IMAGE;
    s->created_ms = 5; /* the coordinator's clock decides */
    Lapse__Response *resp = NULL;
    int64_t before = clock_wall_now().ms;
    assert_code(create(s, &resp, err, sizeof err), 0, err);
    arena_fini(&a);

    const Lapse__TableMap *t = resp->create_table->table;
    const Lapse__TableSchema *ts = t->schema;
    assert_int_equal(ts->n_lsi, 1);
    assert_int_equal(ts->n_gsi, 2);
    assert_int_equal(ts->lsi[0]->id, 1);
    assert_string_equal(ts->lsi[0]->sort_key->name, "Date");
    assert_null(ts->lsi[0]->partition_key);
    assert_int_equal(ts->gsi[0]->id, 2);
    assert_int_equal(ts->gsi[1]->id, 3);
    assert_int_equal(ts->gsi[0]->partitions, 8); /* the table's */
    assert_int_equal(ts->gsi[1]->partitions, 4);
    assert_int_equal(ts->gsi[0]->projection, LAPSE__INDEX_PROJECTION__PROJECTION_KEYS);
    assert_null(ts->gsi[1]->sort_key);
    assert_non_null(ts->stream);
    assert_true(ts->stream->enabled);
    assert_false(ts->stream->exclude_ttl_deletes);
    assert_int_equal(ts->stream->retention_hours, 24);
    assert_int_equal(ts->stream->view, LAPSE__STREAM_VIEW__STREAM_VIEW_NEW_IMAGE);
    assert_true(ts->created_ms >= before && ts->created_ms <= clock_wall_now().ms);

    assert_int_equal(t->n_gsi, 2);
    assert_int_equal(t->gsi[0]->n_partitions, 8);
    assert_int_equal(t->gsi[1]->n_partitions, 4);
    assert_int_equal(t->n_stream_shards, 8);
    for (size_t p = 0; p < 8; p++) {
        uint32_t host = t->stream_shards[p]->node_ids[0];
        assert_true(host >= 1 && host <= FIXTURE_NODES);
        assert_int_not_equal(host, t->partitions[p]->node_ids[0]);
    }

    /* Balance: base + GSI partitions 20 over 3 nodes, shards 8 over 3. */
    Lapse__Response *st = NULL;
    assert_code(fixture_cluster_status(&st, err, sizeof err), 0, err);
    uint32_t lo = UINT32_MAX, hi = 0, slo = UINT32_MAX, shi = 0, total = 0, shards = 0;
    for (size_t i = 0; i < st->cluster_status->n_nodes; i++) {
        const Lapse__NodeStatus *ns = st->cluster_status->nodes[i];
        uint32_t load = ns->partitions + ns->gsi_partitions;
        lo = load < lo ? load : lo;
        hi = load > hi ? load : hi;
        slo = ns->stream_shards < slo ? ns->stream_shards : slo;
        shi = ns->stream_shards > shi ? ns->stream_shards : shi;
        total += ns->gsi_partitions;
        shards += ns->stream_shards;
    }
    rpc_response_free(st);
    assert_int_equal(total, 12);
    assert_int_equal(shards, 8);
    if (hi - lo > 1 || shi - slo > 1) {
        fail_msg("unbalanced: partitions %u..%u, shards %u..%u", lo, hi, slo, shi);
    }

    Lapse__Response *d = NULL;
    assert_code(fixture_describe("orders", &d, err, sizeof err), 0, err);
    assert_same_table(t, d->describe_table->table);
    rpc_response_free(d);

    /* The push went out before the reply: node 1 holds this very map. */
    pthread_mutex_lock(&node1.mu);
    assert_int_equal(node1.refused, 0);
    assert_non_null(node1.last);
    assert_int_equal(node1.last->version, resp->pmap_version);
    const pmap_table *pt = pmap_table_find(node1.last, "orders");
    assert_non_null(pt);
    for (uint32_t g = 0; g < 2; g++) {
        for (uint32_t p = 0; p < pt->schema.gsi[g].partitions; p++) {
            assert_int_equal(pmap_gsi_owner(pt, g, p), t->gsi[g]->partitions[p]->node_ids[0]);
        }
    }
    for (uint32_t p = 0; p < 8; p++) {
        assert_int_equal(pmap_stream_host(pt, p), t->stream_shards[p]->node_ids[0]);
    }
    assert_int_equal(pt->schema.stream.ttl_deletes, 1);
    pthread_mutex_unlock(&node1.mu);
    rpc_response_free(resp);
}

/* A stream that is off carries nothing; excluded TTL deletes and an
 * explicit retention are kept. */
static void test_stream_settings(void **state)
{
    (void)state;
    char err[256];
    arena a;
    arena_init(&a);
    Lapse__TableSchema *s = schema(&a, "stream_off", 0, 4);
    s->stream = stream(&a, 0, 1, 5);
    Lapse__Response *resp = NULL;
    assert_code(create(s, &resp, err, sizeof err), 0, err);
    assert_null(resp->create_table->table->schema->stream);
    assert_int_equal(resp->create_table->table->n_stream_shards, 0);
    assert_int_equal(resp->create_table->table->n_gsi, 0);
    rpc_response_free(resp);

    s = schema(&a, "no_ttl_in_stream", 0, 2);
    s->stream = stream(&a, 1, 1, 72);
    assert_code(create(s, &resp, err, sizeof err), 0, err);
    const Lapse__StreamConfig *sc = resp->create_table->table->schema->stream;
    assert_non_null(sc);
    assert_true(sc->exclude_ttl_deletes);
    assert_int_equal(sc->retention_hours, 72);
    assert_int_equal(resp->create_table->table->n_stream_shards, 2);
    rpc_response_free(resp);
    arena_fini(&a);
}

static int update_stream(const char *table, int enabled, Lapse__StreamView view,
                         Lapse__Response **resp, char *err, size_t errlen)
{
    Lapse__UpdateStreamRequest body = LAPSE__UPDATE_STREAM_REQUEST__INIT;
    body.table = (char *)table;
    body.enabled = enabled;
    body.view = view;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    req.body_case = LAPSE__REQUEST__BODY_UPDATE_STREAM;
    req.update_stream = &body;
    return fixture_call(&req, resp, err, errlen);
}

/* UpdateStream on table stream_off (4 partitions, made without a stream):
 * on places 4 shards and starts generation 1 with its view and a label
 * time; on again is EEXISTS; off drops the shards and keeps the generation
 * (in the map's schema); off again is ESTATE; on again is generation 2,
 * labelled later. Left off at generation 2 for the kill -9 test to find in
 * the catalog. */
static void test_stream_turned_on_and_off(void **state)
{
    (void)state;
    char err[256];
    Lapse__Response *resp = NULL, *mresp = NULL;
    assert_code(update_stream("stream_off", 1, LAPSE__STREAM_VIEW__STREAM_VIEW_KEYS_ONLY, &resp,
                              err, sizeof err),
                0, err);
    const Lapse__StreamConfig *sc = resp->update_stream->stream;
    assert_true(sc->enabled);
    assert_int_equal(sc->generation, 1);
    assert_int_equal(sc->view, LAPSE__STREAM_VIEW__STREAM_VIEW_KEYS_ONLY);
    assert_int_equal(sc->retention_hours, 24);
    const int64_t since1 = sc->since_ms;
    assert_true(since1 > 0);
    rpc_response_free(resp);
    const Lapse__TableMap *t = find_table(fixture_get_map(&mresp), "stream_off");
    assert_int_equal(t->n_stream_shards, 4);
    assert_int_equal(t->schema->stream->generation, 1);
    rpc_response_free(mresp);

    assert_code(update_stream("stream_off", 1, LAPSE__STREAM_VIEW__STREAM_VIEW_NEW_IMAGE, &resp,
                              err, sizeof err),
                LAPSE_EEXISTS, err);
    rpc_response_free(resp);
    assert_code(update_stream("stream_off", 0, 0, &resp, err, sizeof err), 0, err);
    assert_false(resp->update_stream->stream->enabled);
    rpc_response_free(resp);
    t = find_table(fixture_get_map(&mresp), "stream_off");
    assert_int_equal(t->n_stream_shards, 0);
    assert_false(t->schema->stream->enabled);
    assert_int_equal(t->schema->stream->generation, 1);
    rpc_response_free(mresp);
    assert_code(update_stream("stream_off", 0, 0, &resp, err, sizeof err), LAPSE_ESTATE, err);
    rpc_response_free(resp);
    assert_code(update_stream("no_such_table", 1, 0, &resp, err, sizeof err), LAPSE_ENOTFOUND, err);
    rpc_response_free(resp);

    assert_code(update_stream("stream_off", 1, 0, &resp, err, sizeof err), 0, err);
    assert_int_equal(resp->update_stream->stream->generation, 2);
    assert_true(resp->update_stream->stream->since_ms > since1);
    rpc_response_free(resp);
    assert_code(update_stream("stream_off", 0, 0, &resp, err, sizeof err), 0, err);
    rpc_response_free(resp);
}

/* Each bad declaration is EINVAL naming the index; nothing is created and
 * the map version stays. */
static void test_bad_declarations_refused(void **state)
{
    (void)state;
    char err[256];
    Lapse__Response *resp = NULL;
    Lapse__PartitionMap *m = fixture_get_map(&resp);
    uint64_t version = m->version;
    size_t ntables = m->n_tables;
    rpc_response_free(resp);

    struct {
        const char *says;
    } cases[] = {
        {"LSI \"ByDate\" needs a table with a sort key"},
        {"index name \"Dup\" is used twice"},
        {"GSI \"Odd\": partition count 3 must be a power of two"},
        {"GSI \"NoKey\" partition key name must be 1-255 bytes"},
        {"6 LSIs; a table has at most 5"},
        {"21 GSIs; a table has at most 20"},
        {"stream retention of 9000 hours is over the limit of 8760"},
        {"GSI name \"by status\" may contain only"},
        {"key attribute \"OrderNo\" is of type N in the table but S in Clash"},
        {"LSI \"Twin\" has partition key \"Status\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        arena a;
        arena_init(&a);
        Lapse__TableSchema *s = schema(&a, "refused", i != 0, 4);
        switch (i) {
        case 0:
            add_index(&a, &s->lsi, &s->n_lsi, ix(&a, "ByDate", NULL, 0, "Date", KS, 0, 0));
            break;
        case 1:
            add_index(&a, &s->lsi, &s->n_lsi, ix(&a, "Dup", NULL, 0, "Date", KS, 0, 0));
            add_index(&a, &s->gsi, &s->n_gsi, ix(&a, "Dup", "Status", KS, NULL, 0, 0, 0));
            break;
        case 2:
            add_index(&a, &s->gsi, &s->n_gsi, ix(&a, "Odd", "Status", KS, NULL, 0, 0, 3));
            break;
        case 3:
            add_index(&a, &s->gsi, &s->n_gsi, ix(&a, "NoKey", NULL, 0, "Date", KS, 0, 0));
            break;
        case 4:
            for (int k = 0; k < 6; k++) {
                char name[16];
                snprintf(name, sizeof name, "lsi%d", k);
                add_index(&a, &s->lsi, &s->n_lsi, ix(&a, name, NULL, 0, "Date", KS, 0, 0));
            }
            break;
        case 5:
            for (int k = 0; k < 21; k++) {
                char name[16];
                snprintf(name, sizeof name, "gsi%d", k);
                add_index(&a, &s->gsi, &s->n_gsi, ix(&a, name, "Status", KS, NULL, 0, 0, 1));
            }
            break;
        case 6:
            s->stream = stream(&a, 1, 0, 9000);
            break;
        case 7:
            add_index(&a, &s->gsi, &s->n_gsi, ix(&a, "by status", "Status", KS, NULL, 0, 0, 0));
            break;
        case 8:
            add_index(&a, &s->gsi, &s->n_gsi, ix(&a, "Clash", "OrderNo", KS, NULL, 0, 0, 0));
            break;
        case 9:
            add_index(&a, &s->lsi, &s->n_lsi, ix(&a, "Twin", "Status", KS, "Date", KS, 0, 0));
            break;
        }
        assert_code(create(s, &resp, err, sizeof err), LAPSE_EINVAL, err);
        if (strstr(err, cases[i].says) == NULL) {
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, cases[i].says);
        }
        rpc_response_free(resp);
        arena_fini(&a);
    }
    m = fixture_get_map(&resp);
    assert_int_equal(m->version, version);
    assert_int_equal(m->n_tables, ntables);
    rpc_response_free(resp);
}

/* kill -9 and restart: every index, id, placement and stream setting comes
 * back from the catalog exactly. */
static void test_indexes_survive_kill9(void **state)
{
    (void)state;
    fixture_set_alive(0);
    Lapse__Response *before_resp = NULL;
    Lapse__PartitionMap *before = fixture_get_map(&before_resp);

    kill(fx.pid, SIGKILL);
    int status;
    assert_true(fixture_wait_exit(fx.pid, 10000, &status));
    fx.pid = 0;
    fixture_start_coordinator();

    Lapse__Response *resp = NULL;
    Lapse__PartitionMap *after = fixture_get_map(&resp);
    assert_int_equal(after->version, before->version);
    assert_int_equal(after->n_tables, before->n_tables);
    for (size_t i = 0; i < before->n_tables; i++) {
        assert_same_table(before->tables[i], find_table(after, before->tables[i]->schema->name));
    }
    const Lapse__TableMap *off = find_table(after, "stream_off");
    assert_int_equal(off->schema->stream->generation, 2); /* UpdateStream's, durable */
    assert_int_equal(off->n_stream_shards, 0);
    const Lapse__TableMap *orders = find_table(after, "orders");
    assert_int_equal(orders->schema->n_gsi, 2);
    assert_int_equal(orders->n_stream_shards, 8);
    rpc_response_free(resp);
    rpc_response_free(before_resp);

    /* The next table still gets fresh placements once nodes are back. */
    fixture_set_alive(FIXTURE_ALL_ALIVE);
    clock_mono deadline = clock_mono_after_ms(5000);
    while (fixture_node_state(3) != LAPSE__NODE_STATE__NODE_UP) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node 3 not UP again after the restart");
        }
        clock_sleep_ms(50);
    }
    char err[256];
    arena a;
    arena_init(&a);
    Lapse__TableSchema *s = schema(&a, "after_restart", 1, 2);
    add_index(&a, &s->gsi, &s->n_gsi, ix(&a, "ByStatus", "Status", KS, NULL, 0, 0, 0));
    assert_code(create(s, &resp, err, sizeof err), 0, err);
    assert_int_equal(resp->create_table->table->schema->gsi[0]->id, 1);
    assert_int_equal(resp->create_table->table->gsi[0]->n_partitions, 2);
    rpc_response_free(resp);
    arena_fini(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nodes_up),
        cmocka_unit_test(test_create_indexed_table),
        cmocka_unit_test(test_stream_settings),
        cmocka_unit_test(test_stream_turned_on_and_off),
        cmocka_unit_test(test_bad_declarations_refused),
        cmocka_unit_test(test_indexes_survive_kill9),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
