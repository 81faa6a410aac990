/*
 * repl_testutil.c: the fixture and helpers of replication_test and
 * gsi_expiry_test (repl_testutil.h).
 */
#include "repl_testutil.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "testutil.h"

#include "../placement/hash.h"

static cluster *g_c;
static lapse_client *g_cl;

/* ------------------------------------------------------------------------ */
/* The fixture                                                              */
/* ------------------------------------------------------------------------ */

int rt_setup(void **state)
{
    (void)state;
    cluster_options o = {.nodes = 3, .quiet = 1, .metrics = 1};
    char err[512];
    if (cluster_start(&g_c, &o, err, sizeof(err)) != 0) {
        fail_msg("cluster_start: %s", err);
    }
    g_cl = connect_client(g_c);
    return 0;
}

int rt_teardown(void **state)
{
    (void)state;
    lapse_close(g_cl);
    if (g_c == NULL) {
        return 0;
    }
    int status = 0, crashed = cluster_crashed(g_c, &status);
    if (crashed >= 0) {
        fprintf(stderr, "process %d exited on its own (wait status %d); logs in %s\n", crashed,
                status, cluster_run_dir(g_c));
    }
    cluster_free(g_c, crashed < 0);
    return crashed < 0 ? 0 : -1;
}

cluster *rt_cluster(void)
{
    return g_c;
}

lapse_client *rt_client(void)
{
    return g_cl;
}

void rt_create(const lapse_table_def *d)
{
    lapse_error e = {0};
    assert_lapse_ok(lapse_create_table(g_cl, d, &e), &e);
}

int64_t rt_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rt_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------------ */
/* Item lists                                                               */
/* ------------------------------------------------------------------------ */

void rt_items_push(rt_items *l, lapse_item *it)
{
    assert_non_null(it);
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = realloc(l->v, l->cap * sizeof(*l->v));
        assert_non_null(l->v);
    }
    l->v[l->n++] = it;
}

void rt_items_free(rt_items *l)
{
    for (size_t i = 0; i < l->n; i++) {
        lapse_item_free(l->v[i]);
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
}

static int cmp_attr(const lapse_item *x, const lapse_item *y, const char *name)
{
    if (name == NULL) {
        return 0;
    }
    const char *ns1 = lapse_item_get_n(x, name), *ns2 = lapse_item_get_n(y, name);
    if (ns1 != NULL && ns2 != NULL) {
        double a = strtod(ns1, NULL), b = strtod(ns2, NULL);
        return a < b ? -1 : a > b;
    }
    const char *s1 = lapse_item_get_s(x, name), *s2 = lapse_item_get_s(y, name);
    if (s1 == NULL || s2 == NULL) {
        return (s1 != NULL) - (s2 != NULL);
    }
    return strcmp(s1, s2);
}

static const char *g_sort[3];

static int cmp_items(const void *a, const void *b)
{
    const lapse_item *x = *(lapse_item *const *)a, *y = *(lapse_item *const *)b;
    for (int i = 0; i < 3; i++) {
        int c = cmp_attr(x, y, g_sort[i]);
        if (c != 0) {
            return c;
        }
    }
    return 0;
}

void rt_sort(rt_items *l, const char *a, const char *b, const char *c)
{
    g_sort[0] = a;
    g_sort[1] = b;
    g_sort[2] = c;
    if (l->n > 1) {
        qsort(l->v, l->n, sizeof(*l->v), cmp_items);
    }
}

int rt_items_equal(const rt_items *a, const rt_items *b)
{
    if (a->n != b->n) {
        return 0;
    }
    for (size_t i = 0; i < a->n; i++) {
        if (!lapse_item_equal(a->v[i], b->v[i])) {
            return 0;
        }
    }
    return 1;
}

void rt_assert_items_equal(const rt_items *got, const rt_items *want, const char *what)
{
    if (rt_items_equal(got, want)) {
        return;
    }
    size_t i = 0;
    while (i < got->n && i < want->n && lapse_item_equal(got->v[i], want->v[i])) {
        i++;
    }
    char *g = i < got->n ? lapse_item_to_json(got->v[i]) : NULL;
    char *w = i < want->n ? lapse_item_to_json(want->v[i]) : NULL;
    fail_msg("%s: %zu items, want %zu; first difference at %zu:\n got: %s\nwant: %s", what, got->n,
             want->n, i, g ? g : "(none)", w ? w : "(none)");
}

/* ------------------------------------------------------------------------ */
/* Reads and waits                                                          */
/* ------------------------------------------------------------------------ */

void rt_query_all(const char *table, const char *index, const char *pk_json,
                  const lapse_query_opts *cond, int hide_expired, unsigned page_limit,
                  rt_items *out)
{
    lapse_item *start = NULL;
    do {
        lapse_query_opts q = {0};
        if (cond != NULL) {
            q = *cond;
        }
        q.partition_key_json = pk_json;
        q.limit = page_limit;
        q.hide_expired = hide_expired;
        q.exclusive_start_key = start;
        lapse_page *p = NULL;
        lapse_error e = {0};
        assert_lapse_ok(lapse_query_index(g_cl, table, index, &q, &p, &e), &e);
        if (page_limit > 0) {
            assert_true(lapse_page_count(p) <= page_limit);
        }
        for (size_t i = 0; i < lapse_page_count(p); i++) {
            rt_items_push(out, lapse_item_dup(lapse_page_item(p, i)));
        }
        lapse_item_free(start);
        start = lapse_page_last_key(p) ? lapse_item_dup(lapse_page_last_key(p)) : NULL;
        lapse_page_free(p);
    } while (start != NULL);
}

void rt_scan_all(const char *table, rt_items *out)
{
    lapse_item *start = NULL;
    do {
        lapse_scan_opts so = {.exclusive_start_key = start};
        lapse_page *p = NULL;
        lapse_error e = {0};
        assert_lapse_ok(lapse_scan(g_cl, table, &so, &p, &e), &e);
        for (size_t i = 0; i < lapse_page_count(p); i++) {
            rt_items_push(out, lapse_item_dup(lapse_page_item(p, i)));
        }
        lapse_item_free(start);
        start = lapse_page_last_key(p) ? lapse_item_dup(lapse_page_last_key(p)) : NULL;
        lapse_page_free(p);
    } while (start != NULL);
}

int rt_exists(const char *table, const char *key_json)
{
    lapse_item *key = item_json("%s", key_json), *got = NULL;
    lapse_error e = {0};
    assert_lapse_ok(lapse_get(g_cl, table, key, &got, &e), &e);
    int found = got != NULL;
    lapse_item_free(got);
    lapse_item_free(key);
    return found;
}

void rt_wait_for(const char *what, int timeout_ms, int (*cond)(void *arg, int last), void *arg)
{
    int64_t deadline = rt_wall_ms() + timeout_ms;
    while (rt_wall_ms() < deadline) {
        if (cond(arg, 0)) {
            return;
        }
        rt_sleep_ms(100);
    }
    if (cond(arg, 1)) {
        return;
    }
    fail_msg("still waiting for %s after %d ms", what, timeout_ms);
}

static int ttl_enabled(void *arg, int last)
{
    char *js = NULL;
    lapse_error e = {0};
    assert_lapse_ok(lapse_describe_ttl(g_cl, arg, &js, &e), &e);
    int ok = strstr(js, "\"TimeToLiveStatus\":\"ENABLED\"") != NULL;
    if (!ok && last) {
        fprintf(stderr, "describe-ttl: %s\n", js);
    }
    lapse_free(js);
    return ok;
}

void rt_enable_ttl(const char *table, const char *attr)
{
    lapse_ttl_spec spec = {.action = LAPSE_TTL_ENABLE, .attribute = attr};
    lapse_error e = {0};
    assert_lapse_ok(lapse_update_ttl(g_cl, table, &spec, NULL, &e), &e);
    rt_wait_for("TTL to be ENABLED", 10000, ttl_enabled, (void *)table);
}

void rt_pause_ttl(const char *table)
{
    lapse_ttl_spec spec = {.action = LAPSE_TTL_PAUSE};
    lapse_error e = {0};
    assert_lapse_ok(lapse_update_ttl(g_cl, table, &spec, NULL, &e), &e);
}

static int nodes_took_map(void *arg, int last)
{
    (void)arg;
    lapse_error e = {0};
    char *js = NULL;
    assert_lapse_ok(lapse_cluster_status(g_cl, &js, &e), &e);
    json_t *doc = json_loads(js, 0, NULL);
    assert_non_null(doc);
    json_int_t want = json_integer_value(json_object_get(doc, "PartitionMapVersion"));
    size_t i, behind = 0;
    json_t *n;
    json_array_foreach(json_object_get(doc, "Nodes"), i, n)
    {
        behind += json_integer_value(json_object_get(n, "PartitionMapVersion")) != want;
    }
    json_decref(doc);
    if (behind > 0 && last) {
        fprintf(stderr, "cluster-status: %s\n", js);
    }
    lapse_free(js);
    return behind == 0;
}

void rt_wait_nodes_took_map(void)
{
    rt_wait_for("every node to take the latest map", 10000, nodes_took_map, NULL);
}

/* ------------------------------------------------------------------------ */
/* The stream                                                               */
/* ------------------------------------------------------------------------ */

void rt_stream_free(rt_stream *s)
{
    streamread_free(s);
}

void rt_stream_wait(rt_stream *s, const char *table, size_t want, int timeout_ms)
{
    int64_t deadline = rt_wall_ms() + timeout_ms;
    memset(s, 0, sizeof(*s));
    for (;;) {
        lapse_error e = {0};
        assert_lapse_ok(streamread_more(g_cl, table, s, &e), &e); /* what arrived since */
        if (s->n > want) {
            fail_msg("stream of %s: %zu records, more than the %zu expected", table, s->n, want);
        }
        if (s->n == want) {
            return;
        }
        if (rt_wall_ms() >= deadline) {
            fail_msg("stream of %s: %zu records after %d ms, want %zu", table, s->n, timeout_ms,
                     want);
        }
        rt_sleep_ms(200);
    }
}

void rt_stream_check_gapless(const rt_stream *s, int from_one)
{
    char why[256];
    if (streamread_gap(s, from_one, why, sizeof(why)) != 0) {
        fail_msg("%s", why);
    }
}

/* ------------------------------------------------------------------------ */
/* The model                                                                */
/* ------------------------------------------------------------------------ */

typedef struct rt_expect {
    lapse_stream_event event;
    lapse_item *old_image, *new_image; /* owned; NULL: none */
    int ttl;
    char ttl_attr[64];
    int64_t expires_at_ms;
} rt_expect;

typedef struct rt_entry {
    char pk[64];
    int sk;
    lapse_item *cur; /* owned; NULL: absent */
    rt_expect *ev;   /* owned array */
    size_t nev, cap;
} rt_entry;

struct rt_model {
    char table[64], pk[64], sk[64];
    uint32_t partitions;
    rt_entry *e;
    size_t n, cap;
    size_t records;
    lapse_item **bputs, **bdels; /* a batch being gathered */
    size_t nbputs, nbdels;
};

rt_model *rt_model_new(const char *table, const char *pk, const char *sk, uint32_t partitions)
{
    rt_model *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    snprintf(m->table, sizeof(m->table), "%s", table);
    snprintf(m->pk, sizeof(m->pk), "%s", pk);
    snprintf(m->sk, sizeof(m->sk), "%s", sk);
    m->partitions = partitions;
    return m;
}

void rt_model_free(rt_model *m)
{
    for (size_t i = 0; i < m->n; i++) {
        lapse_item_free(m->e[i].cur);
        for (size_t k = 0; k < m->e[i].nev; k++) {
            lapse_item_free(m->e[i].ev[k].old_image);
            lapse_item_free(m->e[i].ev[k].new_image);
        }
        free(m->e[i].ev);
    }
    free(m->e);
    free(m->bputs);
    free(m->bdels);
    free(m);
}

static rt_entry *entry(rt_model *m, const char *pk, int sk, int add)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->e[i].sk == sk && strcmp(m->e[i].pk, pk) == 0) {
            return &m->e[i];
        }
    }
    if (!add) {
        return NULL;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->e = realloc(m->e, m->cap * sizeof(*m->e));
        assert_non_null(m->e);
    }
    rt_entry *x = &m->e[m->n++];
    memset(x, 0, sizeof(*x));
    snprintf(x->pk, sizeof(x->pk), "%s", pk);
    x->sk = sk;
    return x;
}

static rt_entry *entry_of(rt_model *m, const lapse_item *it)
{
    const char *pk = lapse_item_get_s(it, m->pk), *sk = lapse_item_get_n(it, m->sk);
    assert_non_null(pk);
    assert_non_null(sk);
    return entry(m, pk, atoi(sk), 1);
}

/* The item of x becomes now (taken; NULL: deleted), with its record. */
static void change(rt_model *m, rt_entry *x, lapse_item *now, int ttl, const char *attr,
                   int64_t expires_at_ms)
{
    if (x->cur == NULL && now == NULL) {
        return; /* a delete of nothing: no record */
    }
    if (x->cur != NULL && now != NULL && lapse_item_equal(x->cur, now)) {
        lapse_item_free(now); /* a write that changes nothing: no record (as DynamoDB) */
        return;
    }
    if (x->nev == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 4;
        x->ev = realloc(x->ev, x->cap * sizeof(*x->ev));
        assert_non_null(x->ev);
    }
    rt_expect *ev = &x->ev[x->nev++];
    memset(ev, 0, sizeof(*ev));
    ev->event = x->cur == NULL ? LAPSE_STREAM_INSERT
                : now == NULL  ? LAPSE_STREAM_REMOVE
                               : LAPSE_STREAM_MODIFY;
    ev->old_image = x->cur;
    ev->new_image = now != NULL ? lapse_item_dup(now) : NULL;
    ev->ttl = ttl;
    snprintf(ev->ttl_attr, sizeof(ev->ttl_attr), "%s", attr != NULL ? attr : "");
    ev->expires_at_ms = expires_at_ms;
    x->cur = now;
    m->records++;
}

static lapse_item *key_item(const rt_model *m, const char *pk, int sk)
{
    return item_json("{\"%s\":{\"S\":\"%s\"},\"%s\":{\"N\":\"%d\"}}", m->pk, pk, m->sk, sk);
}

void rt_put(rt_model *m, const char *item_json_text)
{
    lapse_item *it = item_json("%s", item_json_text);
    lapse_error e = {0};
    assert_lapse_ok(lapse_put(g_cl, m->table, it, NULL, &e), &e);
    change(m, entry_of(m, it), it, 0, NULL, 0);
}

void rt_delete(rt_model *m, const char *pk, int sk)
{
    lapse_item *key = key_item(m, pk, sk);
    lapse_error e = {0};
    assert_lapse_ok(lapse_delete(g_cl, m->table, key, NULL, &e), &e);
    lapse_item_free(key);
    change(m, entry(m, pk, sk, 1), NULL, 0, NULL, 0);
}

void rt_update(rt_model *m, const char *pk, int sk, const char *name1, const char *v1,
               const char *name2, const char *v2)
{
    lapse_item *key = key_item(m, pk, sk), *now = NULL;
    lapse_update *u = lapse_update_new();
    lapse_error e = {0};
    assert_lapse_ok(lapse_update_set(u, name1, v1, &e), &e);
    if (name2 != NULL) {
        assert_lapse_ok(lapse_update_set(u, name2, v2, &e), &e);
    }
    assert_lapse_ok(lapse_update_item(g_cl, m->table, key, u, NULL, &now, &e), &e);
    assert_non_null(now);
    lapse_update_free(u);
    lapse_item_free(key);
    change(m, entry(m, pk, sk, 1), now, 0, NULL, 0);
}

void rt_batch_put(rt_model *m, const char *item_json_text)
{
    m->bputs = realloc(m->bputs, (m->nbputs + 1) * sizeof(*m->bputs));
    assert_non_null(m->bputs);
    m->bputs[m->nbputs++] = item_json("%s", item_json_text);
}

void rt_batch_delete(rt_model *m, const char *pk, int sk)
{
    m->bdels = realloc(m->bdels, (m->nbdels + 1) * sizeof(*m->bdels));
    assert_non_null(m->bdels);
    m->bdels[m->nbdels++] = key_item(m, pk, sk);
}

void rt_batch_commit(rt_model *m)
{
    lapse_error e = {0};
    assert_lapse_ok(lapse_batch_write(g_cl, m->table, m->bputs, m->nbputs, m->bdels, m->nbdels, &e),
                    &e);
    /* Distinct keys only (the callers' batches are), so order does not
     * matter: one record per key. */
    for (size_t i = 0; i < m->nbputs; i++) {
        change(m, entry_of(m, m->bputs[i]), m->bputs[i], 0, NULL, 0);
    }
    for (size_t i = 0; i < m->nbdels; i++) {
        change(m, entry_of(m, m->bdels[i]), NULL, 0, NULL, 0);
        lapse_item_free(m->bdels[i]);
    }
    m->nbputs = m->nbdels = 0;
}

void rt_model_ttl_removed(rt_model *m, const char *pk, int sk, const char *attr,
                          int64_t expires_at_ms)
{
    rt_entry *x = entry(m, pk, sk, 0);
    assert_non_null(x);
    assert_non_null(x->cur);
    change(m, x, NULL, 1, attr, expires_at_ms);
}

const lapse_item *rt_model_get(const rt_model *m, const char *pk, int sk)
{
    const rt_entry *x = entry((rt_model *)m, pk, sk, 0);
    return x != NULL ? x->cur : NULL;
}

void rt_model_select(const rt_model *m, const char *attr, const char *value, rt_items *out)
{
    for (size_t i = 0; i < m->n; i++) {
        const lapse_item *it = m->e[i].cur;
        const char *v = it != NULL && attr != NULL ? lapse_item_get_s(it, attr) : NULL;
        if (it != NULL && (attr == NULL || (v != NULL && strcmp(v, value) == 0))) {
            rt_items_push(out, lapse_item_dup(it));
        }
    }
}

size_t rt_model_records(const rt_model *m)
{
    return m->records;
}

static int same_image(const lapse_item *got, const lapse_item *want)
{
    return (got == NULL && want == NULL) ||
           (got != NULL && want != NULL && lapse_item_equal(got, want));
}

void rt_model_check_stream(const rt_model *m, const rt_stream *s)
{
    static const char *const names[] = {"INSERT", "MODIFY", "REMOVE"};
    size_t *seen = calloc(m->n ? m->n : 1, sizeof(*seen));
    assert_non_null(seen);
    for (size_t i = 0; i < s->n; i++) {
        const lapse_stream_record *r = s->r[i];
        const char *pk = lapse_item_get_s(r->keys, m->pk), *sk = lapse_item_get_n(r->keys, m->sk);
        char *keys = lapse_item_to_json(r->keys);
        assert_non_null(pk);
        assert_non_null(sk);
        assert_int_equal(lapse_item_count(r->keys), 2);
        rt_entry *x = entry((rt_model *)m, pk, atoi(sk), 0);
        if (x == NULL || seen[x - m->e] >= x->nev) {
            fail_msg("%s: unexpected record %u-%" PRIu64 " (%s) for %s", m->table, r->shard,
                     r->sequence_number, names[r->event], keys);
        }
        const rt_expect *ev = &x->ev[seen[x - m->e]++];
        if (r->event != ev->event || !same_image(r->old_image, ev->old_image) ||
            !same_image(r->new_image, ev->new_image) || (r->ttl_delete != 0) != ev->ttl) {
            char *o = r->old_image ? lapse_item_to_json(r->old_image) : NULL;
            char *n = r->new_image ? lapse_item_to_json(r->new_image) : NULL;
            fail_msg("%s: record %u-%" PRIu64 " of %s is %s%s old=%s new=%s; want change %zu: %s%s",
                     m->table, r->shard, r->sequence_number, keys, names[r->event],
                     r->ttl_delete ? " (ttl)" : "", o ? o : "-", n ? n : "-", seen[x - m->e] - 1,
                     names[ev->event], ev->ttl ? " (ttl)" : "");
        }
        if (ev->ttl) {
            assert_string_equal(r->ttl_attribute, ev->ttl_attr);
            assert_int_equal(r->ttl_expires_at_ms, ev->expires_at_ms);
            assert_true(r->ttl_deleted_at_ms >= r->ttl_expires_at_ms);
        } else {
            assert_string_equal(r->ttl_attribute, "");
        }
        attr_value v;
        uint32_t part = 0;
        assert_int_equal(item_value_init_bytes(&v, ATTR_S, pk, strlen(pk)), 0);
        assert_int_equal(hash_partition(&v, m->partitions, &part), 0);
        item_value_fini(&v);
        if (r->shard != part) {
            fail_msg("%s: record of %s in shard %u, not its partition's (%u)", m->table, keys,
                     r->shard, part);
        }
        lapse_free(keys);
    }
    for (size_t i = 0; i < m->n; i++) {
        if (seen[i] != m->e[i].nev) {
            fail_msg("%s: %s/%d has %zu of its %zu records in the stream", m->table, m->e[i].pk,
                     m->e[i].sk, seen[i], m->e[i].nev);
        }
    }
    free(seen);
}

/* ------------------------------------------------------------------------ */
/* The CLI                                                                  */
/* ------------------------------------------------------------------------ */

pid_t rt_cli_spawn(const char *tag, const char *const *args, char *out_path, char *err_path)
{
    snprintf(out_path, 600, "%s/%s.out", cluster_run_dir(g_c), tag);
    snprintf(err_path, 600, "%s/%s.err", cluster_run_dir(g_c), tag);
    pid_t pid = cluster_cli_spawn(g_c, args, out_path, err_path);
    assert_true(pid > 0);
    return pid;
}

int rt_cli(const char *tag, const char *const *args, char *out_path, char *err_path)
{
    pid_t pid = rt_cli_spawn(tag, args, out_path, err_path);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

size_t rt_cli_lines(const char *tag, const char *const *args, int want_exit, char ***lines)
{
    char out[600], err[600];
    int rv = rt_cli(tag, args, out, err);
    size_t n = 0, ne = 0;
    *lines = rt_read_lines(out, &n);
    if (rv != want_exit) {
        char **e = rt_read_lines(err, &ne);
        fail_msg("lapse %s %s: exit %d, want %d: %s", args[0], args[1], rv, want_exit,
                 ne ? e[0] : "");
    }
    return n;
}

size_t rt_check_stream_lines(char **lines, size_t n)
{
    json_int_t last_s = 0;
    long long last_seq[4096] = {0};
    size_t ttl = 0;
    for (size_t i = 0; i < n; i++) {
        json_error_t je;
        json_t *doc = json_loads(lines[i], 0, &je);
        if (doc == NULL) {
            fail_msg("lapse stream printed a line that is not JSON (%s): %s", je.text, lines[i]);
        }
        const char *ev = json_string_value(json_object_get(doc, "eventName"));
        assert_non_null(ev);
        assert_true(strcmp(ev, "INSERT") == 0 || strcmp(ev, "MODIFY") == 0 ||
                    strcmp(ev, "REMOVE") == 0);
        json_t *ddb = json_object_get(doc, "dynamodb");
        assert_non_null(json_object_get(ddb, "Keys"));
        json_int_t s = json_integer_value(json_object_get(ddb, "ApproximateCreationDateTime"));
        assert_true(s >= last_s);
        last_s = s;
        int shard = atoi(json_string_value(json_object_get(doc, "shard")));
        long long seq = atoll(json_string_value(json_object_get(ddb, "SequenceNumber")));
        assert_true(shard >= 0 && shard < 4096 && seq > last_seq[shard]);
        last_seq[shard] = seq;
        char id[64];
        snprintf(id, sizeof(id), "%d-%lld", shard, seq);
        assert_string_equal(json_string_value(json_object_get(doc, "eventID")), id);
        json_t *who = json_object_get(doc, "userIdentity");
        if (who != NULL) {
            assert_string_equal(json_string_value(json_object_get(who, "principalId")),
                                "lapse.ttl");
            assert_string_equal(ev, "REMOVE");
            assert_non_null(json_object_get(doc, "ttl"));
            ttl++;
        }
        json_decref(doc);
    }
    return ttl;
}

int rt_file_has_lines(void *arg, int last)
{
    rt_file_wait *w = arg;
    size_t n = 0;
    char **lines = rt_read_lines(w->path, &n);
    rt_free_lines(lines, n);
    if (last) {
        fprintf(stderr, "%s: %zu lines, want %zu\n", w->path, n, w->want);
    }
    return n >= w->want;
}

char **rt_read_lines(const char *path, size_t *n)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char **v = NULL, *line = NULL;
    size_t cap = 0, lcap = 0;
    ssize_t len;
    *n = 0;
    while ((len = getline(&line, &lcap, f)) != -1) {
        if (len > 0 && line[len - 1] == '\n') {
            line[len - 1] = '\0';
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            v = realloc(v, cap * sizeof(*v));
            assert_non_null(v);
        }
        v[(*n)++] = strdup(line);
    }
    free(line);
    fclose(f);
    return v;
}

void rt_free_lines(char **lines, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(lines[i]);
    }
    free(lines);
}
