/*
 * node_ttl_test.c: black-box tests of the node's expiry engine. The real
 * lapse-coordinator and two lapse-node daemons (posix_spawn, free loopback
 * ports, fresh dirs; harness in node_testutil.h); TTL is configured through
 * the coordinator's UpdateTimeToLive, exactly as the CLI does.
 *
 * Proves: enabling is reported at once; items fall due and are gone within
 * 2 s of their due instant; extended, 5-year-old, string and missing TTLs
 * survive; hide_expired never returns an expired item (Get, BatchGet, Query,
 * Scan); disabling stops deletion; the backfill indexes items written before
 * the enable and resumes after kill -9; a node whose clock is 5 s off pauses
 * and deletes nothing, and resumes when it is right; /metrics serves the
 * series (promtool-valid when promtool is installed); TtlPreview counts a
 * known data set. Every wait is a loop on a condition with a deadline.
 */
#include <arpa/inet.h>
#include <sys/time.h>

#include "node_ttl_testutil.h"

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

static void cluster_starts(void **state)
{
    (void)state;
    if (!nt.have_coord) {
        fprintf(stderr, "lapse-coordinator is not built: TTL needs it (UpdateTimeToLive)\n");
        skip();
    }
    int ports[NODES];
    free_ports(ports, NODES);
    for (int n = 0; n < NODES; n++) {
        metrics_port[n] = ports[n];
    }
    start_coord();
    for (int n = 0; n < NODES; n++) {
        start_ttl_node(n);
    }
    for (int n = 0; n < NODES; n++) {
        wait_serving(n);
    }
    wait_registered();
    create_table_via_coordinator();
    /* Scanners start at the first clock check (first heartbeat answer). */
    for (int n = 0; n < NODES; n++) {
        clock_mono deadline = clock_mono_after_ms(10000);
        while (!log_contains(nt.node[n].log, "TTL scanners start")) {
            if (clock_mono_remaining_ms(deadline) == 0) {
                fail_msg("node %d made no clock check", n);
            }
            clock_sleep_ms(20);
        }
    }
    nt.started = 1;
}

/* Written before the enable: only the backfill can index them. */
static int64_t before_due_s;

static void enable_is_reported_at_once(void **state)
{
    (void)state;
    need_cluster();
    before_due_s = now_ms() / 1000 - 10;
    for (int i = 0; i < 20; i++) {
        char pk[32];
        snprintf(pk, sizeof(pk), "before%d", i);
        put_exp(pk, before_due_s);
    }
    /* Six years old: the backfill finds them ignored (too_old). */
    enum { NOLD = 7 };
    for (int i = 0; i < NOLD; i++) {
        char pk[32];
        snprintf(pk, sizeof(pk), "before-ancient%d", i);
        put_exp(pk, before_due_s - 6 * 31557600LL);
    }
    char status[32], err[256];
    clock_mono t0 = clock_mono_now();
    int rv = update_ttl(TABLE, LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__ENABLE, status,
                        sizeof(status), err);
    int64_t took = clock_mono_now().ms - t0.ms;
    if (rv != 0) {
        fail_msg("UpdateTimeToLive enable: %s: %s", lapse_strerror(rv), err);
    }
    fprintf(stderr, "UpdateTimeToLive(enable) returned %s after %lld ms\n", status,
            (long long)took);
    if (strcmp(status, "ENABLED") != 0) {
        wait_status(TABLE, "ENABLED", 5000);
        fprintf(stderr, "ENABLED after %lld ms\n", (long long)(clock_mono_now().ms - t0.ms));
    }
    fetch_map();
    assert_true(nt.t->schema.ttl.enabled);
    /* ENABLED: every node's backfill is done and counted what it ignored. */
    char series[256];
    snprintf(series, sizeof(series), "lapse_ttl_ignored_items{table=\"%s\",reason=\"too_old\"}",
             TABLE);
    double old = 0;
    for (int n = 0; n < NODES; n++) {
        double v = metric(n, series);
        old += v > 0 ? v : 0;
    }
    if (old != NOLD) {
        fail_msg("%s summed over the nodes is %.0f after the backfill, want %d", series, old, NOLD);
    }
}

static void due_items_are_gone_within_2s(void **state)
{
    (void)state;
    need_cluster();
    enum { NDUE = 24 };
    int64_t start_s = now_ms() / 1000;
    int64_t due_ms[NDUE];
    int64_t gone_ms[NDUE] = {0};
    char pk[NDUE][32];
    for (int i = 0; i < NDUE; i++) {
        snprintf(pk[i], sizeof(pk[i]), "due%d", i);
        int64_t exp = start_s + 1 + (i % 2); /* due in 1 or 2 s */
        due_ms[i] = exp * 1000;
        put_exp(pk[i], exp);
    }
    /* Extended before they fall due: must survive. */
    for (int i = 0; i < 4; i++) {
        char p[32];
        snprintf(p, sizeof(p), "extended%d", i);
        put_exp(p, start_s + 1);
        put_exp(p, start_s + 3600);
    }
    /* Never eligible: 6 years old, a string, no attribute. */
    arena a;
    arena_init(&a);
    char err[256], exp[32];
    for (int i = 0; i < 3; i++) {
        char p[32];
        snprintf(p, sizeof(p), "ancient%d", i);
        put_exp(p, start_s - 6 * 31557600LL);
        snprintf(p, sizeof(p), "string%d", i);
        snprintf(exp, sizeof(exp), "%lld", (long long)start_s);
        assert_int_equal(put(owner_in(TABLE, p), &a, ttl_item(&a, p, NULL, exp), NULL, err), 0);
        snprintf(p, sizeof(p), "noattr%d", i);
        assert_int_equal(put(owner_in(TABLE, p), &a, ttl_item(&a, p, NULL, NULL), NULL, err), 0);
    }
    arena_fini(&a);

    int left = NDUE;
    int64_t worst = 0;
    clock_mono deadline = clock_mono_after_ms(10000);
    while (left > 0) {
        for (int i = 0; i < NDUE; i++) {
            if (gone_ms[i] == 0 && !present(pk[i], 0)) {
                gone_ms[i] = now_ms();
                left--;
                int64_t lag = gone_ms[i] - due_ms[i];
                worst = lag > worst ? lag : worst;
                if (lag > 2000) {
                    fail_msg("%s deleted %lld ms after its due instant", pk[i], (long long)lag);
                }
            }
        }
        for (int i = 0; i < NDUE; i++) {
            if (gone_ms[i] == 0 && now_ms() > due_ms[i] + 2000) {
                fail_msg("%s still there 2 s after its due instant", pk[i]);
            }
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("%d due items not deleted", left);
        }
        clock_sleep_ms(10);
    }
    fprintf(stderr, "24 items deleted, worst observed lag %lld ms (poll every ~10 ms)\n",
            (long long)worst);
    for (int i = 0; i < 20; i++) {
        char p[32];
        snprintf(p, sizeof(p), "before%d", i);
        if (present(p, 0)) {
            fail_msg("%s (written before the enable, due long ago) was not deleted", p);
        }
    }
    for (int i = 0; i < 4; i++) {
        char p[32];
        snprintf(p, sizeof(p), "extended%d", i);
        assert_true(present(p, 0));
    }
    for (int i = 0; i < 3; i++) {
        char p[32];
        snprintf(p, sizeof(p), "ancient%d", i);
        assert_true(present(p, 0));
        snprintf(p, sizeof(p), "string%d", i);
        assert_true(present(p, 0));
        snprintf(p, sizeof(p), "noattr%d", i);
        assert_true(present(p, 0));
    }
}

static void hide_expired_never_returns_an_expired_item(void **state)
{
    (void)state;
    need_cluster();
    char status[32], err[256];
    assert_int_equal(update_ttl(TABLE, LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__PAUSE, status,
                                sizeof(status), err),
                     0);
    /* The pause must reach both nodes before the items fall due. */
    fetch_map();
    assert_true(nt.t->schema.ttl.paused);
    enum { NH = 6 };
    char pk[NH][32];
    int64_t due = (now_ms() / 1000 + 2) * 1000;
    for (int i = 0; i < NH; i++) {
        snprintf(pk[i], sizeof(pk[i]), "hidden%d", i);
        put_exp(pk[i], due / 1000);
    }
    /* Around the due instant: a hide_expired read that started after it
     * never returns the item. */
    while (now_ms() < due + 300) {
        for (int i = 0; i < NH; i++) {
            int64_t started = now_ms();
            if (present(pk[i], 1) && started > due) {
                fail_msg("%s returned with hide_expired %lld ms after its due instant", pk[i],
                         (long long)(started - due));
            }
        }
    }
    for (int i = 0; i < NH; i++) {
        int q, s, b;
        assert_false(present(pk[i], 1));
        assert_true(present(pk[i], 0)); /* paused: still stored */
        hidden_reads(pk[i], &q, &s, &b);
        assert_int_equal(q, 0);
        assert_int_equal(s, 0);
        assert_int_equal(b, 0);
    }
    /* Paused, the due items are the table's backlog (a count at most a
     * second old): the gauge must show exactly them. */
    const char *series = "lapse_ttl_expired_backlog_items{table=\"" TABLE "\"}";
    clock_mono bdl = clock_mono_after_ms(5000);
    double backlog = -1;
    for (;;) {
        backlog = 0;
        for (int i = 0; i < NODES; i++) {
            backlog += metric(i, series);
        }
        if (backlog == NH) {
            break;
        }
        if (clock_mono_remaining_ms(bdl) == 0) {
            fail_msg("%s sums to %g over the nodes, want %d", series, backlog, NH);
        }
        clock_sleep_ms(200);
    }
    assert_int_equal(update_ttl(TABLE, LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__RESUME, status,
                                sizeof(status), err),
                     0);
    clock_mono deadline = clock_mono_after_ms(2000);
    for (int i = 0; i < NH; i++) {
        while (present(pk[i], 0)) {
            if (clock_mono_remaining_ms(deadline) == 0) {
                fail_msg("%s not deleted within 2 s of the resume", pk[i]);
            }
            clock_sleep_ms(10);
        }
    }
}

static void disable_stops_deletion(void **state)
{
    (void)state;
    need_cluster();
    char status[32], err[256];
    int rv = update_ttl(TABLE, LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__DISABLE, status,
                        sizeof(status), err);
    if (rv != 0) {
        fail_msg("disable: %s: %s", lapse_strerror(rv), err);
    }
    if (strcmp(status, "DISABLED") != 0) {
        wait_status(TABLE, "DISABLED", 5000);
    }
    int64_t due = (now_ms() / 1000 + 1) * 1000;
    for (int i = 0; i < 6; i++) {
        char p[32];
        snprintf(p, sizeof(p), "kept%d", i);
        put_exp(p, due / 1000);
    }
    /* Well past the 2 s deletion bound, every item must still be there. */
    while (now_ms() < due + 2500) {
        for (int i = 0; i < 6; i++) {
            char p[32];
            snprintf(p, sizeof(p), "kept%d", i);
            if (!present(p, 0)) {
                fail_msg("%s deleted although TTL is disabled", p);
            }
        }
        clock_sleep_ms(50);
    }
}

/* Puts BF_ITEMS items of BF_TABLE, all due a minute ago, in batches per
 * owner. Returns how many node n got in *per_node. */
static void fill_backfill_table(int per_node[NODES])
{
    arena a[NODES]; /* one per node: a flush frees only that node's writes */
    char exp[32], err[256];
    snprintf(exp, sizeof(exp), "%lld", (long long)(now_ms() / 1000 - 60));
    Lapse__WriteRequest **w[NODES];
    size_t nw[NODES] = {0};
    for (int n = 0; n < NODES; n++) {
        arena_init(&a[n]);
        w[n] = calloc(1000, sizeof(**w));
        assert_non_null(w[n]);
        per_node[n] = 0;
    }
    for (int i = 0; i <= BF_ITEMS; i++) {
        for (int n = 0; n < NODES; n++) {
            if (nw[n] > 0 && (nw[n] == 1000 || i == BF_ITEMS)) {
                Lapse__Request req = LAPSE__REQUEST__INIT;
                Lapse__BatchWriteRequest body = LAPSE__BATCH_WRITE_REQUEST__INIT;
                Lapse__Response *resp = NULL;
                body.table = BF_TABLE;
                body.writes = w[n];
                body.n_writes = nw[n];
                req.body_case = LAPSE__REQUEST__BODY_BATCH_WRITE;
                req.batch_write = &body;
                int rv = call(nt.nc[n], &req, &resp, err);
                if (rv != 0 || resp->batch_write->n_unprocessed != 0) {
                    fail_msg("batch write to node %d: %s: %s", n, lapse_strerror(rv), err);
                }
                rpc_response_free(resp);
                nw[n] = 0;
                arena_fini(&a[n]);
                arena_init(&a[n]);
            }
        }
        if (i == BF_ITEMS) {
            break;
        }
        char pk[32];
        snprintf(pk, sizeof(pk), "bf%07d", i);
        int n = owner_in(BF_TABLE, pk);
        Lapse__WriteRequest *wr = arena_alloc(&a[n], sizeof(*wr));
        lapse__write_request__init(wr);
        wr->put = pb_item(&a[n], "pk", pb_s(&a[n], pk), ATTR, pb_n(&a[n], exp), NULL);
        w[n][nw[n]++] = wr;
        per_node[n]++;
    }
    for (int n = 0; n < NODES; n++) {
        free(w[n]);
        arena_fini(&a[n]);
    }
}

/* node i's progress on table id in a description, or NULL. */
static Lapse__TtlProgress *progress_of(Lapse__TtlDescription *d, int i)
{
    for (size_t k = 0; d != NULL && k < d->n_nodes; k++) {
        if (d->nodes[k]->node_id == nt.node[i].id && d->nodes[k]->reported) {
            return d->nodes[k]->progress;
        }
    }
    return NULL;
}

static uint64_t count_items(const char *table)
{
    const pmap_table *t = table_of(table);
    uint64_t total = 0;
    for (uint32_t p = 0; p < t->schema.partitions; p++) {
        for (int n = 0; n < NODES; n++) {
            if (nt.node[n].id != pmap_owner(t, p)) {
                continue;
            }
            Lapse__Item *start = NULL;
            do {
                Lapse__Request req = LAPSE__REQUEST__INIT;
                Lapse__ScanRequest body = LAPSE__SCAN_REQUEST__INIT;
                Lapse__Response *resp = NULL;
                char err[256];
                body.table = (char *)table;
                body.partition = p;
                body.exclusive_start_key = start;
                req.body_case = LAPSE__REQUEST__BODY_SCAN;
                req.scan = &body;
                if (call(nt.nc[n], &req, &resp, err) != 0) {
                    fail_msg("scan: %s", err);
                }
                total += resp->page->n_items;
                start = NULL;
                if (resp->page->last_evaluated_key != NULL) {
                    /* Continue after it: re-pack into our own copy. */
                    static arena keep;
                    static int inited;
                    if (inited) {
                        arena_fini(&keep);
                    }
                    arena_init(&keep);
                    inited = 1;
                    item *k = NULL;
                    char why[256];
                    assert_int_equal(
                        wire_item_from_pb(resp->page->last_evaluated_key, &k, why, sizeof(why)), 0);
                    start = wire_item_to_pb(&keep, k);
                    item_free(k);
                }
                rpc_response_free(resp);
            } while (start != NULL);
        }
    }
    return total;
}

static void backfill_resumes_after_kill_9(void **state)
{
    (void)state;
    need_cluster();
    int per_node[NODES];
    create_table(BF_TABLE, BF_PARTS);
    clock_mono t0 = clock_mono_now();
    fill_backfill_table(per_node);
    fprintf(stderr, "%d items written (%d on node 0) in %lld ms\n", BF_ITEMS, per_node[0],
            (long long)(clock_mono_now().ms - t0.ms));
    char status[32], err[256];
    assert_int_equal(update_ttl(BF_TABLE, LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__ENABLE,
                                status, sizeof(status), err),
                     0);
    /* Node 0 (rate-limited) reports a backfill under way: kill it. */
    clock_mono deadline = clock_mono_after_ms(20000);
    uint64_t before_kill = 0;
    for (;;) {
        Lapse__Response *resp = NULL;
        Lapse__TtlProgress *p = progress_of(describe_ttl(BF_TABLE, &resp), 0);
        int under_way = p != NULL && p->backfill_items > 0 && !p->backfill_done;
        before_kill = p != NULL ? p->backfill_items : 0;
        int done = p != NULL && p->backfill_done;
        rpc_response_free(resp);
        if (done) {
            fail_msg("node 0 finished its backfill before the kill: raise BF_ITEMS");
        }
        if (under_way) {
            break;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node 0 reports no backfill progress");
        }
        clock_sleep_ms(20);
    }
    stop_proc(&nt.node[0], SIGKILL);
    fprintf(stderr, "node 0 killed after reporting %llu of %d items backfilled\n",
            (unsigned long long)before_kill, per_node[0]);
    start_ttl_node(0);
    wait_serving(0);
    wait_status(BF_TABLE, "ENABLED", 60000);
    Lapse__Response *resp = NULL;
    Lapse__TtlProgress *p = progress_of(describe_ttl(BF_TABLE, &resp), 0);
    assert_non_null(p);
    assert_true(p->backfill_done);
    /* Resumed, not restarted: the new process scanned only what was left. */
    fprintf(stderr, "after the restart node 0 scanned %llu more items\n",
            (unsigned long long)p->backfill_items);
    assert_true(p->backfill_items < (uint64_t)per_node[0]);
    rpc_response_free(resp);
    assert_true(log_contains(nt.node[0].log, "complete"));
    /* Everything was due a minute ago: the scanners delete all of it. */
    deadline = clock_mono_after_ms(30000);
    uint64_t left;
    while ((left = count_items(BF_TABLE)) != 0) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("%llu backfilled items not deleted", (unsigned long long)left);
        }
        clock_sleep_ms(100);
    }
}

static void skewed_clock_pauses_deletion(void **state)
{
    (void)state;
    need_cluster();
    /* Node 1 restarts 5 s ahead: items due in 1-2 s look overdue to it. */
    stop_proc(&nt.node[1], SIGTERM);
    skewed[1] = 1;
    start_ttl_node(1);
    wait_serving(1);
    clock_mono deadline = clock_mono_after_ms(10000);
    while (metric(1, "lapse_ttl_paused_for_clock") != 1) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node 1 does not report lapse_ttl_paused_for_clock 1");
        }
        clock_sleep_ms(20);
    }
    double skew = metric(1, "lapse_clock_skew_seconds");
    assert_true(skew > 4 && skew < 6);
    assert_true(log_contains(nt.node[1].log, "TTL scanners paused"));
    /* The coordinator hears it in the heartbeats. */
    deadline = clock_mono_after_ms(5000);
    for (;;) {
        Lapse__Request req = LAPSE__REQUEST__INIT;
        Lapse__ClusterStatusRequest body = LAPSE__CLUSTER_STATUS_REQUEST__INIT;
        Lapse__Response *resp = NULL;
        char err[256];
        req.body_case = LAPSE__REQUEST__BODY_CLUSTER_STATUS;
        req.cluster_status = &body;
        int paused = 0;
        if (coord_call(&req, &resp, err) == 0) {
            for (size_t i = 0; i < resp->cluster_status->n_nodes; i++) {
                Lapse__NodeStatus *ns = resp->cluster_status->nodes[i];
                paused |= ns->id == nt.node[1].id && ns->ttl_paused_for_clock;
            }
        }
        rpc_response_free(resp);
        if (paused) {
            break;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("cluster status does not show node 1 paused for clock skew");
        }
        clock_sleep_ms(50);
    }
    /* Items of node 1 (BF_TABLE has TTL enabled) due in 1 s: none deleted. */
    arena a;
    arena_init(&a);
    char exp[32], err[256];
    int64_t due = (now_ms() / 1000 + 1) * 1000;
    snprintf(exp, sizeof(exp), "%lld", (long long)(due / 1000));
    int mine = 0;
    for (int i = 0; i < 200 && mine < 10; i++) {
        char pk[32];
        snprintf(pk, sizeof(pk), "skew%d", i);
        if (owner_in(BF_TABLE, pk) != 1) {
            continue;
        }
        Lapse__Request req = LAPSE__REQUEST__INIT;
        Lapse__PutItemRequest body = LAPSE__PUT_ITEM_REQUEST__INIT;
        Lapse__Response *resp = NULL;
        body.table = BF_TABLE;
        body.item = pb_item(&a, "pk", pb_s(&a, pk), ATTR, pb_n(&a, exp), NULL);
        req.body_case = LAPSE__REQUEST__BODY_PUT_ITEM;
        req.put_item = &body;
        assert_int_equal(call(nt.nc[1], &req, &resp, err), 0);
        rpc_response_free(resp);
        mine++;
    }
    arena_fini(&a);
    while (now_ms() < due + 2500) {
        if (count_items(BF_TABLE) != (uint64_t)mine) {
            fail_msg("a node paused for clock skew deleted items");
        }
        clock_sleep_ms(100);
    }
    assert_true(metric(1, "lapse_ttl_paused_for_clock") == 1);
    /* Back on time: it resumes and deletes them. */
    stop_proc(&nt.node[1], SIGTERM);
    skewed[1] = 0;
    start_ttl_node(1);
    wait_serving(1);
    deadline = clock_mono_after_ms(10000);
    while (count_items(BF_TABLE) != 0) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node 1 did not resume deleting with a correct clock");
        }
        clock_sleep_ms(50);
    }
    assert_true(metric(1, "lapse_ttl_paused_for_clock") == 0);
}

static void metrics_are_served(void **state)
{
    (void)state;
    need_cluster();
    static char body[1 << 20];
    assert_int_equal(scrape(0, body, sizeof(body)), 0);
    static const char *const want[] = {
        "lapse_ttl_deleted_items_total{",
        "lapse_ttl_expired_backlog_items{",
        "lapse_ttl_oldest_undeleted_age_seconds{",
        "lapse_ttl_deletion_lag_seconds_bucket{le=\"0.005\"}",
        "lapse_ttl_deletion_lag_seconds_count",
        "lapse_ttl_config_version{",
        "lapse_ttl_backfill_items_total{",
        "lapse_ttl_ignored_items{",
        "lapse_clock_skew_seconds",
        "lapse_ttl_paused_for_clock",
        "lapse_rpc_requests_total{call=\"Scan\",status=\"OK\"}",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (strstr(body, want[i]) == NULL) {
            fail_msg("/metrics lacks %s:\n%s", want[i], body);
        }
    }
    /* promtool validates the exposition when installed. */
    char *text = strstr(body, "\r\n\r\n");
    assert_non_null(text);
    char path[PATH_MAX], cmd[PATH_MAX * 2];
    PATHF(path, "%s/metrics.txt", nt.root);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text + 4, f);
    fclose(f);
    if (system("command -v promtool >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
        assert_int_equal(system(cmd), 0);
    } else {
        fprintf(stderr, "promtool not installed: exposition format not checked\n");
    }
}

static void ttl_preview_counts_a_known_data_set(void **state)
{
    (void)state;
    need_cluster();
    create_table(PV_TABLE, 8);
    arena a;
    arena_init(&a);
    char err[256];
    int64_t now_s = now_ms() / 1000;
    char v_now[32], v_hour[32], v_day[32], v_later[32], v_old[32];
    snprintf(v_now, sizeof(v_now), "%lld", (long long)(now_s - 100));
    snprintf(v_hour, sizeof(v_hour), "%lld.75", (long long)(now_s + 600));
    snprintf(v_day, sizeof(v_day), "%lld", (long long)(now_s + 7200));
    snprintf(v_later, sizeof(v_later), "%lld", (long long)(now_s + 10 * 86400));
    snprintf(v_old, sizeof(v_old), "%lld", (long long)(now_s - 6 * 31557600LL));
    const char *ns[] = {v_now, v_now, v_now, v_hour, v_hour, v_day, v_day, v_later, v_old, "1e17"};
    int k = 0;
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++, k++) {
        char pk[32];
        snprintf(pk, sizeof(pk), "pv%d", k);
        Lapse__Request req = LAPSE__REQUEST__INIT;
        Lapse__PutItemRequest body = LAPSE__PUT_ITEM_REQUEST__INIT;
        Lapse__Response *resp = NULL;
        body.table = PV_TABLE;
        body.item = pb_item(&a, "pk", pb_s(&a, pk), ATTR, pb_n(&a, ns[i]), NULL);
        req.body_case = LAPSE__REQUEST__BODY_PUT_ITEM;
        req.put_item = &body;
        assert_int_equal(call(nt.nc[owner_in(PV_TABLE, pk)], &req, &resp, err), 0);
        rpc_response_free(resp);
    }
    for (int j = 0; j < 4; j++, k++) { /* 2 missing, 2 not a number */
        char pk[32];
        snprintf(pk, sizeof(pk), "pv%d", k);
        Lapse__Request req = LAPSE__REQUEST__INIT;
        Lapse__PutItemRequest body = LAPSE__PUT_ITEM_REQUEST__INIT;
        Lapse__Response *resp = NULL;
        body.table = PV_TABLE;
        body.item = j < 2 ? pb_item(&a, "pk", pb_s(&a, pk), NULL)
                          : pb_item(&a, "pk", pb_s(&a, pk), ATTR, pb_s(&a, v_now), NULL);
        req.body_case = LAPSE__REQUEST__BODY_PUT_ITEM;
        req.put_item = &body;
        assert_int_equal(call(nt.nc[owner_in(PV_TABLE, pk)], &req, &resp, err), 0);
        rpc_response_free(resp);
    }
    uint64_t sum[9] = {0};
    for (int n = 0; n < NODES; n++) {
        Lapse__Request req = LAPSE__REQUEST__INIT;
        Lapse__TtlPreviewRequest body = LAPSE__TTL_PREVIEW_REQUEST__INIT;
        Lapse__Response *resp = NULL;
        body.table = PV_TABLE;
        body.attribute = ATTR;
        req.body_case = LAPSE__REQUEST__BODY_TTL_PREVIEW;
        req.ttl_preview = &body;
        int rv = call(nt.nc[n], &req, &resp, err);
        if (rv != 0) {
            fail_msg("TtlPreview on node %d: %s: %s", n, lapse_strerror(rv), err);
        }
        Lapse__TtlPreviewResponse *r = resp->ttl_preview;
        uint64_t v[9] = {r->items,   r->due_now,      r->due_hour, r->due_day,     r->due_later,
                         r->missing, r->not_a_number, r->too_old,  r->out_of_range};
        for (int i = 0; i < 9; i++) {
            sum[i] += v[i];
        }
        rpc_response_free(resp);
    }
    uint64_t want[9] = {14, 3, 2, 2, 1, 2, 2, 1, 1};
    for (int i = 0; i < 9; i++) {
        if (sum[i] != want[i]) {
            fail_msg("TtlPreview field %d: %llu, expected %llu", i, (unsigned long long)sum[i],
                     (unsigned long long)want[i]);
        }
    }
    /* Bad requests. */
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__TtlPreviewRequest body = LAPSE__TTL_PREVIEW_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.table = PV_TABLE;
    body.attribute = "";
    req.body_case = LAPSE__REQUEST__BODY_TTL_PREVIEW;
    req.ttl_preview = &body;
    assert_int_equal(call(nt.nc[0], &req, &resp, err), LAPSE_EINVAL);
    rpc_response_free(resp);
    body.attribute = ATTR;
    body.offset_seconds = -1;
    assert_int_equal(call(nt.nc[0], &req, &resp, err), LAPSE_EINVAL);
    rpc_response_free(resp);
    body.offset_seconds = 0;
    body.table = "node_ttl.nosuchtable";
    assert_int_equal(call(nt.nc[0], &req, &resp, err), LAPSE_ENOTFOUND);
    rpc_response_free(resp);
    arena_fini(&a);
}

static void nodes_stop_cleanly(void **state)
{
    (void)state;
    need_cluster();
    for (int n = 0; n < NODES; n++) {
        stop_proc(&nt.node[n], SIGTERM); /* asserts exit status 0 */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cluster_starts),
        cmocka_unit_test(enable_is_reported_at_once),
        cmocka_unit_test(due_items_are_gone_within_2s),
        cmocka_unit_test(hide_expired_never_returns_an_expired_item),
        cmocka_unit_test(disable_stops_deletion),
        cmocka_unit_test(backfill_resumes_after_kill_9),
        cmocka_unit_test(skewed_clock_pauses_deletion),
        cmocka_unit_test(metrics_are_served),
        cmocka_unit_test(ttl_preview_counts_a_known_data_set),
        cmocka_unit_test(nodes_stop_cleanly),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
