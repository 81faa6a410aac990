/*
 * replication_test: secondary indexes and the change stream on a real
 * three-node cluster (metrics on), black box through liblapse and the lapse
 * CLI:
 *  - puts, updates, deletes and batch writes show in an LSI at once, in a
 *    GSI within a bounded wait, and in the stream as exactly one record per
 *    change, with the right eventName and images, gapless per shard;
 *  - TTL deletes leave the GSI and appear once in the stream, marked with
 *    principal lapse.ttl and the ttl object; a --stream-ttl-deletes off
 *    table keeps them out while its user deletes stay in;
 *  - a stream turned on after CreateTable, off and on again numbers each
 *    generation apart, and a client with an older map reading pinned to
 *    the first generation gets LAPSE_ENOTFOUND, never the second's records;
 *  - `lapse stream` prints the records as JSON lines, filters with --only,
 *    follows until SIGTERM and resumes from the --after it printed.
 * No daemon crashes (teardown). Expired items in GSIs, and a mass expiry
 * through kill -9, are gsi_expiry_test's.
 */
#include "testutil.h"

#include <signal.h>
#include <sys/wait.h>

#include "repl_testutil.h"

/* ------------------------------------------------------------------------ */
/* Orders: every kind of write, in the LSI, the GSI and the stream          */
/* ------------------------------------------------------------------------ */

static const lapse_index_def orders_lsi[] = {
    {.name = "ByDate", .sort_key = "Date", .sort_key_type = 'S'}};
static const lapse_index_def orders_gsi[] = {{.name = "ByStatus",
                                              .partition_key = "Status",
                                              .partition_key_type = 'S',
                                              .sort_key = "Date",
                                              .sort_key_type = 'S',
                                              .partitions = 4}};
static const char *const statuses[] = {"new", "paid", "shipped"};
static size_t g_orders_records; /* the Orders stream's length after the first test */

static void order(char *json, size_t len, const char *cust, int ord, const char *status,
                  const char *date)
{
    char st[64] = "";
    if (status != NULL) {
        snprintf(st, sizeof(st), ",\"Status\":{\"S\":\"%s\"}", status);
    }
    snprintf(json, len,
             "{\"Customer\":{\"S\":\"%s\"},\"OrderNo\":{\"N\":\"%d\"},\"Date\":{\"S\":\"%s\"},"
             "\"Amount\":{\"N\":\"%d.25\"}%s}",
             cust, ord, date, ord * 10, st);
}

/* Each customer's LSI holds its items in Date, then OrderNo order, at once:
 * the entries are written with the item. */
static void check_lsi(rt_model *m)
{
    for (int c = 0; c < 12; c++) {
        char cust[16], pk[64];
        snprintf(cust, sizeof(cust), "c%d", c);
        snprintf(pk, sizeof(pk), "{\"S\":\"%s\"}", cust);
        rt_items got = {0}, want = {0};
        rt_query_all("Orders", "ByDate", pk, NULL, 0, 3, &got);
        rt_model_select(m, "Customer", cust, &want);
        rt_sort(&want, "Date", "OrderNo", NULL);
        rt_assert_items_equal(&got, &want, "LSI ByDate");
        rt_items_free(&got);
        rt_items_free(&want);
    }
    /* A condition on the LSI's sort key: only the updated items. */
    rt_items got = {0};
    lapse_query_opts q = {.sk_op = LAPSE_SK_BEGINS_WITH, .sk_json = "{\"S\":\"2026-02\"}"};
    rt_query_all("Orders", "ByDate", "{\"S\":\"c3\"}", &q, 0, 0, &got);
    assert_true(got.n > 0);
    for (size_t i = 0; i < got.n; i++) {
        assert_string_equal(lapse_item_get_s(got.v[i], "Status"), "shipped");
    }
    rt_items_free(&got);
}

/* Each status's GSI entries are the model's items with that status, in
 * Date, then table key order (paged 4 at a time). */
static int gsi_matches(void *arg, int last)
{
    rt_model *m = arg;
    for (size_t s = 0; s < 3; s++) {
        char pk[64];
        snprintf(pk, sizeof(pk), "{\"S\":\"%s\"}", statuses[s]);
        rt_items got = {0}, want = {0};
        rt_query_all("Orders", "ByStatus", pk, NULL, 0, 4, &got);
        rt_model_select(m, "Status", statuses[s], &want);
        rt_sort(&want, "Date", "Customer", "OrderNo");
        int ok = rt_items_equal(&got, &want);
        if (!ok && last) {
            rt_assert_items_equal(&got, &want, "GSI ByStatus");
        }
        rt_items_free(&got);
        rt_items_free(&want);
        if (!ok) {
            return 0;
        }
    }
    return 1;
}

/* The nodes' lapse_stream_records_total add up to *want (never more). */
static int counted_once(void *arg, int last)
{
    size_t want = *(size_t *)arg;
    double stored = 0;
    for (int n = 1; n <= 3; n++) {
        char *text = scrape_get(cluster_metrics_addr(rt_cluster(), n), 2000);
        assert_non_null(text);
        stored += scrape_sum(text, "lapse_stream_records_total", NULL);
        free(text);
    }
    if ((size_t)stored > want || last) {
        fail_msg("lapse_stream_records_total adds up to %.0f, want %zu", stored, want);
    }
    return (size_t)stored == want;
}

static void test_writes_show_in_lsi_gsi_and_stream(void **state)
{
    (void)state;
    lapse_table_def d = {.name = "Orders",
                         .partition_key = "Customer",
                         .partition_key_type = 'S',
                         .sort_key = "OrderNo",
                         .sort_key_type = 'N',
                         .partitions = 8,
                         .lsi = orders_lsi,
                         .nlsi = 1,
                         .gsi = orders_gsi,
                         .ngsi = 1,
                         .stream = 1};
    rt_create(&d);
    rt_model *m = rt_model_new("Orders", "Customer", "OrderNo", 8);
    char json[512], cust[16], date[16];
    lapse_error e = {0};

    /* Puts: 12 customers x 5 orders, some without Status (not in the GSI). */
    for (int c = 0; c < 12; c++) {
        for (int o = 1; o <= 5; o++) {
            snprintf(cust, sizeof(cust), "c%d", c);
            snprintf(date, sizeof(date), "2026-01-%02d", (c * 7 + o * 3) % 28 + 1);
            int sparse = (c * 5 + o) % 7 == 0;
            order(json, sizeof(json), cust, o, sparse ? NULL : statuses[(c + o) % 3], date);
            rt_put(m, json);
        }
    }
    /* Updates move entries between GSI partitions and within the LSI. */
    for (int c = 0; c < 12; c++) {
        for (int o = 1; o <= 5; o++) {
            if ((c + o) % 4 == 0) {
                snprintf(cust, sizeof(cust), "c%d", c);
                rt_update(m, cust, o, "Status", "{\"S\":\"shipped\"}", "Date",
                          "{\"S\":\"2026-02-01\"}");
            }
        }
    }
    /* A put of an identical item makes no record (as DynamoDB Streams). */
    char *same = lapse_item_to_json(rt_model_get(m, "c5", 2));
    rt_put(m, same);
    lapse_free(same);
    /* Deletes; a delete of an absent item and a failed condition make no
     * record. */
    for (int c = 0; c < 12; c++) {
        for (int o = 1; o <= 5; o++) {
            if ((c * o) % 6 == 1) {
                snprintf(cust, sizeof(cust), "c%d", c);
                rt_delete(m, cust, o);
            }
        }
    }
    rt_delete(m, "nobody", 1);
    lapse_item *dup = item_json("{\"Customer\":{\"S\":\"c2\"},\"OrderNo\":{\"N\":\"2\"}}");
    lapse_condition cond = {.kind = LAPSE_COND_NOT_EXISTS, .attribute = "Customer"};
    assert_lapse_code(lapse_put(rt_client(), "Orders", dup, &cond, &e), LAPSE_ECONDITION, &e);
    lapse_item_free(dup);
    /* A batch write of new items and a delete. */
    for (int o = 1; o <= 6; o++) {
        snprintf(date, sizeof(date), "2026-01-%02d", o);
        order(json, sizeof(json), "batch", o, statuses[o % 3], date);
        rt_batch_put(m, json);
    }
    rt_batch_delete(m, "c3", 3);
    rt_batch_commit(m);

    check_lsi(m);
    /* An unknown index is refused by name. */
    rt_items none = {0};
    lapse_query_opts q = {.partition_key_json = "{\"S\":\"new\"}"};
    lapse_page *p = NULL;
    assert_lapse_code(lapse_query_index(rt_client(), "Orders", "ByNothing", &q, &p, &e),
                      LAPSE_ENOTFOUND, &e);
    assert_null(p);
    rt_wait_for("the GSI to match the table", 15000, gsi_matches, m);
    /* A sort-key condition on the GSI's sort key. */
    lapse_query_opts between = {.sk_op = LAPSE_SK_BETWEEN,
                                .sk_json = "{\"S\":\"2026-01-05\"}",
                                .sk2_json = "{\"S\":\"2026-01-15\"}"};
    rt_query_all("Orders", "ByStatus", "{\"S\":\"paid\"}", &between, 0, 2, &none);
    assert_true(none.n > 0);
    for (size_t i = 0; i < none.n; i++) {
        const char *dt = lapse_item_get_s(none.v[i], "Date");
        assert_true(strcmp(dt, "2026-01-05") >= 0 && strcmp(dt, "2026-01-15") <= 0);
    }
    rt_items_free(&none);

    /* The stream: exactly the model's records, gapless per shard. */
    rt_stream s;
    rt_stream_wait(&s, "Orders", rt_model_records(m), 15000);
    rt_stream_check_gapless(&s, 1);
    rt_model_check_stream(m, &s);
    g_orders_records = s.n;
    /* Each record counted once, by the node that stored it (the counter
     * moves just after the record is readable: a bounded wait). */
    rt_wait_for("lapse_stream_records_total to count every record", 5000, counted_once, &s.n);
    rt_stream_free(&s);
    rt_model_free(m);
}

/* ------------------------------------------------------------------------ */
/* TTL deletes: out of the GSI, into the stream once, marked                */
/* ------------------------------------------------------------------------ */

static const lapse_index_def device_gsi[] = {
    {.name = "ByDevice", .partition_key = "Device", .partition_key_type = 'S', .partitions = 4}};

static void session(char *json, size_t len, const char *user, int sid, int64_t expires_s)
{
    snprintf(json, len,
             "{\"User\":{\"S\":\"%s\"},\"Sid\":{\"N\":\"%d\"},\"Device\":{\"S\":\"d%d\"},"
             "\"ExpiresAt\":{\"N\":\"%lld\"}}",
             user, sid, sid % 4, (long long)expires_s);
}

typedef struct due_set {
    const char *table;
    int users, first_sid, last_sid; /* u0..u(users-1) x [first_sid, last_sid] */
} due_set;

static int all_gone(void *arg, int last)
{
    const due_set *ds = arg;
    for (int u = 0; u < ds->users; u++) {
        for (int sid = ds->first_sid; sid <= ds->last_sid; sid++) {
            char key[128];
            snprintf(key, sizeof(key), "{\"User\":{\"S\":\"u%d\"},\"Sid\":{\"N\":\"%d\"}}", u, sid);
            if (rt_exists(ds->table, key)) {
                if (last) {
                    fprintf(stderr, "%s: %s still there\n", ds->table, key);
                }
                return 0;
            }
        }
    }
    return 1;
}

/* The GSI holds exactly the model's current items of each device. */
static int devices_match(void *arg, int last)
{
    rt_model *m = arg;
    for (int dv = 0; dv < 4; dv++) {
        char pk[32], val[8];
        snprintf(val, sizeof(val), "d%d", dv);
        snprintf(pk, sizeof(pk), "{\"S\":\"%s\"}", val);
        rt_items got = {0}, want = {0};
        rt_query_all("Sessions", "ByDevice", pk, NULL, 0, 0, &got);
        rt_model_select(m, "Device", val, &want);
        rt_sort(&got, "User", "Sid", NULL);
        rt_sort(&want, "User", "Sid", NULL);
        int ok = rt_items_equal(&got, &want);
        if (!ok && last) {
            rt_assert_items_equal(&got, &want, "GSI ByDevice");
        }
        rt_items_free(&got);
        rt_items_free(&want);
        if (!ok) {
            return 0;
        }
    }
    return 1;
}

static void test_ttl_deletes_leave_gsi_and_enter_stream_once(void **state)
{
    (void)state;
    lapse_table_def d = {.name = "Sessions",
                         .partition_key = "User",
                         .partition_key_type = 'S',
                         .sort_key = "Sid",
                         .sort_key_type = 'N',
                         .partitions = 8,
                         .gsi = device_gsi,
                         .ngsi = 1,
                         .stream = 1};
    rt_create(&d);
    rt_enable_ttl("Sessions", "ExpiresAt");
    rt_model *m = rt_model_new("Sessions", "User", "Sid", 8);
    int64_t due_s = rt_wall_ms() / 1000 + 3, live_s = due_s + 3600;
    char json[512], user[16];
    for (int u = 0; u < 10; u++) {
        snprintf(user, sizeof(user), "u%d", u);
        for (int sid = 1; sid <= 6; sid++) { /* 1-4 expire, 5-6 live */
            session(json, sizeof(json), user, sid, sid <= 4 ? due_s : live_s);
            rt_put(m, json);
        }
    }
    due_set ds = {"Sessions", 10, 1, 4};
    rt_wait_for("the due sessions to be deleted", (int)(due_s * 1000 - rt_wall_ms()) + 5000,
                all_gone, &ds);
    for (int u = 0; u < 10; u++) {
        snprintf(user, sizeof(user), "u%d", u);
        for (int sid = 1; sid <= 4; sid++) {
            rt_model_ttl_removed(m, user, sid, "ExpiresAt", due_s * 1000);
        }
    }
    rt_wait_for("the GSI to drop the expired sessions", 15000, devices_match, m);

    rt_stream s;
    rt_stream_wait(&s, "Sessions", rt_model_records(m), 15000);
    rt_stream_check_gapless(&s, 1);
    rt_model_check_stream(m, &s);
    /* The JSON marks TTL deletes, and only them, as the service's. */
    size_t ttl = 0;
    for (size_t i = 0; i < s.n; i++) {
        char *js = lapse_stream_record_to_json(s.r[i]);
        int marked = strstr(js, "\"userIdentity\":{\"type\":\"Service\","
                                "\"principalId\":\"lapse.ttl\"}") != NULL &&
                     strstr(js, "\"ttl\":{\"attribute\":\"ExpiresAt\"") != NULL;
        assert_int_equal(marked, s.r[i]->ttl_delete != 0);
        ttl += marked;
        lapse_free(js);
    }
    assert_int_equal(ttl, 40);
    rt_stream_free(&s);
    rt_model_free(m);
}

/* --stream-ttl-deletes off: the table's TTL deletes stay out of its stream,
 * its user deletes are in it. A marker written after the TTL delete into
 * the same shard proves the absence: a shard's records are in commit order,
 * so a TTL record would come before the marker's. */
static void test_stream_without_ttl_deletes(void **state)
{
    (void)state;
    lapse_table_def d = {.name = "Quiet",
                         .partition_key = "User",
                         .partition_key_type = 'S',
                         .sort_key = "Sid",
                         .sort_key_type = 'N',
                         .partitions = 4,
                         .stream = 1,
                         .stream_exclude_ttl_deletes = 1};
    rt_create(&d);
    rt_enable_ttl("Quiet", "ExpiresAt");
    rt_model *m = rt_model_new("Quiet", "User", "Sid", 4);
    int64_t due_s = rt_wall_ms() / 1000 + 2;
    char json[512];
    session(json, sizeof(json), "u0", 1, due_s);
    rt_put(m, json);
    session(json, sizeof(json), "u0", 2, due_s + 3600);
    rt_put(m, json);
    session(json, sizeof(json), "u1", 1, due_s + 3600);
    rt_put(m, json);
    rt_delete(m, "u1", 1); /* a user delete: in the stream */
    due_set ds = {"Quiet", 1, 1, 1};
    rt_wait_for("u0/1 to be deleted by TTL", (int)(due_s * 1000 - rt_wall_ms()) + 5000, all_gone,
                &ds);
    session(json, sizeof(json), "u0", 3, due_s + 3600); /* the marker */
    rt_put(m, json);

    /* The model expects no record for the TTL delete. */
    rt_stream s;
    rt_stream_wait(&s, "Quiet", rt_model_records(m), 15000);
    rt_stream_check_gapless(&s, 1);
    rt_model_check_stream(m, &s);
    for (size_t i = 0; i < s.n; i++) {
        assert_false(s.r[i]->ttl_delete);
    }
    rt_stream_free(&s);
    rt_model_free(m);
}

/* ------------------------------------------------------------------------ */
/* A stream turned on again, read by a client with an older map             */
/* ------------------------------------------------------------------------ */

/* For rt_wait_for: shard 0 of table, read pinned to generation gen, holds
 * want records (then b is the batch: caller frees). */
typedef struct pinned_read {
    lapse_client *c;
    const char *table;
    uint32_t gen;
    size_t want;
    lapse_stream_batch *b;
} pinned_read;

static int read_pinned(void *arg, int last)
{
    (void)last;
    pinned_read *p = arg;
    lapse_stream_request q = {.shard = 0, .pin_generation = 1, .generation = p->gen};
    lapse_error e = {0};
    lapse_stream_batch_free(p->b);
    p->b = NULL;
    assert_lapse_ok(lapse_stream_read(p->c, p->table, &q, &p->b, &e), &e);
    return lapse_stream_batch_count(p->b) >= p->want;
}

/* A stream turned on after CreateTable (generation 1) holds only later
 * writes, numbered from 1 << 40; turned off and on again (generation 2) it
 * numbers from 2 << 40, and a client whose map still shows generation 1,
 * reading pinned to it (as the DynamoDB gateway reads an ARN), gets
 * LAPSE_ENOTFOUND from the host instead of generation 2's records. */
static void test_stream_generations_never_mix(void **state)
{
    (void)state;
    lapse_table_def d = {.name = "Gens",
                         .partition_key = "User",
                         .partition_key_type = 'S',
                         .sort_key = "Sid",
                         .sort_key_type = 'N',
                         .partitions = 1};
    rt_create(&d);
    rt_model *m = rt_model_new("Gens", "User", "Sid", 1);
    char json[512];
    const int64_t far_s = rt_wall_ms() / 1000 + 86400;
    session(json, sizeof(json), "u0", 1, far_s);
    rt_put(m, json); /* before the stream: in none */
    lapse_error e = {0};
    assert_lapse_ok(lapse_update_stream(rt_client(), "Gens", 1, LAPSE_STREAM_NEW_IMAGE, &e), &e);
    assert_int_equal(lapse_update_stream(rt_client(), "Gens", 1, LAPSE_STREAM_NEW_IMAGE, &e),
                     LAPSE_EEXISTS);
    lapse_client *stale = connect_client(rt_cluster());
    lapse_stream_info info;
    assert_lapse_ok(lapse_stream_info_get(stale, "Gens", &info, &e), &e);
    assert_int_equal(info.generation, 1);
    assert_true(info.first_sequence == UINT64_C(1) << 40);
    session(json, sizeof(json), "u0", 2, far_s);
    rt_put(m, json);
    pinned_read one = {stale, "Gens", 1, 1, NULL};
    rt_wait_for("the record of stream generation 1", 10000, read_pinned, &one);
    lapse_stream_batch *b = one.b;
    assert_int_equal(lapse_stream_batch_count(b), 1);
    assert_true(lapse_stream_batch_record(b, 0)->sequence_number == info.first_sequence);
    lapse_stream_batch_free(b);

    assert_lapse_ok(lapse_update_stream(rt_client(), "Gens", 0, 0, &e), &e);
    assert_int_equal(lapse_update_stream(rt_client(), "Gens", 0, 0, &e), LAPSE_ESTATE);
    assert_lapse_ok(lapse_update_stream(rt_client(), "Gens", 1, LAPSE_STREAM_KEYS_ONLY, &e), &e);
    session(json, sizeof(json), "u0", 3, far_s);
    rt_put(m, json);
    lapse_stream_info now;
    assert_lapse_ok(lapse_stream_info_get(rt_client(), "Gens", &now, &e), &e);
    assert_int_equal(now.generation, 2);
    assert_true(now.since_ms > info.since_ms);
    pinned_read two = {rt_client(), "Gens", 2, 1, NULL};
    rt_wait_for("the record of stream generation 2", 10000, read_pinned, &two);
    b = two.b;
    assert_int_equal(lapse_stream_batch_count(b), 1); /* u0/3 only */
    assert_true(lapse_stream_batch_record(b, 0)->sequence_number == UINT64_C(2) << 40);
    assert_null(lapse_stream_batch_record(b, 0)->new_image); /* KEYS_ONLY */
    lapse_stream_batch_free(b);

    lapse_stream_request q = {.shard = 0, .pin_generation = 1, .generation = 1};
    b = NULL;
    assert_int_equal(lapse_stream_read(stale, "Gens", &q, &b, &e), LAPSE_ENOTFOUND);
    assert_null(b);
    lapse_close(stale);
    rt_model_free(m);
}

/* ------------------------------------------------------------------------ */
/* The CLI                                                                  */
/* ------------------------------------------------------------------------ */

static void put_order(const char *cust, int ord)
{
    lapse_item *it = item_json(
        "{\"Customer\":{\"S\":\"%s\"},\"OrderNo\":{\"N\":\"%d\"},\"Date\":{\"S\":\"2026-03-01\"}}",
        cust, ord);
    lapse_error e = {0};
    assert_lapse_ok(lapse_put(rt_client(), "Orders", it, NULL, &e), &e);
    lapse_item_free(it);
}

static void test_cli_stream(void **state)
{
    (void)state;
    char **lines = NULL;
    size_t n;

    /* Everything there now, then exit 0. */
    const char *all[] = {"stream", "Orders", NULL};
    n = rt_cli_lines("orders", all, 0, &lines);
    assert_int_equal(n, g_orders_records);
    assert_int_equal(rt_check_stream_lines(lines, n), 0);
    rt_free_lines(lines, n);
    const char *ttl[] = {"stream", "Sessions", "--only", "ttl", NULL};
    n = rt_cli_lines("sessions-ttl", ttl, 0, &lines);
    assert_int_equal(n, 40);
    assert_int_equal(rt_check_stream_lines(lines, n), 40);
    rt_free_lines(lines, n);
    const char *user[] = {"stream", "Sessions", "--only", "user", NULL};
    n = rt_cli_lines("sessions-user", user, 0, &lines);
    assert_int_equal(n, 60);
    assert_int_equal(rt_check_stream_lines(lines, n), 0);
    rt_free_lines(lines, n);

    /* Following: new records show; SIGTERM ends it with status 0 and a
     * resume argument. */
    char out[600], err[600];
    const char *follow[] = {"stream", "Orders", "--follow", "--wait-ms", "200", NULL};
    pid_t pid = rt_cli_spawn("follow", follow, out, err);
    rt_file_wait w = {out, g_orders_records};
    rt_wait_for("lapse stream --follow to print the stream", 15000, rt_file_has_lines, &w);
    put_order("follow", 1);
    w.want++;
    rt_wait_for("lapse stream --follow to print a new record", 15000, rt_file_has_lines, &w);
    assert_int_equal(kill(pid, SIGTERM), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    lines = rt_read_lines(out, &n);
    assert_int_equal(n, g_orders_records + 1);
    rt_check_stream_lines(lines, n);
    assert_non_null(strstr(lines[n - 1], "\"Customer\":{\"S\":\"follow\"}"));
    rt_free_lines(lines, n);
    size_t ne = 0;
    char **errs = rt_read_lines(err, &ne);
    const char *mark = "to resume, pass --after ";
    char *resume = NULL;
    for (size_t i = 0; i < ne && resume == NULL; i++) {
        char *at = strstr(errs[i], mark);
        resume = at != NULL ? strdup(at + strlen(mark)) : NULL;
    }
    rt_free_lines(errs, ne);
    if (resume == NULL) {
        fail_msg("lapse stream --follow printed no resume argument on stderr");
    }

    /* Resuming prints nothing already printed, then exactly what is new. */
    const char *again[] = {"stream", "Orders", "--after", resume, NULL};
    n = rt_cli_lines("resume1", again, 0, &lines);
    assert_int_equal(n, 0);
    rt_free_lines(lines, n);
    put_order("follow", 2);
    int64_t deadline = rt_wall_ms() + 15000;
    do { /* the record reaches its shard shortly after the put */
        n = rt_cli_lines("resume2", again, 0, &lines);
        if (n == 0) {
            rt_free_lines(lines, n);
            rt_sleep_ms(100);
        }
    } while (n == 0 && rt_wall_ms() < deadline);
    assert_int_equal(n, 1);
    assert_non_null(strstr(lines[0], "\"OrderNo\":{\"N\":\"2\"}"));
    rt_free_lines(lines, n);
    free(resume);
    const char *latest[] = {"stream", "Orders", "--from", "latest", NULL};
    n = rt_cli_lines("latest", latest, 0, &lines);
    assert_int_equal(n, 0);
    rt_free_lines(lines, n);

    /* Errors: a table without a stream (1), a shard it does not have (2). */
    lapse_table_def plain = {
        .name = "Plain", .partition_key = "Id", .partition_key_type = 'S', .partitions = 4};
    rt_create(&plain);
    const char *nostream[] = {"stream", "Plain", NULL};
    n = rt_cli_lines("nostream", nostream, 1, &lines);
    rt_free_lines(lines, n);
    lapse_stream_shard *shards = NULL;
    size_t nshards = 0;
    lapse_error e;
    assert_int_equal(lapse_stream_shards(rt_client(), "Plain", &shards, &nshards, &e),
                     LAPSE_EINVAL);
    assert_non_null(strstr(e.message, "has no stream"));
    assert_null(shards);
    const char *badshard[] = {"stream", "Orders", "--after", "8:1", NULL};
    n = rt_cli_lines("badshard", badshard, 2, &lines);
    rt_free_lines(lines, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writes_show_in_lsi_gsi_and_stream),
        cmocka_unit_test(test_ttl_deletes_leave_gsi_and_enter_stream_once),
        cmocka_unit_test(test_stream_without_ttl_deletes),
        cmocka_unit_test(test_stream_generations_never_mix),
        cmocka_unit_test(test_cli_stream),
    };
    return cmocka_run_group_tests(tests, rt_setup, rt_teardown);
}
