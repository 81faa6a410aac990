/*
 * bad_input_test: malformed frames, wrong types, missing keys, oversized items,
 * unknown tables and bad CLI usage against a real three-node cluster. Each
 * gets a clear error and a non-zero status; no daemon crashes and every one
 * keeps serving.
 */
#define TESTUTIL_THREE_NODE_GROUP /* g_cluster, g_client, group_setup, group_teardown */
#include "testutil.h"

#include <sys/wait.h>
#include <unistd.h>

#include "../rpc/rpc.h"

/* The group's cluster, with the table the tests send bad input for. */
static int setup(void **state)
{
    group_setup(state);
    create_keyed_table(g_client, "Strict", "Id", 'N', "Sk", 'S', 8);
    return 0;
}

/* Every daemon still answers: a put and get through liblapse, and the
 * coordinator's cluster status. */
static void assert_cluster_serving(void)
{
    lapse_error e = {0};
    for (int i = 0; i < 24; i++) {
        lapse_item *it = item_json("{\"Id\":{\"N\":\"%d\"},\"Sk\":{\"S\":\"ok\"}}", i);
        assert_lapse_ok(lapse_put(g_client, "Strict", it, NULL, &e), &e);
        lapse_item *got = NULL;
        assert_lapse_ok(lapse_get(g_client, "Strict", it, &got, &e), &e);
        assert_non_null(got);
        lapse_item_free(got);
        lapse_item_free(it);
    }
    char *js = NULL;
    assert_lapse_ok(lapse_cluster_status(g_client, &js, &e), &e);
    lapse_free(js);
    assert_int_equal(cluster_crashed(g_cluster, NULL), -1);
}

static void test_wrong_types_missing_keys_and_sizes(void **state)
{
    (void)state;
    lapse_error e = {0};
    struct {
        const char *json;
        int code;
        const char *mention;
    } cases[] = {
        {"{\"Id\":{\"S\":\"1\"},\"Sk\":{\"S\":\"a\"}}", LAPSE_EINVAL, "Id"}, /* pk type */
        {"{\"Id\":{\"N\":\"1\"}}", LAPSE_EINVAL, "Sk"},                      /* no sort key */
        {"{\"Sk\":{\"S\":\"a\"}}", LAPSE_EINVAL, "Id"},                      /* no pk */
        {"{\"Id\":{\"N\":\"1\"},\"Sk\":{\"N\":\"2\"}}", LAPSE_EINVAL, "Sk"}, /* sk type */
        {"{\"Id\":{\"N\":\"1\"},\"Sk\":{\"S\":\"\"}}", LAPSE_EINVAL, "Sk"},  /* empty S key */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        lapse_item *it = item_json("%s", cases[i].json);
        memset(&e, 0, sizeof(e));
        assert_lapse_code(lapse_put(g_client, "Strict", it, NULL, &e), cases[i].code, &e);
        assert_int_equal(e.code, cases[i].code);
        if (strstr(e.message, cases[i].mention) == NULL) {
            fail_msg("error for %s does not name %s: %s", cases[i].json, cases[i].mention,
                     e.message);
        }
        lapse_item_free(it);
    }

    /* Malformed JSON and bad numbers never reach the wire. */
    lapse_item *it = NULL;
    assert_lapse_code(lapse_item_from_json(&it, "{\"Id\":{\"N\":\"12x\"}}", &e), LAPSE_EINVAL, &e);
    assert_lapse_code(lapse_item_from_json(&it, "{\"Id\":", &e), LAPSE_EINVAL, &e);
    assert_lapse_code(lapse_item_from_json(&it, "{\"Id\":{\"SS\":[]}}", &e), LAPSE_EINVAL, &e);
    assert_lapse_code(lapse_item_from_json(&it, "{\"Id\":{\"NS\":[\"1\",\"1.0\"]}}", &e),
                      LAPSE_EINVAL, &e);

    /* Over DynamoDB's 400 KB item limit. */
    it = item_json("{\"Id\":{\"N\":\"1\"},\"Sk\":{\"S\":\"big\"}}");
    char *big = malloc(420 * 1024);
    memset(big, 'x', 420 * 1024 - 1);
    big[420 * 1024 - 1] = '\0';
    assert_int_equal(lapse_item_set_s(it, "Blob", big), 0);
    assert_lapse_code(lapse_put(g_client, "Strict", it, NULL, &e), LAPSE_ETOOBIG, &e);
    free(big);
    lapse_item_free(it);

    /* Unknown table. */
    it = item_json("{\"Id\":{\"N\":\"1\"}}");
    assert_lapse_code(lapse_put(g_client, "NoSuchTable", it, NULL, &e), LAPSE_ENOTFOUND, &e);
    assert_non_null(strstr(e.message, "NoSuchTable"));
    lapse_item_free(it);

    /* Bad table definitions. */
    lapse_table_def bad_name = {
        .name = "x", .partition_key = "Id", .partition_key_type = 'S', .partitions = 4};
    assert_lapse_code(lapse_create_table(g_client, &bad_name, &e), LAPSE_EINVAL, &e);
    lapse_table_def bad_parts = {
        .name = "Parts", .partition_key = "Id", .partition_key_type = 'S', .partitions = 12};
    assert_lapse_code(lapse_create_table(g_client, &bad_parts, &e), LAPSE_EINVAL, &e);
    assert_cluster_serving();
}

static Lapse__Response *decode_reply(void *reply, size_t len)
{
    Lapse__Response *r = lapse__response__unpack(NULL, len, reply);
    free(reply);
    assert_non_null(r);
    return r;
}

static void send_raw_expect(const char *url, const void *bytes, size_t len, int status)
{
    rpc_client *rc = NULL;
    char err[256];
    assert_int_equal(rpc_client_open(&rc, url, err, sizeof(err)), 0);
    void *reply = NULL;
    size_t rlen = 0;
    int rv = rpc_call_raw(rc, bytes, len, 3000, &reply, &rlen, err, sizeof(err));
    if (rv != 0) {
        fail_msg("raw call to %s: %s", url, err);
    }
    Lapse__Response *r = decode_reply(reply, rlen);
    if ((int)r->status != status) {
        fail_msg("%s answered status %d (%s), expected %d", url, (int)r->status, r->message,
                 status);
    }
    assert_true(r->message != NULL && r->message[0] != '\0');
    lapse__response__free_unpacked(r, NULL);
    rpc_client_close(rc);
}

static void test_malformed_frames_get_error_replies(void **state)
{
    (void)state;
    /* A valid PutItem, packed, to truncate and corrupt. */
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__PutItemRequest put = LAPSE__PUT_ITEM_REQUEST__INIT;
    Lapse__Item item = LAPSE__ITEM__INIT;
    Lapse__Attribute a = LAPSE__ATTRIBUTE__INIT;
    Lapse__AttributeValue v = LAPSE__ATTRIBUTE_VALUE__INIT;
    Lapse__Attribute *attrs[1] = {&a};
    v.value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_N;
    v.n = "1";
    a.name = "Id";
    a.value = &v;
    item.n_attrs = 1;
    item.attrs = attrs;
    put.table = "Strict";
    put.item = &item;
    req.version = RPC_PROTOCOL_VERSION;
    req.body_case = LAPSE__REQUEST__BODY_PUT_ITEM;
    req.put_item = &put;
    uint8_t packed[256];
    size_t plen = lapse__request__pack(&req, packed);

    const char *urls[4] = {cluster_coordinator_url(g_cluster), cluster_node_url(g_cluster, 1),
                           cluster_node_url(g_cluster, 2), cluster_node_url(g_cluster, 3)};
    uint8_t garbage[512];
    unsigned seed = 12345;
    for (size_t i = 0; i < sizeof(garbage); i++) {
        seed = seed * 1103515245u + 12345u;
        garbage[i] = (uint8_t)(seed >> 16);
    }
    garbage[0] = 0xff; /* an invalid field tag, so it never decodes */
    for (int u = 0; u < 4; u++) {
        send_raw_expect(urls[u], garbage, sizeof(garbage), LAPSE__STATUS__EPROTO);
        send_raw_expect(urls[u], packed, plen - 3, LAPSE__STATUS__EPROTO); /* truncated */
        send_raw_expect(urls[u], "", 0, LAPSE__STATUS__EPROTO);            /* empty body */
    }

    /* Wrong protocol version. */
    req.version = 99;
    size_t n = lapse__request__pack(&req, packed);
    send_raw_expect(urls[1], packed, n, LAPSE__STATUS__EPROTO);
    req.version = RPC_PROTOCOL_VERSION;

    /* A value with no type set, and an N that is not a number. */
    v.value_case = LAPSE__ATTRIBUTE_VALUE__VALUE__NOT_SET;
    for (int u = 1; u <= 3; u++) {
        n = lapse__request__pack(&req, packed);
        send_raw_expect(urls[u], packed, n, LAPSE__STATUS__EINVAL);
    }
    v.value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_N;
    v.n = "1e999999";
    n = lapse__request__pack(&req, packed);
    send_raw_expect(urls[2], packed, n, LAPSE__STATUS__EINVAL);

    /* A node call sent to the coordinator. */
    v.n = "1";
    n = lapse__request__pack(&req, packed);
    send_raw_expect(urls[0], packed, n, LAPSE__STATUS__EINVAL);

    assert_cluster_serving();
}

/* Runs the CLI with args; returns its exit status and its stdout and stderr
 * (caller frees). */
static int run_cli(char **out, char **errout, const char *const *args)
{
    char outp[600], errp[600];
    snprintf(outp, sizeof(outp), "%s/cli.out", cluster_run_dir(g_cluster));
    snprintf(errp, sizeof(errp), "%s/cli.err", cluster_run_dir(g_cluster));
    pid_t pid = cluster_cli_spawn(g_cluster, args, outp, errp);
    assert_true(pid > 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    const char *paths[2] = {outp, errp};
    char **dst[2] = {out, errout};
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(paths[k], "r");
        assert_non_null(f);
        char *buf = calloc(1, 65536);
        size_t got = fread(buf, 1, 65535, f);
        buf[got] = '\0';
        fclose(f);
        *dst[k] = buf;
    }
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void expect_cli(int code, const char *stdout_has, const char *stderr_has,
                       const char *const *args)
{
    char *out = NULL, *err = NULL;
    int rv = run_cli(&out, &err, args);
    if (rv != code || (stdout_has && !strstr(out, stdout_has)) ||
        (stderr_has && !strstr(err, stderr_has))) {
        fail_msg("lapse %s ...: exit %d (want %d)\nstdout: %s\nstderr: %s", args[0], rv, code, out,
                 err);
    }
    free(out);
    free(err);
}

static void test_cli_reports_bad_input_with_exit_codes(void **state)
{
    (void)state;
    expect_cli(2, NULL, NULL, (const char *[]){"no-such-command", NULL});
    expect_cli(2, NULL, NULL, (const char *[]){"get", NULL});
    expect_cli(2, NULL, NULL, (const char *[]){"scan", "Strict", "--limit", NULL});
    expect_cli(2, NULL, NULL, (const char *[]){"put", "Strict", "{}", "--bogus-flag", NULL});
    expect_cli(1, NULL, "lapse", (const char *[]){"put", "Strict", "{\"Id\":", NULL});
    expect_cli(
        1, NULL, "Id",
        (const char *[]){"put", "Strict", "{\"Id\":{\"S\":\"x\"},\"Sk\":{\"S\":\"a\"}}", NULL});
    expect_cli(1, NULL, "NoSuch",
               (const char *[]){"get", "NoSuch", "{\"Id\":{\"N\":\"1\"}}", NULL});
    expect_cli(
        0, NULL, NULL,
        (const char *[]){"put", "Strict", "{\"Id\":{\"N\":\"7\"},\"Sk\":{\"S\":\"cli\"}}", NULL});
    expect_cli(
        0, "\"cli\"", NULL,
        (const char *[]){"get", "Strict", "{\"Id\":{\"N\":\"7\"},\"Sk\":{\"S\":\"cli\"}}", NULL});
    expect_cli(
        0, "{}", NULL,
        (const char *[]){"get", "Strict", "{\"Id\":{\"N\":\"8\"},\"Sk\":{\"S\":\"none\"}}", NULL});
    assert_cluster_serving();
}

/* create-table's index and stream flags: malformed ones are usage errors
 * (2) before any call; declarations the coordinator refuses fail (1) with
 * its reason naming the index; good ones print the new description. */
static void test_cli_index_and_stream_flags(void **state)
{
    (void)state;
    expect_cli(2, NULL, "--lsi wants NAME=SK:TYPE",
               (const char *[]){"create-table", "Idx", "--partition-key", "Id:N", "--sort-key",
                                "Sk:S", "--lsi", "ByTime", NULL});
    expect_cli(2, NULL, "projection must be all or keys",
               (const char *[]){"create-table", "Idx", "--partition-key", "Id:N", "--gsi",
                                "G=a:S,projection=half", NULL});
    expect_cli(2, NULL, "--stream-ttl-deletes needs --stream on",
               (const char *[]){"create-table", "Idx", "--partition-key", "Id:N",
                                "--stream-ttl-deletes", "off", NULL});
    expect_cli(1, NULL, "LSI \"ByTime\" needs a table with a sort key",
               (const char *[]){"create-table", "Idx", "--partition-key", "Id:N", "--lsi",
                                "ByTime=Time:N", NULL});
    expect_cli(1, NULL, "index name \"Dup\" is used twice",
               (const char *[]){"create-table", "Idx", "--partition-key", "Id:N", "--gsi",
                                "Dup=a:S", "--gsi", "Dup=b:S", NULL});
    expect_cli(1, NULL, "GSI \"Odd\": partition count 3",
               (const char *[]){"create-table", "Idx", "--partition-key", "Id:N", "--gsi",
                                "Odd=a:S,partitions=3", NULL});
    expect_cli(1, NULL, "key attribute \"Id\" is of type N in the table but S in ById",
               (const char *[]){"create-table", "Idx", "--partition-key", "Id:N", "--gsi",
                                "ById=Id:S", NULL});
    expect_cli(1, NULL, "GSI name \"a b\" may contain only",
               (const char *[]){"create-table", "Idx", "--partition-key", "Id:N", "--gsi",
                                "a b=x:S", NULL});
    expect_cli(1, NULL, "Idx", (const char *[]){"describe-table", "Idx", NULL}); /* not made */

    const char *good[] = {"create-table",
                          "Idx",
                          "--partition-key",
                          "Id:N",
                          "--sort-key",
                          "Sk:S",
                          "--partitions",
                          "4",
                          "--lsi",
                          "ByTime=Time:N",
                          "--gsi",
                          "ByEmail=Email:S,projection=keys,partitions=2",
                          "--gsi",
                          "ByCity=City:S,Zip:B",
                          "--stream",
                          "on",
                          "--stream-retention-hours",
                          "48",
                          "--stream-ttl-deletes",
                          "off",
                          NULL};
    expect_cli(0, "\"IndexName\":\"ByEmail\",\"IndexId\":2", NULL, good);
    expect_cli(1, "", "already exists", good);
    expect_cli(0, "\"ProjectionType\":\"KEYS_ONLY\"},\"Partitions\":2", NULL,
               (const char *[]){"describe-table", "Idx", NULL});
    expect_cli(0,
               "\"StreamSpecification\":{\"StreamEnabled\":true,\"StreamViewType\":"
               "\"NEW_AND_OLD_IMAGES\",\"TtlDeletes\":false,\"RetentionHours\":48}",
               NULL, (const char *[]){"describe-table", "Idx", NULL});
    expect_cli(0, "{\"AttributeName\":\"Zip\",\"KeyType\":\"RANGE\"}", NULL,
               (const char *[]){"describe-table", "Idx", NULL});
    assert_cluster_serving();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrong_types_missing_keys_and_sizes),
        cmocka_unit_test(test_malformed_frames_get_error_replies),
        cmocka_unit_test(test_cli_reports_bad_input_with_exit_codes),
        cmocka_unit_test(test_cli_index_and_stream_flags),
    };
    return cmocka_run_group_tests(tests, setup, group_teardown);
}
