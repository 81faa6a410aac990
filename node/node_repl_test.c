/*
 * node_repl_test.c: black-box tests of replication on the node: the outbox
 * shipper, applying batches, index queries and the stream. The real
 * lapse-coordinator and two lapse-node daemons (posix_spawn, free loopback
 * ports, fresh dirs; harness in node_testutil.h); the table is created
 * through the coordinator, so the GSI partitions and stream shards are
 * placed as in production (with two nodes, each owns base and GSI
 * partitions and hosts the shards of the other's partitions).
 *
 * Proves: bad Replicate batches are refused (gap: ESTATE with the applied
 * seq; garbage: ECORRUPT) and the node lives on; index and stream calls
 * route (EWRONGNODE) and validate; puts, updates, GSI key moves and deletes
 * show in LSI and GSI queries and in every shard's stream, gapless, with
 * the right images; TTL deletes leave the GSI and appear exactly once in
 * the stream as TTL deletes with their instants; index queries with
 * hide_expired hide expired items (TTL paused); a long poll returns as
 * soon as a record arrives and empty after wait_ms; kill -9 of a node while
 * thousands of items expire, kill -9 of a source right after a burst of
 * writes, and a source dying at its fault point between a destination's
 * apply and its own ack, end with the GSI equal to the base table's
 * projection and exactly one INSERT and at most one REMOVE per item in
 * gapless shards; steady writes apply within milliseconds (printed);
 * /metrics serves the replication series (promtool-valid when installed);
 * a clean SIGTERM shutdown; stream retention trims. Every wait is a loop on
 * a condition with a deadline.
 */
#include <pthread.h>

#include "node_repl_testutil.h"

static char *const ttl2[] = {"--ttl-workers", "2", NULL};

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

static void cluster_starts(void **state)
{
    (void)state;
    if (!nt.have_coord) {
        fprintf(stderr, "lapse-coordinator is not built: the table needs its placements\n");
        skip();
    }
    int ports[NODES];
    free_ports(ports, NODES);
    for (int n = 0; n < NODES; n++) {
        metrics_port[n] = ports[n];
    }
    start_coord();
    for (int n = 0; n < NODES; n++) {
        start_repl_node(n, ttl2);
    }
    for (int n = 0; n < NODES; n++) {
        wait_serving(n);
    }
    wait_registered();
    create_repl_table();
    for (int n = 0; n < NODES; n++) {
        wait_up(n);
    }
    repl_started = 1;
}

/* A Replicate carrying the cluster's token (repl_call). */
static int replicate(int node, uint32_t table_id, uint32_t part, uint64_t from, uint64_t to,
                     ProtobufCBinaryData *recs, size_t n, uint64_t *applied, char *err)
{
    return repl_call(node, table_id, part, from, to, recs, n, REPL_TOKEN, applied, err);
}

static void replicate_refuses_bad_batches(void **state)
{
    (void)state;
    need_repl();
    char err[256];
    uint64_t applied = 0;
    uint32_t id = rt->schema.id;
    assert_int_equal(replicate(0, 999999, 0, 0, 1, NULL, 0, &applied, err), LAPSE_ENOTFOUND);
    /* Nothing was written yet: a batch after 5 leaves a gap. */
    assert_int_equal(replicate(0, id, 1, 5, 6, NULL, 0, &applied, err), LAPSE_ESTATE);
    assert_int_equal(applied, 0);
    fprintf(stderr, "gap: %s\n", err);
    uint8_t junk[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    ProtobufCBinaryData rec = {.len = sizeof(junk), .data = junk};
    assert_int_equal(replicate(0, id, 1, 0, 1, &rec, 1, &applied, err), LAPSE_ECORRUPT);
    fprintf(stderr, "garbage: %s\n", err);
    assert_int_equal(replicate(1, id, 1, 0, 1, &rec, 1, &applied, err), LAPSE_ECORRUPT);
    assert_int_equal(replicate(0, id, RT_PARTS, 0, 1, NULL, 0, &applied, err), LAPSE_EINVAL);
    assert_int_equal(replicate(0, id, 1, 3, 2, NULL, 0, &applied, err), LAPSE_EINVAL);
    /* A batch of none, (3, 3], asks where the copy stands: below 3 here. */
    assert_int_equal(replicate(0, id, 1, 3, 3, NULL, 0, &applied, err), LAPSE_ESTATE);
    assert_int_equal(applied, 0);
    /* Without the cluster token, or with another, nothing is even looked at:
     * an empty batch that would move the applied seq to 1 is refused. */
    assert_int_equal(repl_call(0, id, 1, 0, 1, NULL, 0, NULL, &applied, err), LAPSE_EPERM);
    assert_int_equal(repl_call(0, id, 1, 0, 1, NULL, 0, REPL_TOKEN "x", &applied, err),
                     LAPSE_EPERM);
    assert_int_equal(repl_call(0, id, 1, 0, 1, NULL, 0, "", &applied, err), LAPSE_EPERM);
    /* Nothing was applied, and both nodes still serve. */
    assert_int_equal(replicate(0, id, 1, 5, 6, NULL, 0, &applied, err), LAPSE_ESTATE);
    assert_int_equal(applied, 0);
    assert_int_equal(replicate(1, id, 1, 5, 6, NULL, 0, &applied, err), LAPSE_ESTATE);
    assert_int_equal(applied, 0);
    wait_serving(0);
    wait_serving(1);
}

static void index_and_stream_calls_route_and_validate(void **state)
{
    (void)state;
    need_repl();
    arena a;
    arena_init(&a);
    char err[256];
    int gi = pmap_gsi_find(rt, RT_GSI);
    uint32_t gp = part_of("g1", RT_GSI_PARTS);
    int owner = node_index(pmap_gsi_owner(rt, (uint32_t)gi, gp));
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__QueryRequest q = LAPSE__QUERY_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    q.table = RT;
    q.index = "no_such_index";
    q.partition_key = pb_s(&a, "g1");
    req.body_case = LAPSE__REQUEST__BODY_QUERY;
    req.query = &q;
    assert_int_equal(call(nt.nc[0], &req, &resp, err), LAPSE_EINVAL);
    rpc_response_free(resp);
    q.index = RT_GSI;
    q.index_partition = gp;
    assert_int_equal(call(nt.nc[1 - owner], &req, &resp, err), LAPSE_EWRONGNODE);
    fprintf(stderr, "GSI on another node: %s\n", err);
    rpc_response_free(resp);
    assert_int_equal(call(nt.nc[owner], &req, &resp, err), 0);
    rpc_response_free(resp);
    q.index_partition = (gp + 1) % RT_GSI_PARTS;
    assert_int_equal(call(nt.nc[owner], &req, &resp, err), LAPSE_EINVAL);
    rpc_response_free(resp);
    q.partition_key = pb_n(&a, "1"); /* g is S */
    q.index_partition = gp;
    assert_int_equal(call(nt.nc[owner], &req, &resp, err), LAPSE_EINVAL);
    rpc_response_free(resp);

    int host = node_index(pmap_stream_host(rt, 0));
    assert_int_equal(get_records(1 - host, 0, 0, 10, 0, &resp, err), LAPSE_EWRONGNODE);
    fprintf(stderr, "stream shard on another node: %s\n", err);
    rpc_response_free(resp);
    assert_int_equal(get_records(host, RT_PARTS, 0, 10, 0, &resp, err), LAPSE_EINVAL);
    rpc_response_free(resp);
    assert_int_equal(get_records(host, 0, 0, 10, 0, &resp, err), 0);
    assert_int_equal(resp->get_stream_records->n_records, 0);
    assert_int_equal(resp->get_stream_records->last_sequence, 0);
    rpc_response_free(resp);
    arena_fini(&a);
}

/* The expected event list of one key of the "a" items, in order. */
typedef struct want_ev {
    int event;
    char old_v[8], new_v[8];
} want_ev;

static void changes_show_in_indexes_and_stream(void **state)
{
    (void)state;
    need_repl();
    enum { N = 40 };
    char err[256];
    want_ev want[N][4];
    int nwant[N] = {0}, alive[N];
    ritem items[N];
    for (int i = 0; i < N; i++) {
        ritem *r = &items[i];
        memset(r, 0, sizeof(*r));
        snprintf(r->pk, sizeof(r->pk), "a%d", i % 10);
        r->sk = i;
        r->lv = 100 - i;
        r->g = i % 9 == 0 ? -1 : i % RT_G_VALUES;
        r->gs = i;
        snprintf(r->v, sizeof(r->v), "1");
        if (rput(r, err) != 0) {
            fail_msg("put: %s", err);
        }
        want[i][nwant[i]++] = (want_ev){LAPSE__STREAM_RECORD__EVENT_NAME__INSERT, "-", "1"};
        alive[i] = 1;
    }
    for (int i = 0; i < N; i += 4) { /* UpdateItem */
        assert_int_equal(rupdate_v(items[i].pk, i, "2", err), 0);
        want[i][nwant[i]++] = (want_ev){LAPSE__STREAM_RECORD__EVENT_NAME__MODIFY, "1", "2"};
        snprintf(items[i].v, sizeof(items[i].v), "2");
    }
    for (int i = 0; i < N; i += 5) { /* a put moving the item to another GSI key */
        ritem r = items[i];
        r.g = (i + 3) % RT_G_VALUES;
        snprintf(r.v, sizeof(r.v), "3");
        assert_int_equal(rput(&r, err), 0);
        want[i][nwant[i]] = (want_ev){LAPSE__STREAM_RECORD__EVENT_NAME__MODIFY, "", "3"};
        snprintf(want[i][nwant[i]++].old_v, 8, "%.7s", items[i].v);
        items[i] = r;
    }
    for (int i = 0; i < N; i += 7) {
        assert_int_equal(rdelete(items[i].pk, i, err), 0);
        want[i][nwant[i]] = (want_ev){LAPSE__STREAM_RECORD__EVENT_NAME__REMOVE, "", "-"};
        snprintf(want[i][nwant[i]++].old_v, 8, "%.7s", items[i].v);
        alive[i] = 0;
    }
    wait_gsi_equals_base("a", 10000);

    /* LSI: each partition key's live items in lv order, both ways. */
    arena a;
    arena_init(&a);
    for (int p = 0; p < 10; p++) {
        char pk[8];
        snprintf(pk, sizeof(pk), "a%d", p);
        for (int rev = 0; rev < 2; rev++) {
            Lapse__Request req = LAPSE__REQUEST__INIT;
            Lapse__QueryRequest q = LAPSE__QUERY_REQUEST__INIT;
            Lapse__Response *resp = NULL;
            q.table = RT;
            q.index = RT_LSI;
            q.partition_key = pb_s(&a, pk);
            q.reverse = rev;
            req.body_case = LAPSE__REQUEST__BODY_QUERY;
            req.query = &q;
            assert_int_equal(
                call(nt.nc[node_index(pmap_owner(rt, part_of(pk, RT_PARTS)))], &req, &resp, err),
                0);
            size_t k = 0;
            for (int j = rev ? p : N - 10 + p; rev ? j < N : j >= 0; j += rev ? 10 : -10) {
                if (!alive[j]) {
                    continue;
                }
                assert_true(k < resp->page->n_items);
                const Lapse__Item *it = resp->page->items[k++];
                for (size_t x = 0; x < it->n_attrs; x++) {
                    if (strcmp(it->attrs[x]->name, "sk") == 0) {
                        assert_int_equal(atoi(it->attrs[x]->value->n), j);
                    }
                }
            }
            assert_int_equal(k, resp->page->n_items);
            rpc_response_free(resp);
        }
    }
    arena_fini(&a);

    /* The stream: each key's events in order with the right images. */
    size_t total = 0;
    for (int i = 0; i < N; i++) {
        total += (size_t)nwant[i];
    }
    wait_stream_events("a", total, 10000);
    stream_ev *evs = NULL;
    size_t ne = stream_all("a", &evs);
    assert_int_equal(ne, total);
    if (ne > 0) {
        qsort(evs, ne, sizeof(*evs), cmp_ev);
    }
    for (int i = 0; i < N; i++) {
        char key[48];
        snprintf(key, sizeof(key), "%s|%d", items[i].pk, i);
        int k = 0;
        for (size_t e = 0; e < ne; e++) {
            if (strcmp(evs[e].key, key) != 0) {
                continue;
            }
            assert_true(k < nwant[i]);
            if (evs[e].event != want[i][k].event || strcmp(evs[e].old_v, want[i][k].old_v) != 0 ||
                strcmp(evs[e].new_v, want[i][k].new_v) != 0 || evs[e].ttl) {
                fail_msg("%s event %d: %d %s->%s, expected %d %s->%s", key, k, evs[e].event,
                         evs[e].old_v, evs[e].new_v, want[i][k].event, want[i][k].old_v,
                         want[i][k].new_v);
            }
            k++;
        }
        assert_int_equal(k, nwant[i]);
    }
    free(evs);
}

static void ttl_deletes_leave_the_gsi_and_stream_once(void **state)
{
    (void)state;
    need_repl();
    enum { N = 60 };
    char err[256];
    int64_t start_s = now_ms() / 1000;
    int removed[N];
    for (int i = 0; i < N; i++) {
        ritem r = {.sk = 0, .lv = i, .g = i % RT_G_VALUES, .gs = i, .exp = start_s + 1 + i % 2};
        snprintf(r.pk, sizeof(r.pk), "t%d", i);
        snprintf(r.v, sizeof(r.v), "ttl");
        assert_int_equal(rput(&r, err), 0);
        removed[i] = 1;
    }
    clock_mono deadline = clock_mono_after_ms(15000);
    while (base_count("t") > 0) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("%zu TTL items are still stored", base_count("t"));
        }
        clock_sleep_ms(100);
    }
    wait_gsi_equals_base("t", 10000);
    char **rows = NULL;
    assert_int_equal(gsi_rows("t", &rows), 0);
    free_rows(rows, 0);
    wait_stream_events("t", 2 * N, 10000);
    check_once("t", removed, NULL, N);
    stream_ev *evs = NULL;
    size_t ne = stream_all("t", &evs);
    for (size_t k = 0; k < ne; k++) {
        if (evs[k].event != LAPSE__STREAM_RECORD__EVENT_NAME__REMOVE) {
            continue;
        }
        int i = atoi(evs[k].key + 1);
        assert_string_equal(evs[k].ttl_attr, ATTR);
        assert_int_equal(evs[k].expires_ms, (start_s + 1 + i % 2) * 1000);
        assert_true(evs[k].deleted_ms >= evs[k].expires_ms);
        assert_true(evs[k].deleted_ms - evs[k].expires_ms < 10000);
        assert_int_equal(evs[k].created_ms, evs[k].deleted_ms);
        assert_string_equal(evs[k].old_v, "ttl");
        assert_string_equal(evs[k].new_v, "-");
    }
    free(evs);
}

static size_t lsi_count(const char *pk, int hide)
{
    arena a;
    arena_init(&a);
    char err[256];
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__QueryRequest q = LAPSE__QUERY_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    q.table = RT;
    q.index = RT_LSI;
    q.partition_key = pb_s(&a, pk);
    q.hide_expired = hide;
    req.body_case = LAPSE__REQUEST__BODY_QUERY;
    req.query = &q;
    assert_int_equal(
        call(nt.nc[node_index(pmap_owner(rt, part_of(pk, RT_PARTS)))], &req, &resp, err), 0);
    size_t n = resp->page->n_items;
    rpc_response_free(resp);
    arena_fini(&a);
    return n;
}

/* With TTL paused, expired items stay stored (and in the indexes); an
 * index query with hide_expired hides them, by the TTL attribute the
 * keys-only GSI entry carries. Resumed, they are deleted everywhere. */
static void index_queries_hide_expired_items(void **state)
{
    (void)state;
    need_repl();
    enum { N = 16 };
    char err[256], status[32];
    assert_int_equal(update_ttl(RT, LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__PAUSE, status,
                                sizeof(status), err),
                     0);
    refresh_rt();
    for (int i = 0; i < N; i++) {
        ritem r = {.sk = i, .lv = i, .g = i % RT_G_VALUES, .gs = i};
        snprintf(r.pk, sizeof(r.pk), "h%d", i % 2);
        r.exp = i % 2 == 0 ? now_ms() / 1000 - 60 : now_ms() / 1000 + 3600; /* h0 expired */
        snprintf(r.v, sizeof(r.v), "h");
        assert_int_equal(rput(&r, err), 0);
    }
    wait_gsi_equals_base("h", 10000);
    char **rows = NULL;
    size_t shown = gsi_rows_hide("h", 1, &rows);
    for (size_t i = 0; i < shown; i++) {
        assert_true(strncmp(rows[i], "h1|", 3) == 0);
    }
    free_rows(rows, shown);
    assert_int_equal(shown, N / 2);
    assert_int_equal(lsi_count("h0", 0), N / 2);
    assert_int_equal(lsi_count("h0", 1), 0);
    assert_int_equal(lsi_count("h1", 1), N / 2);
    assert_int_equal(update_ttl(RT, LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__RESUME, status,
                                sizeof(status), err),
                     0);
    refresh_rt();
    clock_mono deadline = clock_mono_after_ms(15000);
    while (base_count("h") != N / 2) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("%zu items of \"h\" stored, expected %d", base_count("h"), N / 2);
        }
        clock_sleep_ms(50);
    }
    wait_gsi_equals_base("h", 10000);
}

/* A long poll on a second thread. */
typedef struct poll_arg {
    int node;
    uint32_t shard;
    uint64_t after;
    uint32_t wait_ms;
    int rv;
    size_t n;
    int64_t done_ms; /* monotonic */
} poll_arg;

static void *poll_run(void *arg)
{
    poll_arg *p = arg;
    Lapse__Response *resp = NULL;
    char err[256];
    p->rv = get_records(p->node, p->shard, p->after, 10, p->wait_ms, &resp, err);
    p->done_ms = clock_mono_now().ms;
    p->n = p->rv == 0 ? resp->get_stream_records->n_records : 0;
    rpc_response_free(resp);
    return NULL;
}

static void long_poll_returns_on_arrival_or_after_wait(void **state)
{
    (void)state;
    need_repl();
    char err[256];
    int host = node_index(pmap_stream_host(rt, 0));
    Lapse__Response *resp = NULL;
    assert_int_equal(get_records(host, 0, 0, 1, 0, &resp, err), 0);
    uint64_t last = resp->get_stream_records->last_sequence;
    rpc_response_free(resp);

    poll_arg p = {.node = host, .shard = 0, .after = last, .wait_ms = 5000};
    pthread_t th;
    int64_t t0 = clock_mono_now().ms;
    assert_int_equal(pthread_create(&th, NULL, poll_run, &p), 0);
    clock_sleep_ms(300);
    ritem r = {.g = 1, .gs = 1, .lv = 1};
    for (int i = 0; part_of(r.pk, RT_PARTS) != 0 || i == 0; i++) {
        snprintf(r.pk, sizeof(r.pk), "w%d", i);
    }
    snprintf(r.v, sizeof(r.v), "poll");
    int64_t put_ms = clock_mono_now().ms;
    assert_int_equal(rput(&r, err), 0);
    pthread_join(th, NULL);
    assert_int_equal(p.rv, 0);
    assert_true(p.n >= 1);
    fprintf(stderr, "long poll: returned %lld ms after the put (waited %lld ms, wait_ms %u)\n",
            (long long)(p.done_ms - put_ms), (long long)(p.done_ms - t0), p.wait_ms);
    assert_true(p.done_ms - t0 < p.wait_ms);

    poll_arg q = {.node = host, .shard = 0, .after = last + p.n, .wait_ms = 700};
    t0 = clock_mono_now().ms;
    poll_run(&q);
    assert_int_equal(q.rv, 0);
    assert_int_equal(q.n, 0);
    fprintf(stderr, "empty long poll: %lld ms for wait_ms %u\n", (long long)(q.done_ms - t0),
            q.wait_ms);
    assert_true(q.done_ms - t0 >= 600);
    assert_true(q.done_ms - t0 < 5000);
}

/* Builds n "<prefix><i>" items; exp_s for those with i % 3 != 0 (the
 * others never expire), 0 for none. */
static ritem *burst_items(const char *prefix, int n, int64_t exp_s, int *expiring)
{
    ritem *items = calloc((size_t)n, sizeof(*items));
    assert_non_null(items);
    for (int i = 0; i < n; i++) {
        snprintf(items[i].pk, sizeof(items[i].pk), "%s%d", prefix, i);
        items[i].lv = i;
        items[i].g = i % RT_G_VALUES;
        items[i].gs = i;
        int dies = exp_s != 0 && i % 3 != 0;
        items[i].exp = dies ? exp_s : now_ms() / 1000 + 86400;
        snprintf(items[i].v, sizeof(items[i].v), "b");
        if (expiring != NULL) {
            expiring[i] = dies;
        }
    }
    return items;
}

static void destination_killed_while_thousands_expire(void **state)
{
    (void)state;
    need_repl();
    enum { N = 3000 };
    const int victim = 1, survivor = 0;
    int expiring[N];
    int64_t due_s = now_ms() / 1000 + 4;
    ritem *items = burst_items("k", N, due_s, expiring);
    rbatch_put(items, N, victim);
    wait_gsi_equals_base("k", 20000);
    int dying_on_survivor = 0, dying = 0;
    for (int i = 0; i < N; i++) {
        dying += expiring[i];
        dying_on_survivor +=
            expiring[i] && node_index(pmap_owner(rt, part_of(items[i].pk, RT_PARTS))) == survivor;
    }
    char series[96];
    snprintf(series, sizeof(series), "lapse_ttl_deleted_items_total{table=\"%s\"}", RT);
    double before = metric0(survivor, series);
    while (now_ms() < due_s * 1000 - 100) {
        clock_sleep_ms(10);
    }
    stop_proc(&nt.node[victim], SIGKILL); /* the GSI and stream destination dies */
    clock_mono deadline = clock_mono_after_ms(20000);
    while (metric0(survivor, series) - before < dying_on_survivor) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("the survivor deleted %.0f of %d items", metric0(survivor, series) - before,
                     dying_on_survivor);
        }
        clock_sleep_ms(50);
    }
    snprintf(series, sizeof(series), "lapse_outbox_pending_records{dest=\"%u\"}",
             nt.node[victim].id);
    double pending = metric0(survivor, series);
    fprintf(stderr, "node %d deleted %d items while node %d was down; %.0f records wait for it\n",
            survivor, dying_on_survivor, victim, pending);
    assert_true(pending > 0);
    start_repl_node(victim, ttl2);
    wait_up(victim);
    deadline = clock_mono_after_ms(30000);
    while (base_count("k") != (size_t)(N - dying)) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("%zu items stored, expected %d", base_count("k"), N - dying);
        }
        clock_sleep_ms(100);
    }
    wait_gsi_equals_base("k", 30000);
    wait_stream_events("k", (size_t)(N + dying), 30000);
    check_once("k", expiring, NULL, N);
    wait_pending_zero(20000);
    free(items);
}

static void source_killed_mid_shipping(void **state)
{
    (void)state;
    need_repl();
    enum { N = 3000 };
    const int victim = 0;
    ritem *items = burst_items("s", N, 0, NULL);
    rbatch_put(items, N, victim);
    stop_proc(&nt.node[victim], SIGKILL); /* right after its writes were acknowledged */
    start_repl_node(victim, ttl2);
    wait_up(victim);
    assert_int_equal(base_count("s"), N);
    wait_gsi_equals_base("s", 30000);
    wait_stream_events("s", N, 30000);
    check_once("s", NULL, NULL, N);
    wait_pending_zero(20000);
    fprintf(stderr, "node %d shipped %.0f batches after its restart\n", victim,
            metric0(victim, "lapse_replication_batches_total{result=\"ok\"}"));
    free(items);
}

/* Deterministic: the source dies (its fault point) after two batches were
 * applied at their destination and before it recorded their acks; restarted,
 * it resends them and the destination applies each record once. The
 * destination is down while the items are written, so the whole burst waits
 * in the outbox. */
static void source_killed_between_apply_and_ack(void **state)
{
    (void)state;
    need_repl();
    enum { N = 4000 };
    const int victim = 0, other = 1;
    int written[N];
    ritem *items = burst_items("r", N, 0, NULL);
    size_t nw = 0;
    for (int i = 0; i < N; i++) {
        written[i] = node_index(pmap_owner(rt, part_of(items[i].pk, RT_PARTS))) == victim;
        if (written[i]) {
            items[nw++] = items[i];
        }
    }
    stop_proc(&nt.node[other], SIGTERM); /* a clean stop, replication included */
    rbatch_put(items, nw, victim);
    stop_proc(&nt.node[victim], SIGTERM);
    char *const fault[] = {"--ttl-workers", "2", "--debug-repl-kill-after-batches", "2", NULL};
    start_repl_node(victim, fault);
    wait_serving(victim);
    start_repl_node(other, ttl2);
    wait_up(other);
    int st = wait_exit(nt.node[victim].pid, 30000);
    if (st == -1 || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
        fail_msg("node %d did not die at its fault point", victim);
    }
    nt.node[victim].pid = 0;
    assert_true(log_contains(nt.node[victim].log, "test fault point"));
    start_repl_node(victim, ttl2);
    wait_up(victim);
    assert_int_equal(base_count("r"), nw);
    wait_gsi_equals_base("r", 30000);
    wait_stream_events("r", nw, 30000);
    check_once("r", NULL, written, N);
    wait_pending_zero(20000);
    fprintf(stderr, "%zu items; node %d resent %.0f batches after its restart\n", nw, victim,
            metric0(victim, "lapse_replication_batches_total{result=\"ok\"}"));
    free(items);
}

/* The lag histogram's count, sum and some buckets, summed over the nodes. */
typedef struct lag_snap {
    double count, sum, le[4];
} lag_snap;

static const char *const lag_le[4] = {"0.001", "0.0025", "0.005", "0.01"};

static lag_snap lag_now(void)
{
    lag_snap l = {0};
    for (int n = 0; n < NODES; n++) {
        l.count += metric0(n, "lapse_replication_lag_seconds_count");
        l.sum += metric0(n, "lapse_replication_lag_seconds_sum");
        for (int b = 0; b < 4; b++) {
            char series[96];
            snprintf(series, sizeof(series), "lapse_replication_lag_seconds_bucket{le=\"%s\"}",
                     lag_le[b]);
            l.le[b] += metric0(n, series);
        }
    }
    return l;
}

/* Commit-to-apply lag with every node up: 1000 puts, one at a time. */
static void steady_writes_apply_within_milliseconds(void **state)
{
    (void)state;
    need_repl();
    enum { N = 1000 };
    char err[256];
    lag_snap before = lag_now();
    for (int i = 0; i < N; i++) {
        ritem r = {.g = i % RT_G_VALUES, .gs = i, .lv = i};
        snprintf(r.pk, sizeof(r.pk), "l%d", i);
        snprintf(r.v, sizeof(r.v), "l");
        assert_int_equal(rput(&r, err), 0);
    }
    wait_gsi_equals_base("l", 10000);
    wait_stream_events("l", N, 10000);
    lag_snap after = lag_now();
    double count = after.count - before.count;
    assert_true(count >= 2 * N); /* every record reaches a shard and a GSI partition */
    double mean_ms = (after.sum - before.sum) / count * 1000;
    fprintf(stderr, "commit-to-apply lag of %.0f records: mean %.2f ms", count, mean_ms);
    for (int b = 0; b < 4; b++) {
        fprintf(stderr, ", %.1f%% <= %s s", (after.le[b] - before.le[b]) / count * 100, lag_le[b]);
    }
    fprintf(stderr, "\n");
    assert_true(mean_ms < 1000);
}

static void metrics_serve_the_replication_series(void **state)
{
    (void)state;
    need_repl();
    /* Fresh traffic on both nodes (the counters restarted with them):
     * items already expired, deleted by TTL at once. */
    char err[256];
    int removed[20];
    for (int i = 0; i < 20; i++) {
        ritem r = {.g = i % RT_G_VALUES, .gs = i, .lv = i, .exp = now_ms() / 1000 - 10};
        snprintf(r.pk, sizeof(r.pk), "m%d", i);
        snprintf(r.v, sizeof(r.v), "m");
        assert_int_equal(rput(&r, err), 0);
        removed[i] = 1;
    }
    wait_stream_events("m", 40, 10000);
    check_once("m", removed, NULL, 20);
    static char body[1 << 20];
    for (int n = 0; n < NODES; n++) {
        assert_int_equal(scrape(n, body, sizeof(body)), 0);
        const char *want[] = {
            "lapse_outbox_pending_records{dest=\"1\"}",
            "lapse_outbox_pending_records{dest=\"2\"}",
            "lapse_replication_lag_seconds_bucket{le=\"0.01\"}",
            "lapse_replication_lag_seconds_count",
            "lapse_stream_records_total{event=\"INSERT\",principal=\"user\"}",
            "lapse_stream_records_total{event=\"REMOVE\",principal=\"lapse.ttl\"}",
            "lapse_replication_batches_total{result=\"ok\"}",
            "lapse_rpc_requests_total{call=\"Replicate\",status=\"OK\"}",
            "lapse_rpc_requests_total{call=\"GetStreamRecords\",status=\"OK\"}",
        };
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
            if (strstr(body, want[i]) == NULL) {
                fail_msg("node %d: /metrics lacks %s", n, want[i]);
            }
        }
        double count = metric(n, "lapse_replication_lag_seconds_count");
        double sum = metric(n, "lapse_replication_lag_seconds_sum");
        double b10 = metric(n, "lapse_replication_lag_seconds_bucket{le=\"0.01\"}");
        double b100 = metric(n, "lapse_replication_lag_seconds_bucket{le=\"0.1\"}");
        fprintf(stderr,
                "node %d: %.0f records applied, mean commit-to-apply lag %.1f ms, %.1f%% within "
                "10 ms, %.1f%% within 100 ms (kills included)\n",
                n, count, count > 0 ? sum / count * 1000 : 0, count > 0 ? b10 / count * 100 : 0,
                count > 0 ? b100 / count * 100 : 0);
        char *text = strstr(body, "\r\n\r\n");
        assert_non_null(text);
        char path[PATH_MAX], cmd[PATH_MAX * 2];
        PATHF(path, "%s/metrics-repl-%d.txt", nt.root, n);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text + 4, f);
        fclose(f);
        if (system("command -v promtool >/dev/null 2>&1") == 0) {
            snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
            assert_int_equal(system(cmd), 0);
        } else if (n == 0) {
            fprintf(stderr, "promtool not installed: exposition format not checked\n");
        }
    }
}

static void stream_retention_trims_old_records(void **state)
{
    (void)state;
    need_repl();
    char err[256];
    const int h = node_index(pmap_stream_host(rt, 0));
    uint64_t last[RT_PARTS] = {0};
    for (uint32_t s = 0; s < RT_PARTS; s++) {
        Lapse__Response *resp = NULL;
        if (node_index(pmap_stream_host(rt, s)) != h) {
            continue;
        }
        assert_int_equal(get_records(h, s, 0, 1, 0, &resp, err), 0);
        last[s] = resp->get_stream_records->last_sequence;
        rpc_response_free(resp);
    }
    assert_true(last[0] > 0);
    /* A clean stop, then two hours later by its clock: the 1 h stream is
     * past its retention. */
    stop_proc(&nt.node[h], SIGTERM);
    char *const later[] = {"--debug-clock-offset-ms", "7300000", "--debug-stream-trim-interval-ms",
                           "200", NULL};
    start_repl_node(h, later);
    wait_serving(h);
    clock_mono deadline = clock_mono_after_ms(15000);
    for (uint32_t s = 0; s < RT_PARTS; s++) {
        if (node_index(pmap_stream_host(rt, s)) != h) {
            continue;
        }
        for (;;) {
            Lapse__Response *resp = NULL;
            assert_int_equal(get_records(h, s, 0, 10, 0, &resp, err), 0);
            size_t n = resp->get_stream_records->n_records;
            uint64_t oldest = resp->get_stream_records->oldest_sequence;
            assert_int_equal(resp->get_stream_records->last_sequence, last[s]);
            rpc_response_free(resp);
            if (n == 0 && oldest == 0) {
                break;
            }
            if (clock_mono_remaining_ms(deadline) == 0) {
                fail_msg("shard %u still holds records from %llu", s, (unsigned long long)oldest);
            }
            clock_sleep_ms(50);
        }
    }
    assert_true(metric0(h, "lapse_stream_trimmed_records_total") > 0);
    /* A long poll behind the trimmed records answers at once. */
    Lapse__Response *resp = NULL;
    int64_t t0 = clock_mono_now().ms;
    assert_int_equal(get_records(h, 0, 0, 10, 3000, &resp, err), 0);
    assert_int_equal(resp->get_stream_records->n_records, 0);
    assert_int_equal(resp->get_stream_records->last_sequence, last[0]);
    rpc_response_free(resp);
    assert_true(clock_mono_now().ms - t0 < 2000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cluster_starts),
        cmocka_unit_test(replicate_refuses_bad_batches),
        cmocka_unit_test(index_and_stream_calls_route_and_validate),
        cmocka_unit_test(changes_show_in_indexes_and_stream),
        cmocka_unit_test(ttl_deletes_leave_the_gsi_and_stream_once),
        cmocka_unit_test(index_queries_hide_expired_items),
        cmocka_unit_test(long_poll_returns_on_arrival_or_after_wait),
        cmocka_unit_test(destination_killed_while_thousands_expire),
        cmocka_unit_test(source_killed_mid_shipping),
        cmocka_unit_test(source_killed_between_apply_and_ack),
        cmocka_unit_test(steady_writes_apply_within_milliseconds),
        cmocka_unit_test(metrics_serve_the_replication_series),
        cmocka_unit_test(stream_retention_trims_old_records),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
