/*
 * cli_test: the lapse CLI as a new user meets it, against a real
 * three-node cluster, each check on what the CLI prints and its exit
 * status:
 *
 *  1. a bad global flag gets one "lapse: " prefix and the global usage
 *     line (exit 2); node's flags belong to one subcommand each (exit 2),
 *     and a removal without etcd is refused by the coordinator (exit 1);
 *  2. scan and query refuse --limit 0 (exit 2), as DynamoDB does;
 *  3. ITEM_JSON, KEY_JSON, PK_JSON and VALUE_JSON arguments read from
 *     @FILE and from stdin ("-"), items over the 128 KiB an argument may
 *     hold included; an unreadable file is a clear error (exit 2);
 *  4. delete-table prints the deleted table's description;
 *  5. stream --positions FILE: read at start, rewritten atomically as
 *     records are printed, by a follower too;
 *  6. with node 2 killed: scan prints what nodes 1 and 3 hold, then names
 *     node 2 and the partitions not read (exit 1), --limit likewise; and
 *     ttl-preview's error names node 2, not a healthy node.
 */
#define TESTUTIL_THREE_NODE_GROUP /* g_cluster, g_client, group_setup */
#include "testutil.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BIG_VALUE_BYTES (300 * 1024) /* over 128 KiB, under the 400 KB item limit */

/* Not group_teardown: test 6 kills node 2 on purpose, which that one
 * would count as a crash. */
static int teardown(void **state)
{
    (void)state;
    lapse_close(g_client);
    cluster_free(g_cluster, 1);
    return 0;
}

typedef struct path {
    char s[700];
} path;

/* A path in the cluster's run directory. */
static path run_path(const char *name)
{
    path p;
    snprintf(p.s, sizeof p.s, "%s/%s", cluster_run_dir(g_cluster), name);
    return p;
}

static char *read_all(const char *path)
{
    assert_int_equal(access(path, R_OK), 0);
    return cluster_read_file(path);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Runs the CLI (stdin from in_path, NULL: /dev/null); returns its exit
 * status, *out and *err its stdout and stderr (caller frees). */
static int cli(const char *in_path, char **out, char **err, const char *const *args)
{
    int rv = cluster_cli_run(g_cluster, args, in_path, out, err);
    assert_true(rv >= 0);
    return rv;
}

/* Runs the CLI and checks its status and that stdout and stderr hold the
 * given texts (NULL: anything) and stderr not err_lacks (NULL: no check). */
static void expect(int code, const char *out_has, const char *err_has, const char *err_lacks,
                   const char *in_path, const char *const *args)
{
    char *out = NULL, *err = NULL;
    int rv = cli(in_path, &out, &err, args);
    if (rv != code || (out_has != NULL && strstr(out, out_has) == NULL) ||
        (err_has != NULL && strstr(err, err_has) == NULL) ||
        (err_lacks != NULL && strstr(err, err_lacks) != NULL)) {
        fail_msg("lapse %s %s ...: exit %d (want %d)\nstdout: %.300s\nstderr: %s", args[0],
                 args[1] != NULL ? args[1] : "", rv, code, out, err);
    }
    free(out);
    free(err);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s != '\0'; s++) {
        n += *s == '\n';
    }
    return n;
}

static void create(const char *name, unsigned parts, int stream)
{
    lapse_table_def d = {.name = name,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = parts,
                         .stream = stream};
    lapse_error e = {0};
    assert_lapse_ok(lapse_create_table(g_client, &d, &e), &e);
}

static void put(const char *table, const char *json)
{
    lapse_item *it = item_json("%s", json);
    lapse_error e = {0};
    assert_lapse_ok(lapse_put(g_client, table, it, NULL, &e), &e);
    lapse_item_free(it);
}

/* 1 */
static void test_global_flag_errors_say_lapse_once(void **state)
{
    (void)state;
    static const char *const bad[][3] = {
        {"--timeout-ms", "-5", "lapse: --timeout-ms"},
        {"--timeout-ms", "0", "lapse: --timeout-ms must be positive"},
        {"--timeout-ms", "soon", "lapse: --timeout-ms"},
        {"--coordinator", "", "lapse: --coordinator wants a URL"},
        {"--admin-token-file", "/nonexistent/token", "lapse: --admin-token-file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {bad[i][0], bad[i][1], "cluster-status", NULL};
        expect(2, NULL, bad[i][2], "lapse: lapse", NULL, args);
    }
    const char *args[] = {"--timeout-ms", "-5", "cluster-status", NULL};
    expect(2, NULL, "usage: lapse [--coordinator URL[,URL...]]", "usage: lapse lapse", NULL, args);
    /* After the command, the command's prefix and usage. */
    expect(2, NULL, "lapse: cluster-status: --timeout-ms", "usage: lapse lapse", NULL,
           (const char *[]){"cluster-status", "--timeout-ms", "-5", NULL});
    expect(2, NULL, "node drain takes no --lose-data", NULL, NULL,
           (const char *[]){"node", "drain", "2", "--lose-data", NULL});
    expect(2, NULL, "node remove takes no --stop", NULL, NULL,
           (const char *[]){"node", "remove", "2", "--stop", NULL});
    expect(2, NULL, "is not a number", NULL, NULL,
           (const char *[]){"node", "remove", "two", "--lose-data", NULL});
    expect(1, NULL, "needs the coordinators on etcd", NULL, NULL,
           (const char *[]){"node", "remove", "2", "--lose-data", NULL});
}

/* 2 */
static void test_limit_below_one_is_refused(void **state)
{
    (void)state;
    create("Limits", 4, 0);
    put("Limits", "{\"Id\":{\"S\":\"a\"}}");
    put("Limits", "{\"Id\":{\"S\":\"b\"}}");
    expect(2, NULL, "--limit must be at least 1", NULL, NULL,
           (const char *[]){"scan", "Limits", "--limit", "0", NULL});
    expect(2, NULL, "--limit must be at least 1", NULL, NULL,
           (const char *[]){"query", "Limits", "--key", "{\"Id\":{\"S\":\"a\"}}", "--limit", "0",
                            NULL});
    char *out = NULL, *err = NULL;
    assert_int_equal(
        cli(NULL, &out, &err, (const char *[]){"scan", "Limits", "--limit", "1", NULL}), 0);
    assert_int_equal(count_lines(out), 1);
    free(out);
    free(err);
}

/* 3 */
static void test_json_arguments_from_file_and_stdin(void **state)
{
    (void)state;
    create("Files", 4, 0);
    /* An item too long for one argument (Linux: 128 KiB). */
    char *big = malloc(BIG_VALUE_BYTES + 100);
    assert_non_null(big);
    int n = snprintf(big, 100, "{\"Id\":{\"S\":\"big\"},\"Blob\":{\"S\":\"");
    memset(big + n, 'x', BIG_VALUE_BYTES);
    strcpy(big + n + BIG_VALUE_BYTES, "\"}}\n");
    path item_p = run_path("big.json");
    const char *item_path = item_p.s;
    write_file(item_path, big);
    char at[720];
    snprintf(at, sizeof at, "@%s", item_path);
    expect(0, NULL, NULL, NULL, NULL, (const char *[]){"put", "Files", at, NULL});

    path key_p = run_path("key.json");
    const char *key_path = key_p.s;
    write_file(key_path, "{\"Id\":{\"S\":\"big\"}}\n");
    char *out = NULL, *err = NULL;
    assert_int_equal(cli(key_path, &out, &err, (const char *[]){"get", "Files", "-", NULL}), 0);
    assert_true(strlen(out) > BIG_VALUE_BYTES);
    assert_non_null(strstr(out, "\"big\""));
    free(out);
    free(err);

    /* The same item from stdin, under another key; --if's value from a file. */
    strstr(big, "\"big\"")[3] = 'B'; /* "big" -> "biB" */
    write_file(item_path, big);
    free(big);
    expect(0, NULL, NULL, NULL, item_path, (const char *[]){"put", "Files", "-", NULL});
    expect(0, "\"biB\"", NULL, NULL, NULL,
           (const char *[]){"get", "Files", "{\"Id\":{\"S\":\"biB\"}}", NULL});
    expect(0, "\"biB\"", NULL, NULL, NULL,
           (const char *[]){"get", "Files", "{\"Id\":{\"S\":\"biB\"}}", "--eventually-consistent",
                            NULL});
    expect(0, "\"biB\"", NULL, NULL, NULL,
           (const char *[]){"query", "Files", "--key", "{\"Id\":{\"S\":\"biB\"}}",
                            "--eventually-consistent", NULL});
    expect(0, "\"biB\"", NULL, NULL, NULL,
           (const char *[]){"scan", "Files", "--eventually-consistent", NULL});

    path val_p = run_path("value.json");
    const char *val_path = val_p.s;
    write_file(val_path, "{\"N\":\"42\"}");
    char set[740], cond[740];
    snprintf(set, sizeof set, "Count=@%s", val_path);
    snprintf(cond, sizeof cond, "Count=@%s", val_path);
    char key_at[720];
    snprintf(key_at, sizeof key_at, "@%s", key_path);
    expect(0, "\"42\"", NULL, NULL, NULL,
           (const char *[]){"update", "Files", key_at, "--set", set, NULL});
    expect(0, "\"big\"", NULL, NULL, NULL,
           (const char *[]){"query", "Files", "--key", key_at, NULL});
    expect(0, NULL, NULL, NULL, NULL,
           (const char *[]){"delete", "Files", key_at, "--if", cond, NULL});
    expect(0, "{}", NULL, NULL, NULL, (const char *[]){"get", "Files", key_at, NULL});

    /* Unreadable, empty name, stdin twice. */
    expect(2, NULL, "ITEM_JSON: cannot read /nonexistent/item.json: No such file or directory",
           NULL, NULL, (const char *[]){"put", "Files", "@/nonexistent/item.json", NULL});
    expect(2, NULL, "wants a file name", NULL, NULL, (const char *[]){"get", "Files", "@", NULL});
    expect(2, NULL, "stdin (\"-\") can be read only once", NULL, val_path,
           (const char *[]){"put", "Files", "-", "--if", "Count=-", NULL});
    expect(1, NULL, "KEY_JSON", NULL, val_path, (const char *[]){"get", "Files", "-", NULL});
}

/* 4 */
static void test_delete_table_prints_what_it_deleted(void **state)
{
    (void)state;
    create("Doomed", 4, 0);
    expect(0, "{\"TableDescription\":{\"TableName\":\"Doomed\",\"TableStatus\":\"DELETED\"}}", NULL,
           NULL, NULL, (const char *[]){"delete-table", "Doomed", NULL});
    expect(1, NULL, "Doomed", NULL, NULL, (const char *[]){"describe-table", "Doomed", NULL});
}

/* Runs `stream Feed --positions P` until it has printed want records in
 * all since the file was made (records reach their shard shortly after the
 * write), for up to 10 s; returns the records printed. */
static size_t stream_until(const char *pos_path, size_t want)
{
    size_t total = 0;
    for (int i = 0; i < 100 && total < want; i++) {
        char *out = NULL, *err = NULL;
        int rv = cli(NULL, &out, &err,
                     (const char *[]){"stream", "Feed", "--positions", pos_path, NULL});
        if (rv != 0) {
            fail_msg("stream --positions: exit %d: %s", rv, err);
        }
        total += count_lines(out);
        free(out);
        free(err);
        if (total < want) {
            usleep(100 * 1000);
        }
    }
    return total;
}

/* 5 */
static void test_stream_positions_file(void **state)
{
    (void)state;
    create("Feed", 8, 1);
    path pos_p = run_path("feed.positions");
    const char *pos = pos_p.s;
    char tmp[720];
    snprintf(tmp, sizeof tmp, "%s.tmp", pos);
    unlink(pos);
    for (int i = 0; i < 3; i++) {
        char json[64];
        snprintf(json, sizeof json, "{\"Id\":{\"S\":\"f%d\"}}", i);
        put("Feed", json);
    }
    /* A missing file: from the oldest record; the file then lists all 8
     * shards and holds what was printed. */
    assert_int_equal(stream_until(pos, 3), 3);
    char *text = read_all(pos);
    size_t commas = 0;
    for (const char *p = text; *p; p++) {
        commas += *p == ',';
    }
    assert_int_equal(commas, 7);
    free(text);
    assert_int_equal(access(tmp, F_OK), -1);
    /* Read again: nothing new. */
    char *out = NULL, *err = NULL;
    assert_int_equal(
        cli(NULL, &out, &err, (const char *[]){"stream", "Feed", "--positions", pos, NULL}), 0);
    assert_int_equal(count_lines(out), 0);
    assert_non_null(strstr(err, "--positions"));
    free(out);
    free(err);

    /* A follower rewrites the file as records come. */
    char *before = read_all(pos);
    path outp = run_path("follow.out"), errp = run_path("follow.err");
    pid_t pid = cluster_cli_spawn(g_cluster,
                                  (const char *[]){"stream", "Feed", "--positions", pos, "--follow",
                                                   "--wait-ms", "200", NULL},
                                  outp.s, errp.s);
    assert_true(pid > 0);
    put("Feed", "{\"Id\":{\"S\":\"late\"}}");
    int changed = 0;
    for (int i = 0; i < 100 && !changed; i++) {
        char *now = read_all(pos);
        changed = strcmp(now, before) != 0;
        free(now);
        if (!changed) {
            usleep(100 * 1000);
        }
    }
    kill(pid, SIGTERM);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    free(before);
    assert_true(changed);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char *followed = read_all(outp.s);
    assert_int_equal(count_lines(followed), 1);
    assert_non_null(strstr(followed, "\"late\""));
    free(followed);
    /* The next reader starts after it. */
    assert_int_equal(
        cli(NULL, &out, &err, (const char *[]){"stream", "Feed", "--positions", pos, NULL}), 0);
    assert_int_equal(count_lines(out), 0);
    free(out);
    free(err);
    /* A damaged file is refused, naming the flag. */
    write_file(pos, "0:1,zzz\n");
    expect(2, NULL, "--positions wants SHARD:SEQ", NULL, NULL,
           (const char *[]){"stream", "Feed", "--positions", pos, NULL});
    expect(2, NULL, "exclude each other", NULL, NULL,
           (const char *[]){"stream", "Feed", "--positions", pos, "--after", "0:1", NULL});
}

/* update-stream turns a stream on after create-table (the description
 * shows it with its view and generation 1), refuses to turn it on twice or
 * off twice in DynamoDB's words, and refuses bad flags as usage errors. */
static void test_update_stream_on_and_off(void **state)
{
    (void)state;
    create("Later", 4, 0);
    expect(2, NULL, "exactly one of --on, --off", NULL, NULL,
           (const char *[]){"update-stream", "Later", NULL});
    expect(2, NULL, "exactly one of --on, --off", NULL, NULL,
           (const char *[]){"update-stream", "Later", "--on", "--off", NULL});
    expect(2, NULL, "goes with --on only", NULL, NULL,
           (const char *[]){"update-stream", "Later", "--off", "--stream-view-type", "KEYS_ONLY",
                            NULL});
    expect(2, NULL, "--stream-view-type must be", NULL, NULL,
           (const char *[]){"update-stream", "Later", "--on", "--stream-view-type", "ALL", NULL});
    expect(1, NULL, "has no stream to disable", NULL, NULL,
           (const char *[]){"update-stream", "Later", "--off", NULL});
    expect(0, "\"KEYS_ONLY\"", NULL, NULL, NULL,
           (const char *[]){"update-stream", "Later", "--on", "--stream-view-type", "KEYS_ONLY",
                            NULL});
    expect(1, NULL, "already has an enabled stream", NULL, NULL,
           (const char *[]){"update-stream", "Later", "--on", NULL});
    char *out = NULL, *err = NULL;
    assert_int_equal(cli(NULL, &out, &err, (const char *[]){"describe-table", "Later", NULL}), 0);
    assert_non_null(strstr(out, "\"Generation\""));
    assert_non_null(strstr(out, "\"StreamShards\""));
    free(out);
    free(err);
    expect(0, "\"StreamEnabled\":false", NULL, NULL, NULL,
           (const char *[]){"update-stream", "Later", "--off", NULL});
}

/* 6 (last: kills node 2) */
static void test_node_down_scan_and_preview_name_it(void **state)
{
    (void)state;
    enum { PARTS = 16, ITEMS = 60 };
    create("Partial", PARTS, 0);
    for (int i = 0; i < ITEMS; i++) {
        char json[64];
        snprintf(json, sizeof json, "{\"Id\":{\"S\":\"p%d\"}}", i);
        put("Partial", json);
    }
    uint32_t *owners = NULL;
    size_t n = 0;
    lapse_error e = {0};
    assert_lapse_ok(lapse_partition_owners(g_client, "Partial", &owners, &n, &e), &e);
    assert_int_equal(n, PARTS);
    /* What nodes 1 and 3 hold, partition by partition. */
    size_t elsewhere = 0, on2 = 0;
    for (uint32_t p = 0; p < PARTS; p++) {
        lapse_scan_opts o = {.segment = p, .total_segments = PARTS};
        lapse_page *pg = NULL;
        assert_lapse_ok(lapse_scan(g_client, "Partial", &o, &pg, &e), &e);
        assert_null(lapse_page_last_key(pg));
        *(owners[p] == 2 ? &on2 : &elsewhere) += lapse_page_count(pg);
        lapse_page_free(pg);
    }
    lapse_free(owners);
    assert_int_equal(elsewhere + on2, ITEMS);
    assert_true(on2 > 0 && elsewhere > 0);

    assert_int_equal(cluster_kill(g_cluster, 2, SIGKILL), 0);
    char *out = NULL, *err = NULL;
    assert_int_equal(
        cli(NULL, &out, &err, (const char *[]){"--timeout-ms", "1000", "scan", "Partial", NULL}),
        1);
    if (count_lines(out) != elsewhere || strstr(err, "node 2: ") == NULL ||
        strstr(err, "not read") == NULL) {
        fail_msg("scan with node 2 down: %zu lines (want %zu)\nstderr: %s", count_lines(out),
                 elsewhere, err);
    }
    free(out);
    free(err);
    assert_int_equal(
        cli(NULL, &out, &err,
            (const char *[]){"--timeout-ms", "1000", "scan", "Partial", "--limit", "1000", NULL}),
        1);
    assert_int_equal(count_lines(out), elsewhere);
    assert_non_null(strstr(err, "node 2: "));
    free(out);
    free(err);

    /* ttl-preview: the dead node is named, every time. */
    for (int i = 0; i < 3; i++) {
        expect(1, NULL, "node 2 (", "node 3 (", NULL,
               (const char *[]){"--timeout-ms", "1000", "ttl-preview", "Partial", "--attribute",
                                "Exp", NULL});
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_global_flag_errors_say_lapse_once),
        cmocka_unit_test(test_limit_below_one_is_refused),
        cmocka_unit_test(test_json_arguments_from_file_and_stdin),
        cmocka_unit_test(test_delete_table_prints_what_it_deleted),
        cmocka_unit_test(test_stream_positions_file),
        cmocka_unit_test(test_update_stream_on_and_off),
        cmocka_unit_test(test_node_down_scan_and_preview_name_it),
    };
    return cmocka_run_group_tests(tests, group_setup, teardown);
}
