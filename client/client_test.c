/*
 * client_test.c: liblapse without a cluster: the item builder, DynamoDB JSON
 * round trips through lapse_item_*, error codes and messages, connecting to
 * a port where nothing listens, the TTL JSON shaping and spec checks
 * (ttlcfg.h), the CLI's usage errors (exit 2), and the shape of write
 * calls' request ids.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../common/clock.h"
#include "client.h"
#include "lapse.h"
#include "ttlcfg.h"

extern char **environ;

#define assert_ok(rv, err)                                                                         \
    do {                                                                                           \
        if ((rv) != 0) {                                                                           \
            fail_msg("%s: %s", lapse_strerror(rv), (err).message);                                 \
        }                                                                                          \
    } while (0)

/* ---- request ids ---- */

/* Write calls' request ids lead with the wall clock's milliseconds (so a
 * partition's request records go in nearly in order) and stay distinct,
 * those of one millisecond included. */
static void test_request_ids_lead_with_the_clock(void **state)
{
    (void)state;
    enum { N = 2000 };
    static uint8_t ids[N][WIRE_REQUEST_ID_BYTES];
    int64_t before = clock_wall_now().ms;
    for (int i = 0; i < N; i++) {
        client_request_id(ids[i]);
    }
    int64_t after = clock_wall_now().ms, last = 0;
    for (int i = 0; i < N; i++) {
        int64_t ms = 0;
        for (int j = 0; j < CLIENT_REQUEST_ID_CLOCK_BYTES; j++) {
            ms = ms << 8 | ids[i][j];
        }
        assert_in_range(ms, before, after);
        assert_true(ms >= last);
        last = ms;
        for (int k = 0; k < i; k++) {
            assert_memory_not_equal(ids[i], ids[k], WIRE_REQUEST_ID_BYTES);
        }
    }
}

/* ---- item builder ---- */

static void test_item_builder(void **state)
{
    (void)state;
    lapse_item *it = lapse_item_new();
    assert_non_null(it);
    assert_int_equal(lapse_item_set_s(it, "UserName", "user1"), 0);
    assert_int_equal(lapse_item_set_n(it, "Age", "42.50"), 0);
    assert_int_equal(lapse_item_set_n_i64(it, "Big", INT64_MIN), 0);
    assert_int_equal(lapse_item_set_b(it, "Blob", "\x00\x01\xff", 3), 0);
    assert_int_equal(lapse_item_set_bool(it, "Active", 1), 0);
    assert_int_equal(lapse_item_set_null(it, "Nothing"), 0);
    assert_int_equal(lapse_item_count(it), 6);

    assert_string_equal(lapse_item_get_s(it, "UserName"), "user1");
    assert_string_equal(lapse_item_get_n(it, "Age"), "42.50"); /* kept as given */
    assert_string_equal(lapse_item_get_n(it, "Big"), "-9223372036854775808");
    assert_null(lapse_item_get_s(it, "Age"));     /* wrong type */
    assert_null(lapse_item_get_s(it, "Missing")); /* absent */
    assert_string_equal(lapse_item_name(it, 0), "UserName");
    assert_null(lapse_item_name(it, 6));

    /* Replacing keeps one attribute per name. */
    assert_int_equal(lapse_item_set_s(it, "UserName", "user2"), 0);
    assert_int_equal(lapse_item_count(it), 6);
    assert_string_equal(lapse_item_get_s(it, "UserName"), "user2");

    /* Invalid input is refused and leaves the item unchanged. */
    assert_int_equal(lapse_item_set_n(it, "Age", "12abc"), LAPSE_EINVAL);
    assert_int_equal(lapse_item_set_n(it, "Age", "1234567890123456789012345678901234567890"),
                     LAPSE_EINVAL);
    assert_int_equal(lapse_item_set_s(it, "", "x"), LAPSE_EINVAL);
    assert_int_equal(lapse_item_set_s(it, NULL, "x"), LAPSE_EINVAL);
    assert_int_equal(lapse_item_set_s(NULL, "a", "x"), LAPSE_EINVAL);
    assert_string_equal(lapse_item_get_n(it, "Age"), "42.50");

    lapse_item *copy = lapse_item_dup(it);
    assert_true(lapse_item_equal(it, copy));
    assert_int_equal(lapse_item_remove(copy, "Active"), 0);
    assert_int_equal(lapse_item_count(copy), 5);
    assert_false(lapse_item_equal(it, copy));

    char *v = lapse_item_get_json(it, "Blob");
    assert_string_equal(v, "{\"B\":\"AAH/\"}");
    lapse_free(v);
    assert_null(lapse_item_get_json(it, "Missing"));

    lapse_item_free(copy);
    lapse_item_free(it);
    lapse_item_free(NULL);
}

static void test_item_set_json(void **state)
{
    (void)state;
    lapse_error err;
    lapse_item *it = lapse_item_new();
    int rv = lapse_item_set_json(it, "Tags", "{\"L\":[{\"S\":\"a\"},{\"N\":\"1\"}]}", &err);
    assert_ok(rv, err);
    assert_int_equal(err.code, LAPSE_OK);
    char *v = lapse_item_get_json(it, "Tags");
    assert_string_equal(v, "{\"L\":[{\"S\":\"a\"},{\"N\":\"1\"}]}");
    lapse_free(v);

    rv = lapse_item_set_json(it, "Age", "{\"N\":\"abc\"}", &err);
    assert_int_equal(rv, LAPSE_EINVAL);
    assert_int_equal(err.code, LAPSE_EINVAL);
    assert_non_null(strstr(err.message, "Age"));
    assert_null(lapse_item_get_json(it, "Age"));
    lapse_item_free(it);
}

/* ---- DynamoDB JSON ---- */

static void test_json_round_trip(void **state)
{
    (void)state;
    static const char *texts[] = {
        "{\"UserName\":{\"S\":\"user1\"},\"ExpirationTime\":{\"N\":\"1461938400\"}}",
        "{\"k\":{\"S\":\"q\\\"uo\\u00e9te\"},\"b\":{\"B\":\"aGVsbG8=\"},\"t\":{\"BOOL\":false},"
        "\"z\":{\"NULL\":true}}",
        "{\"m\":{\"M\":{\"x\":{\"L\":[{\"N\":\"-1.5E+3\"},{\"M\":{}}]}}},\"l\":{\"L\":[]}}",
    };
    lapse_error err;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        lapse_item *a = NULL, *b = NULL;
        int rv = lapse_item_from_json(&a, texts[i], &err);
        assert_ok(rv, err);
        char *out = lapse_item_to_json(a);
        assert_non_null(out);
        rv = lapse_item_from_json(&b, out, &err);
        assert_ok(rv, err);
        assert_true(lapse_item_equal(a, b));
        char *out2 = lapse_item_to_json(b);
        assert_string_equal(out, out2); /* formatting is stable */
        lapse_free(out);
        lapse_free(out2);
        lapse_item_free(a);
        lapse_item_free(b);
    }
    /* The builder and the parser agree. */
    lapse_item *built = lapse_item_new(), *parsed = NULL;
    lapse_item_set_s(built, "UserName", "user1");
    lapse_item_set_n(built, "ExpirationTime", "1461938400");
    assert_ok(lapse_item_from_json(&parsed, texts[0], &err), err);
    assert_true(lapse_item_equal(built, parsed));
    char *out = lapse_item_to_json(built);
    assert_string_equal(out, texts[0]);
    lapse_free(out);
    lapse_item_free(built);
    lapse_item_free(parsed);
}

static void test_json_errors(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "not json",
        "{\"a\":",
        "[1,2]",
        "{\"a\":{\"S\":1}}",
        "{\"a\":{\"N\":\"12x\"}}",
        "{\"a\":{\"Q\":\"x\"}}",
        "{\"a\":{\"SS\":[\"x\",\"x\"]}}",
        "{\"a\":{\"S\":\"x\",\"N\":\"1\"}}",
        "{\"a\":{\"B\":\"***\"}}",
        "{\"a\":\"plain\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lapse_item *it = (lapse_item *)&it; /* must be reset to NULL */
        lapse_error err = {0};
        int rv = lapse_item_from_json(&it, bad[i], &err);
        if (rv != LAPSE_EINVAL) {
            fail_msg("\"%s\": got %d (%s), want EINVAL", bad[i], rv, lapse_strerror(rv));
        }
        assert_null(it);
        assert_int_equal(err.code, LAPSE_EINVAL);
        assert_true(err.message[0] != '\0');
    }
    /* NULL err is allowed everywhere. */
    lapse_item *it = NULL;
    assert_int_equal(lapse_item_from_json(&it, "nope", NULL), LAPSE_EINVAL);
    assert_int_equal(lapse_item_from_json(NULL, "{}", NULL), LAPSE_EINVAL);
}

static void test_update_builder(void **state)
{
    (void)state;
    lapse_error err;
    lapse_update *u = lapse_update_new();
    assert_non_null(u);
    assert_ok(lapse_update_set(u, "Age", "{\"N\":\"5\"}", &err), err);
    assert_int_equal(lapse_update_remove(u, "Old"), 0);
    assert_int_equal(lapse_update_set(u, "Age", "{\"N\":\"five\"}", &err), LAPSE_EINVAL);
    assert_int_equal(err.code, LAPSE_EINVAL);
    assert_non_null(strstr(err.message, "Age"));
    assert_int_equal(lapse_update_remove(u, ""), LAPSE_EINVAL);
    lapse_update_free(u);
    lapse_update_free(NULL);
}

/* ---- calls without a cluster ---- */

static void test_null_arguments(void **state)
{
    (void)state;
    lapse_error err;
    lapse_item *out = NULL;
    lapse_page *page = NULL;
    assert_int_equal(lapse_put(NULL, "T", NULL, NULL, &err), LAPSE_EINVAL);
    assert_int_equal(err.code, LAPSE_EINVAL);
    assert_int_equal(lapse_get(NULL, "T", NULL, &out, &err), LAPSE_EINVAL);
    assert_int_equal(lapse_delete(NULL, NULL, NULL, NULL, &err), LAPSE_EINVAL);
    assert_int_equal(lapse_query(NULL, "T", NULL, &page, &err), LAPSE_EINVAL);
    assert_int_equal(lapse_scan(NULL, "T", NULL, &page, &err), LAPSE_EINVAL);
    assert_int_equal(lapse_batch_write(NULL, "T", NULL, 0, NULL, 0, &err), LAPSE_EINVAL);
    assert_null(page);
    lapse_close(NULL);
    lapse_page_free(NULL);
    assert_int_equal(lapse_page_count(NULL), 0);
}

/* ---- time to live: JSON shaping and checks ---- */

/* Dumps doc as the library does and drops it. */
static char *dump_json(json_t *doc)
{
    assert_non_null(doc);
    char *s = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(doc);
    assert_non_null(s);
    return s;
}

static void assert_json(json_t *doc, const char *want)
{
    char *got = dump_json(doc);
    if (strcmp(got, want) != 0) {
        fail_msg("JSON\n got: %s\nwant: %s", got, want);
    }
    free(got);
}

static void test_ttl_description_json_enabled(void **state)
{
    (void)state;
    Lapse__TtlConfig cfg = LAPSE__TTL_CONFIG__INIT;
    cfg.enabled = 1;
    cfg.attribute = "ExpirationTime";
    cfg.offset_seconds = 3600;
    cfg.config_version = 42;
    Lapse__TtlProgress p1 = LAPSE__TTL_PROGRESS__INIT;
    p1.table_id = 7;
    p1.config_version = 42;
    p1.backfill_done = 1;
    p1.backfill_items = 123;
    p1.partitions_done = 21;
    p1.partitions_total = 21;
    Lapse__TtlNodeStatus n1 = LAPSE__TTL_NODE_STATUS__INIT, n2 = LAPSE__TTL_NODE_STATUS__INIT;
    n1.node_id = 1;
    n1.reported = 1;
    n1.progress = &p1;
    n2.node_id = 2; /* nothing heard yet: no progress */
    Lapse__TtlNodeStatus *nodes[] = {&n1, &n2};
    Lapse__TtlDescription d = LAPSE__TTL_DESCRIPTION__INIT;
    d.status = "ENABLING";
    d.config = &cfg;
    d.nodes = nodes;
    d.n_nodes = 2;
    assert_json(ttlcfg_description_json(&d),
                "{\"TimeToLiveDescription\":{\"TimeToLiveStatus\":\"ENABLING\","
                "\"AttributeName\":\"ExpirationTime\"},\"OffsetSeconds\":3600,"
                "\"IgnoreOlderThanYears\":5,\"Paused\":false,\"Propagation\":{"
                "\"ConfigVersion\":42,\"Nodes\":["
                "{\"NodeId\":1,\"Reported\":true,\"AppliedVersion\":42,\"BackfillDone\":true,"
                "\"BackfillItems\":123,\"PartitionsDone\":21,\"PartitionsTotal\":21},"
                "{\"NodeId\":2,\"Reported\":false,\"AppliedVersion\":0,\"BackfillDone\":false,"
                "\"BackfillItems\":0,\"PartitionsDone\":0,\"PartitionsTotal\":0}]}}");

    /* Paused with its own guard: still ENABLED, the guard shown as set. */
    cfg.paused = 1;
    cfg.ignore_older_than_years = 2;
    d.status = "ENABLED";
    d.n_nodes = 0;
    assert_json(ttlcfg_description_json(&d),
                "{\"TimeToLiveDescription\":{\"TimeToLiveStatus\":\"ENABLED\","
                "\"AttributeName\":\"ExpirationTime\"},\"OffsetSeconds\":3600,"
                "\"IgnoreOlderThanYears\":2,\"Paused\":true,\"Propagation\":{"
                "\"ConfigVersion\":42,\"Nodes\":[]}}");
}

static void test_ttl_description_json_disabled(void **state)
{
    (void)state;
    /* Never configured: DynamoDB shows only the status. */
    static const char never[] =
        "{\"TimeToLiveDescription\":{\"TimeToLiveStatus\":\"DISABLED\"},\"OffsetSeconds\":0,"
        "\"IgnoreOlderThanYears\":5,\"Paused\":false,\"Propagation\":{\"ConfigVersion\":0,"
        "\"Nodes\":[]}}";
    Lapse__TtlDescription d = LAPSE__TTL_DESCRIPTION__INIT;
    d.status = "DISABLED";
    assert_json(ttlcfg_description_json(&d), never);
    assert_json(ttlcfg_description_json(NULL), never);
    d.status = ""; /* a reply without a status reads as DISABLED */
    assert_json(ttlcfg_description_json(&d), never);

    /* Disabled after use: the attribute is kept and shown. */
    Lapse__TtlConfig cfg = LAPSE__TTL_CONFIG__INIT;
    cfg.attribute = "ExpirationTime";
    cfg.config_version = 9;
    d.status = "DISABLING";
    d.config = &cfg;
    assert_json(ttlcfg_description_json(&d),
                "{\"TimeToLiveDescription\":{\"TimeToLiveStatus\":\"DISABLING\","
                "\"AttributeName\":\"ExpirationTime\"},\"OffsetSeconds\":0,"
                "\"IgnoreOlderThanYears\":5,\"Paused\":false,\"Propagation\":{"
                "\"ConfigVersion\":9,\"Nodes\":[]}}");
}

static void test_ttl_config_json(void **state)
{
    (void)state;
    assert_json(ttlcfg_config_json(NULL),
                "{\"Enabled\":false,\"OffsetSeconds\":0,\"IgnoreOlderThanYears\":5,"
                "\"Paused\":false,\"ConfigVersion\":0}");
    Lapse__TtlConfig cfg = LAPSE__TTL_CONFIG__INIT;
    cfg.enabled = 1;
    cfg.attribute = "exp";
    cfg.offset_seconds = 86400;
    cfg.ignore_older_than_years = 10;
    cfg.config_version = 3;
    assert_json(ttlcfg_config_json(&cfg),
                "{\"Enabled\":true,\"AttributeName\":\"exp\",\"OffsetSeconds\":86400,"
                "\"IgnoreOlderThanYears\":10,\"Paused\":false,\"ConfigVersion\":3}");
}

static void test_ttl_preview_sum(void **state)
{
    (void)state;
    Lapse__TtlPreviewResponse a = LAPSE__TTL_PREVIEW_RESPONSE__INIT;
    Lapse__TtlPreviewResponse b = LAPSE__TTL_PREVIEW_RESPONSE__INIT;
    a.items = 10, a.due_now = 1, a.due_hour = 2, a.due_day = 3, a.due_later = 4;
    a.missing = 5, a.not_a_number = 6, a.too_old = 7, a.out_of_range = 8;
    b.items = 1000, b.due_now = 100, b.due_hour = 200, b.due_day = 300, b.due_later = 400;
    b.missing = 500, b.not_a_number = 600, b.too_old = 700, b.out_of_range = 800;
    lapse_ttl_preview_counts sum = {0};
    ttlcfg_preview_add(&sum, &a);
    ttlcfg_preview_add(&sum, &b);
    assert_int_equal(sum.items, 1010);
    assert_int_equal(sum.due_now, 101);
    assert_int_equal(sum.due_within_hour, 202);
    assert_int_equal(sum.due_within_day, 303);
    assert_int_equal(sum.due_later, 404);
    assert_int_equal(sum.missing, 505);
    assert_int_equal(sum.not_a_number, 606);
    assert_int_equal(sum.older_than_guard, 707);
    assert_int_equal(sum.out_of_range, 808);
}

static void test_ttl_spec_checks(void **state)
{
    (void)state;
    lapse_error err;
    lapse_ttl_spec spec = {0};
    spec.action = LAPSE_TTL_ENABLE;
    assert_int_equal(ttlcfg_check_spec(&spec, &err), LAPSE_EINVAL); /* no attribute */
    assert_non_null(strstr(err.message, "attribute"));
    spec.attribute = "";
    assert_int_equal(ttlcfg_check_spec(&spec, &err), LAPSE_EINVAL);
    spec.attribute = "ExpirationTime";
    assert_ok(ttlcfg_check_spec(&spec, &err), err);
    spec.offset_seconds = -1;
    assert_int_equal(ttlcfg_check_spec(&spec, &err), LAPSE_EINVAL);
    assert_non_null(strstr(err.message, "negative"));
    spec.offset_seconds = 0;
    spec.ignore_older_than_years = -1;
    assert_int_equal(ttlcfg_check_spec(&spec, &err), LAPSE_EINVAL);
    spec.ignore_older_than_years = 5;
    assert_ok(ttlcfg_check_spec(&spec, &err), err);
    /* The rule's fields only matter to ENABLE. */
    lapse_ttl_spec off = {.action = LAPSE_TTL_DISABLE, .offset_seconds = -1};
    assert_ok(ttlcfg_check_spec(&off, &err), err);
    off.action = (lapse_ttl_action)99;
    assert_int_equal(ttlcfg_check_spec(&off, &err), LAPSE_EINVAL);
    assert_int_equal(ttlcfg_check_spec(NULL, &err), LAPSE_EINVAL);

    /* The public calls check before they need a client. */
    char *json = (char *)&json;
    assert_int_equal(lapse_update_ttl(NULL, "T", &spec, &json, &err), LAPSE_EINVAL);
    assert_null(json);
    json = (char *)&json;
    assert_int_equal(lapse_describe_ttl(NULL, "T", &json, &err), LAPSE_EINVAL);
    assert_null(json);
    lapse_ttl_preview_counts n;
    memset(&n, 0xff, sizeof n);
    assert_int_equal(lapse_ttl_preview(NULL, "T", "exp", 0, 0, &n, &err), LAPSE_EINVAL);
    assert_int_equal(n.items, 0);
    assert_int_equal(n.out_of_range, 0);
    lapse_set_hide_expired(NULL, 1); /* accepts NULL */
}

/* A loopback port nothing listens on (bound then released). */
static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_connect_nothing_listening(void **state)
{
    (void)state;
    char url[64];
    lapse_client *c = (lapse_client *)&c;
    lapse_error err;
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", free_port());

    int64_t start = now_ms();
    int rv = lapse_connect_timeout(&c, url, 700, &err);
    int64_t took = now_ms() - start;
    assert_true(rv == LAPSE_ETIMEDOUT || rv == LAPSE_EUNAVAILABLE);
    assert_int_equal(err.code, rv);
    assert_null(c);
    if (strstr(err.message, url) == NULL) {
        fail_msg("message does not name the coordinator: %s", err.message);
    }
    if (took > 700 + 1500) {
        fail_msg("connect took %lld ms with a 700 ms timeout", (long long)took);
    }

    /* A malformed URL fails at once. */
    rv = lapse_connect_timeout(&c, "nonsense://", 500, &err);
    assert_int_not_equal(rv, 0);
    assert_true(err.message[0] != '\0');
}

/* ---- the CLI ---- */

/* Runs $LAPSE_BIN_DIR/lapse with args (NULL-terminated) and stdin from
 * /dev/null; returns its exit status. */
static int run_cli(const char *first, ...)
{
    const char *bin_dir = getenv("LAPSE_BIN_DIR");
    char path[4096];
    char *argv[32];
    int argc = 0;
    va_list ap;

    snprintf(path, sizeof path, "%s/lapse", bin_dir != NULL ? bin_dir : ".");
    argv[argc++] = path;
    va_start(ap, first);
    for (const char *a = first; a != NULL && argc < 31; a = va_arg(ap, const char *)) {
        argv[argc++] = (char *)a;
    }
    va_end(ap);
    argv[argc] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rv = posix_spawn(&pid, path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rv != 0) {
        fail_msg("cannot run %s: %s", path, strerror(rv));
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_cli_usage_errors(void **state)
{
    (void)state;
    /* No cluster runs: everything below must fail before connecting. */
    setenv("LAPSE_COORDINATOR", "tcp://127.0.0.1:1", 1);
    assert_int_equal(run_cli(NULL, NULL), 2);
    assert_int_equal(run_cli("frobnicate", NULL), 2);
    assert_int_equal(run_cli("--bogus", "list-tables", NULL), 2);
    assert_int_equal(run_cli("--coordinator", NULL), 2);
    assert_int_equal(run_cli("--timeout-ms", "soon", "list-tables", NULL), 2);
    assert_int_equal(run_cli("list-tables", "extra", NULL), 2);
    assert_int_equal(run_cli("put", NULL), 2);
    assert_int_equal(run_cli("put", "T", NULL), 2);
    assert_int_equal(run_cli("put", "T", "{}", "--what", NULL), 2);
    assert_int_equal(run_cli("put", "T", "{}", "--if-exists", "a", "--if-not-exists", "b", NULL),
                     2);
    assert_int_equal(run_cli("put", "T", "{}", "--if", "novalue", NULL), 2);
    assert_int_equal(run_cli("get", "T", NULL), 2);
    assert_int_equal(run_cli("update", "T", "{}", NULL), 2);
    assert_int_equal(run_cli("update", "T", "{}", "--set", "x", NULL), 2);
    assert_int_equal(run_cli("create-table", "T", NULL), 2);
    assert_int_equal(run_cli("create-table", "T", "--partition-key", "id:X", NULL), 2);
    assert_int_equal(
        run_cli("create-table", "T", "--partition-key", "id:S", "--partitions", "-4", NULL), 2);
    assert_int_equal(
        run_cli("create-table", "T", "--partition-key", "id:S", "--replication", "4", NULL), 2);
    assert_int_equal(
        run_cli("create-table", "T", "--partition-key", "id:S", "--replication", "0", NULL), 2);
    assert_int_equal(
        run_cli("create-table", "T", "--partition-key", "id:S", "--replication", "x", NULL), 2);
    assert_int_equal(run_cli("query", "T", NULL), 2);
    assert_int_equal(run_cli("query", "T", "--key", "{}", "--sk-op", "near", "--sk", "{}", NULL),
                     2);
    assert_int_equal(run_cli("query", "T", "--key", "{}", "--sk-op", "between", "--sk", "{}", NULL),
                     2);
    assert_int_equal(run_cli("query", "T", "--key", "{}", "--index=", NULL), 2);
    assert_int_equal(run_cli("query", "T", "--key", "{}", "--index", NULL), 2);
    assert_int_equal(run_cli("scan", "T", "--limit", "ten", NULL), 2);

    /* stream: flag values and combinations, all before connecting. */
    static const char *const bad_stream_flags[][3] = {
        {"--from", "middle", NULL},
        {"--from", "", NULL},
        {"--only", "admin", NULL},
        {"--after", "x", NULL},
        {"--after", "1", NULL},
        {"--after", "1:", NULL},
        {"--after", ":5", NULL},
        {"--after", "1:2,", NULL},
        {"--after", "1:2;3:4", NULL},
        {"--after", "", NULL},
        {"--after", "-1:2", NULL},
        {"--wait-ms", "5", NULL}, /* without --follow */
        {"--follow=yes", NULL, NULL},
        {"--wait-ms", "0", "--follow"},
        {"--wait-ms", "soon", "--follow"},
        {"--wait-ms", "20001", "--follow"},
        {"--limit", "5", NULL},
    };
    for (size_t i = 0; i < sizeof bad_stream_flags / sizeof bad_stream_flags[0]; i++) {
        const char *const *f = bad_stream_flags[i];
        int rv = run_cli("stream", "T", f[0], f[1], f[2], NULL);
        if (rv != 2) {
            fail_msg("stream T %s %s %s: exit %d, want 2", f[0], f[1] ? f[1] : "", f[2] ? f[2] : "",
                     rv);
        }
    }
    assert_int_equal(run_cli("stream", NULL), 2);
    assert_int_equal(run_cli("stream", "T", "U", NULL), 2);
    assert_int_equal(run_cli("batch-put", NULL), 2);

    /* Index and stream flags: shapes, values and combinations. */
    static const char *const bad_index_flags[][2] = {
        {"--lsi", "ByDate"},                        /* no = */
        {"--lsi", "=Date:S"},                       /* no name */
        {"--lsi", "ByDate=Date"},                   /* no type */
        {"--lsi", "ByDate=Date:X"},                 /* bad type */
        {"--lsi", "ByDate=Date:S,projection=keys"}, /* LSIs project all */
        {"--gsi", "ByEmail="},                      /* no key */
        {"--gsi", "ByEmail=Email:S,Age:N,Zip:S"},   /* two sort keys */
        {"--gsi", "ByEmail=Email:S,projection=some"},
        {"--gsi", "ByEmail=Email:S,partitions=0"},
        {"--gsi", "ByEmail=Email:S,partitions=many"},
        {"--gsi", "ByEmail=Email:S,partitions=4,partitions=8"},
        {"--gsi", "ByEmail=Email:S,,"},
        {"--stream", "yes"},
        {"--stream-retention-hours", "24"},  /* without --stream on */
        {"--stream-ttl-deletes", "off"},     /* without --stream on */
        {"--stream-view-type", "KEYS_ONLY"}, /* without --stream on */
    };
    for (size_t i = 0; i < sizeof bad_index_flags / sizeof bad_index_flags[0]; i++) {
        int rv = run_cli("create-table", "T", "--partition-key", "id:S", "--sort-key", "s:N",
                         bad_index_flags[i][0], bad_index_flags[i][1], NULL);
        if (rv != 2) {
            fail_msg("create-table %s %s: exit %d, want 2", bad_index_flags[i][0],
                     bad_index_flags[i][1], rv);
        }
    }
    assert_int_equal(run_cli("create-table", "T", "--partition-key", "id:S", "--stream", "on",
                             "--stream-retention-hours", "0", NULL),
                     2);
    assert_int_equal(run_cli("create-table", "T", "--partition-key", "id:S", "--stream", "on",
                             "--stream-retention-hours", "8761", NULL),
                     2);
    assert_int_equal(run_cli("create-table", "T", "--partition-key", "id:S", "--stream", "on",
                             "--stream-ttl-deletes", "maybe", NULL),
                     2);
    assert_int_equal(run_cli("create-table", "T", "--partition-key", "id:S", "--stream", "on",
                             "--stream-view-type", "keys_only", NULL),
                     2);
    assert_int_equal(run_cli("create-table", "--help", NULL), 0);

    assert_int_equal(run_cli("get", "T", "{}", "--hide-expired=yes", NULL), 2);
    assert_int_equal(run_cli("create-table", "T", "--hide-expired", NULL), 2); /* no key */

    /* update-ttl: exactly one action, --enable with an attribute, no
     * negative offset, rule flags with --enable only. */
    assert_int_equal(run_cli("update-ttl", "T", NULL), 2);
    assert_int_equal(run_cli("update-ttl", NULL), 2);
    assert_int_equal(run_cli("update-ttl", "T", "--enable", "--attribute", "E", "--disable", NULL),
                     2);
    assert_int_equal(run_cli("update-ttl", "T", "--pause", "--resume", NULL), 2);
    assert_int_equal(run_cli("update-ttl", "T", "--enable", NULL), 2);
    assert_int_equal(run_cli("update-ttl", "T", "--enable", "--attribute", "", NULL), 2);
    assert_int_equal(
        run_cli("update-ttl", "T", "--enable", "--attribute", "E", "--offset-seconds", "-5", NULL),
        2);
    assert_int_equal(
        run_cli("update-ttl", "T", "--enable", "--attribute", "E", "--offset-seconds=-1", NULL), 2);
    assert_int_equal(run_cli("update-ttl", "T", "--enable", "--attribute", "E", "--offset-seconds",
                             "soon", NULL),
                     2);
    assert_int_equal(run_cli("update-ttl", "T", "--enable", "--attribute", "E",
                             "--ignore-older-than-years", "0", NULL),
                     2);
    assert_int_equal(run_cli("update-ttl", "T", "--disable", "--attribute", "E", NULL), 2);
    assert_int_equal(run_cli("update-ttl", "T", "--enable=yes", NULL), 2);
    assert_int_equal(run_cli("describe-ttl", NULL), 2);
    assert_int_equal(run_cli("describe-ttl", "T", "--enable", NULL), 2);
    assert_int_equal(run_cli("ttl-preview", "T", NULL), 2);
    assert_int_equal(
        run_cli("ttl-preview", "T", "--attribute", "E", "--offset-seconds", "-1", NULL), 2);
    assert_int_equal(run_cli("ttl-preview", "T", "--attribute", "E", "--pause", NULL), 2);

    /* Help is not an error. */
    assert_int_equal(run_cli("--help", NULL), 0);
    assert_int_equal(run_cli("query", "--help", NULL), 0);
    assert_int_equal(run_cli("update-ttl", "--help", NULL), 0);
    assert_int_equal(run_cli("ttl-preview", "--help", NULL), 0);
    assert_int_equal(run_cli("stream", "--help", NULL), 0);

    /* Malformed JSON is an error (1), found before connecting. */
    assert_int_equal(run_cli("put", "T", "{not json", NULL), 1);
    assert_int_equal(run_cli("get", "T", "{\"k\":{\"N\":\"x\"}}", NULL), 1);
}

/* Writes text to a new temporary file; its path goes to path. */
static void temp_file(char *path, size_t len, const char *text)
{
    snprintf(path, len, "/tmp/client_test_token_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
}

static void test_cli_admin_token_file(void **state)
{
    (void)state;
    char url[64], token[64], empty[64], missing[80];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", free_port());
    temp_file(token, sizeof token, "s3cret\n");
    temp_file(empty, sizeof empty, "\n");
    snprintf(missing, sizeof missing, "%s.gone", token);

    /* Unreadable or empty: a usage error, before or after the command. */
    assert_int_equal(run_cli("--admin-token-file", missing, "list-tables", NULL), 2);
    assert_int_equal(run_cli("list-tables", "--admin-token-file", missing, NULL), 2);
    assert_int_equal(run_cli("--admin-token-file", "/", "list-tables", NULL), 2);
    assert_int_equal(run_cli("--admin-token-file", empty, "list-tables", NULL), 2);
    assert_int_equal(run_cli("--admin-token-file", NULL), 2);
    /* Readable: the command goes on to connect (and fails: nothing listens). */
    assert_int_equal(run_cli("--coordinator", url, "--timeout-ms", "300", "--admin-token-file",
                             token, "delete-table", "T", NULL),
                     1);
    assert_int_equal(run_cli("--coordinator", url, "--timeout-ms", "300", "update-ttl", "T",
                             "--disable", "--admin-token-file=" /* empty value */, NULL),
                     2);
    unlink(token);
    unlink(empty);
}

static void test_cli_unreachable_coordinator(void **state)
{
    (void)state;
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", free_port());
    assert_int_equal(run_cli("--coordinator", url, "--timeout-ms", "300", "list-tables", NULL), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_ids_lead_with_the_clock),
        cmocka_unit_test(test_item_builder),
        cmocka_unit_test(test_item_set_json),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_errors),
        cmocka_unit_test(test_update_builder),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_ttl_description_json_enabled),
        cmocka_unit_test(test_ttl_description_json_disabled),
        cmocka_unit_test(test_ttl_config_json),
        cmocka_unit_test(test_ttl_preview_sum),
        cmocka_unit_test(test_ttl_spec_checks),
        cmocka_unit_test(test_connect_nothing_listening),
        cmocka_unit_test(test_cli_usage_errors),
        cmocka_unit_test(test_cli_admin_token_file),
        cmocka_unit_test(test_cli_unreachable_coordinator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
