/*
 * node_repl_testutil.c: the helpers of node_repl_test.c (node_repl_testutil.h).
 */
#include "node_repl_testutil.h"

const pmap_table *rt;
int repl_started;

void need_repl(void)
{
    if (!repl_started) {
        skip();
    }
}

/* ------------------------------------------------------------------------ */
/* Cluster and table                                                         */
/* ------------------------------------------------------------------------ */

void start_repl_node(int i, char *const extra[])
{
    proc *p = &nt.node[i];
    char id[16], mlisten[64], token[PATH_MAX];
    snprintf(id, sizeof(id), "%u", p->id);
    snprintf(mlisten, sizeof(mlisten), "127.0.0.1:%d", metrics_port[i]);
    PATHF(token, "%s/cluster-token", nt.root);
    FILE *f = fopen(token, "w");
    assert_non_null(f);
    fputs(REPL_TOKEN "\n", f);
    fclose(f);
    char *argv[32] = {"lapse-node", "--id",           id,           "--listen",
                      p->url,       "--coordinator",  nt.coord.url, "--data",
                      p->dir,       "--workers",      "2",          "--metrics-listen",
                      mlisten,      "--repl-workers", "2",          "--cluster-token-file",
                      token};
    int n = 17;
    for (int k = 0; extra != NULL && extra[k] != NULL && n < 31; k++) {
        argv[n++] = extra[k];
    }
    argv[n] = NULL;
    p->pid = spawn(argv, p->log);
}

int repl_call(int node, uint32_t table_id, uint32_t part, uint64_t from, uint64_t to,
              ProtobufCBinaryData *recs, size_t n, const char *token, uint64_t *applied, char *err)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__ReplicateRequest body = LAPSE__REPLICATE_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.table_id = table_id;
    body.source_partition = part;
    body.from_seq = from;
    body.to_seq = to;
    body.records = recs;
    body.n_records = n;
    req.body_case = LAPSE__REQUEST__BODY_REPLICATE;
    req.replicate = &body;
    req.admin_token = (char *)token;
    int rv = call(nt.nc[node], &req, &resp, err);
    *applied = resp != NULL && resp->replicate != NULL ? resp->replicate->applied_seq : 0;
    rpc_response_free(resp);
    return rv;
}

int node_index(uint32_t id)
{
    for (int n = 0; n < NODES; n++) {
        if (nt.node[n].id == id) {
            return n;
        }
    }
    fail_msg("node id %u is not one of the test's", id);
    return -1;
}

void refresh_rt(void)
{
    fetch_map();
    rt = table_of(RT);
}

static void key_def_set(key_def *k, const char *name, attr_type type)
{
    snprintf(k->name, sizeof(k->name), "%s", name);
    k->type = type;
}

void create_repl_table(void)
{
    arena a;
    arena_init(&a);
    table_schema s = {0};
    snprintf(s.name, sizeof(s.name), "%s", RT);
    key_def_set(&s.pk, "pk", ATTR_S);
    key_def_set(&s.sk, "sk", ATTR_N);
    s.partitions = RT_PARTS;
    s.nlsi = 1;
    snprintf(s.lsi[0].name, sizeof(s.lsi[0].name), "%s", RT_LSI);
    key_def_set(&s.lsi[0].sk, "lv", ATTR_N);
    s.ngsi = 1;
    snprintf(s.gsi[0].name, sizeof(s.gsi[0].name), "%s", RT_GSI);
    key_def_set(&s.gsi[0].pk, "g", ATTR_S);
    key_def_set(&s.gsi[0].sk, "gs", ATTR_N);
    s.gsi[0].projection = INDEX_PROJECT_KEYS;
    s.gsi[0].partitions = RT_GSI_PARTS;
    s.stream.enabled = 1;
    s.stream.ttl_deletes = 1;
    s.stream.retention_hours = 1;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__CreateTableRequest body = LAPSE__CREATE_TABLE_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    char err[256], status[32];
    body.schema = wire_schema_to_pb(&a, &s);
    req.body_case = LAPSE__REQUEST__BODY_CREATE_TABLE;
    req.create_table = &body;
    int rv = coord_call(&req, &resp, err);
    if (rv != 0) {
        fail_msg("CreateTable %s: %s: %s", RT, lapse_strerror(rv), err);
    }
    rpc_response_free(resp);
    arena_fini(&a);
    rv = update_ttl(RT, LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__ENABLE, status, sizeof(status),
                    err);
    if (rv != 0) {
        fail_msg("UpdateTimeToLive %s: %s: %s", RT, lapse_strerror(rv), err);
    }
    if (strcmp(status, "ENABLED") != 0) {
        wait_status(RT, "ENABLED", 10000);
    }
    refresh_rt();
}

uint32_t part_of(const char *s, uint32_t parts)
{
    attr_value v;
    uint32_t part = 0;
    assert_int_equal(item_value_init_bytes(&v, ATTR_S, s, strlen(s)), 0);
    assert_int_equal(hash_partition(&v, parts, &part), 0);
    item_value_fini(&v);
    return part;
}

static int owner_node(const char *pk)
{
    return node_index(pmap_owner(rt, part_of(pk, RT_PARTS)));
}

/* ------------------------------------------------------------------------ */
/* Item calls                                                                */
/* ------------------------------------------------------------------------ */

static void add_attr(arena *a, Lapse__Item *it, const char *name, Lapse__AttributeValue *v)
{
    Lapse__Attribute *at = arena_alloc(a, sizeof(*at));
    lapse__attribute__init(at);
    at->name = arena_strdup(a, name);
    at->value = v;
    it->attrs[it->n_attrs++] = at;
}

static Lapse__AttributeValue *pb_int(arena *a, int64_t v)
{
    char text[32];
    snprintf(text, sizeof(text), "%lld", (long long)v);
    return pb_n(a, text);
}

static Lapse__Item *ritem_pb(arena *a, const ritem *r, int key_only)
{
    Lapse__Item *it = arena_alloc(a, sizeof(*it));
    lapse__item__init(it);
    it->attrs = arena_alloc(a, 8 * sizeof(*it->attrs));
    add_attr(a, it, "pk", pb_s(a, r->pk));
    add_attr(a, it, "sk", pb_int(a, r->sk));
    if (key_only) {
        return it;
    }
    if (r->lv >= 0) {
        add_attr(a, it, "lv", pb_int(a, r->lv));
    }
    if (r->g >= 0) {
        char g[16];
        snprintf(g, sizeof(g), "g%d", r->g);
        add_attr(a, it, "g", pb_s(a, g));
        add_attr(a, it, "gs", pb_int(a, r->gs));
    }
    if (r->exp != 0) {
        add_attr(a, it, "exp", pb_int(a, r->exp));
    }
    add_attr(a, it, "v", pb_s(a, r->v));
    return it;
}

int rput(const ritem *r, char *err)
{
    arena a;
    arena_init(&a);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__PutItemRequest body = LAPSE__PUT_ITEM_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.table = RT;
    body.item = ritem_pb(&a, r, 0);
    req.body_case = LAPSE__REQUEST__BODY_PUT_ITEM;
    req.put_item = &body;
    int rv = call(nt.nc[owner_node(r->pk)], &req, &resp, err);
    rpc_response_free(resp);
    arena_fini(&a);
    return rv;
}

int rdelete(const char *pk, int sk, char *err)
{
    arena a;
    arena_init(&a);
    ritem k = {.sk = sk};
    snprintf(k.pk, sizeof(k.pk), "%s", pk);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__DeleteItemRequest body = LAPSE__DELETE_ITEM_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.table = RT;
    body.key = ritem_pb(&a, &k, 1);
    req.body_case = LAPSE__REQUEST__BODY_DELETE_ITEM;
    req.delete_item = &body;
    int rv = call(nt.nc[owner_node(pk)], &req, &resp, err);
    rpc_response_free(resp);
    arena_fini(&a);
    return rv;
}

int rupdate_v(const char *pk, int sk, const char *v, char *err)
{
    arena a;
    arena_init(&a);
    ritem k = {.sk = sk};
    snprintf(k.pk, sizeof(k.pk), "%s", pk);
    Lapse__UpdateAction act = LAPSE__UPDATE_ACTION__INIT;
    Lapse__UpdateAction *acts[1] = {&act};
    act.name = "v";
    act.value = pb_s(&a, v);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__UpdateItemRequest body = LAPSE__UPDATE_ITEM_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.table = RT;
    body.key = ritem_pb(&a, &k, 1);
    body.actions = acts;
    body.n_actions = 1;
    req.body_case = LAPSE__REQUEST__BODY_UPDATE_ITEM;
    req.update_item = &body;
    int rv = call(nt.nc[owner_node(pk)], &req, &resp, err);
    rpc_response_free(resp);
    arena_fini(&a);
    return rv;
}

void rbatch_put(const ritem *items, size_t n, int last_node)
{
    enum { CHUNK = 500 };
    for (int k0 = 1; k0 <= NODES; k0++) {
        int node = (last_node + k0) % NODES;
        size_t i = 0;
        while (i < n) {
            arena a;
            arena_init(&a);
            Lapse__WriteRequest *w[CHUNK];
            size_t k = 0;
            for (; i < n && k < CHUNK; i++) {
                if (owner_node(items[i].pk) != node) {
                    continue;
                }
                w[k] = arena_alloc(&a, sizeof(*w[k]));
                lapse__write_request__init(w[k]);
                w[k]->put = ritem_pb(&a, &items[i], 0);
                k++;
            }
            Lapse__Request req = LAPSE__REQUEST__INIT;
            Lapse__BatchWriteRequest body = LAPSE__BATCH_WRITE_REQUEST__INIT;
            Lapse__Response *resp = NULL;
            char err[256];
            body.table = RT;
            body.writes = w;
            body.n_writes = k;
            req.body_case = LAPSE__REQUEST__BODY_BATCH_WRITE;
            req.batch_write = &body;
            int rv = k > 0 ? call(nt.nc[node], &req, &resp, err) : 0;
            if (rv != 0) {
                fail_msg("BatchWrite of %zu items on node %d: %s: %s", k, node, lapse_strerror(rv),
                         err);
            }
            assert_true(k == 0 || resp->batch_write->n_unprocessed == 0);
            rpc_response_free(resp);
            arena_fini(&a);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Views                                                                     */
/* ------------------------------------------------------------------------ */

/* The text of attribute name of it (S or N), "" when absent. */
static const char *text_of(const Lapse__Item *it, const char *name, char *out, size_t len)
{
    out[0] = 0;
    for (size_t i = 0; it != NULL && i < it->n_attrs; i++) {
        const Lapse__Attribute *at = it->attrs[i];
        if (strcmp(at->name, name) != 0) {
            continue;
        }
        if (at->value->value_case == LAPSE__ATTRIBUTE_VALUE__VALUE_S) {
            snprintf(out, len, "%.*s", (int)at->value->s.len, (const char *)at->value->s.data);
        } else if (at->value->value_case == LAPSE__ATTRIBUTE_VALUE__VALUE_N) {
            snprintf(out, len, "%s", at->value->n);
        }
    }
    return out;
}

static int has_prefix(const Lapse__Item *it, const char *prefix)
{
    char pk[64];
    text_of(it, "pk", pk, sizeof(pk));
    return strncmp(pk, prefix, strlen(prefix)) == 0;
}

/* Appends it's row (when it is in the GSI) to *rows. */
static void add_row(char ***rows, size_t *n, size_t *cap, const Lapse__Item *it)
{
    char pk[64], sk[32], g[32], gs[32], exp[32], row[256];
    if (text_of(it, "g", g, sizeof(g))[0] == 0) {
        return;
    }
    snprintf(row, sizeof(row), "%s|%s|%s|%s|%s", text_of(it, "pk", pk, sizeof(pk)),
             text_of(it, "sk", sk, sizeof(sk)), g, text_of(it, "gs", gs, sizeof(gs)),
             text_of(it, "exp", exp, sizeof(exp)));
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        *rows = realloc(*rows, *cap * sizeof(**rows));
        assert_non_null(*rows);
    }
    (*rows)[(*n)++] = strdup(row);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs req (a Scan or Query with paging) on node until the range is done,
 * passing every item to fn. */
static void pages(int node, Lapse__Request *req, Lapse__Item **start,
                  void (*fn)(void *arg, const Lapse__Item *it), void *arg)
{
    arena a;
    arena_init(&a);
    *start = NULL;
    for (int page = 0; page < 100000; page++) {
        Lapse__Response *resp = NULL;
        char err[256];
        int rv = call(nt.nc[node], req, &resp, err);
        if (rv != 0) {
            fail_msg("page %d on node %d: %s: %s", page, node, lapse_strerror(rv), err);
        }
        for (size_t i = 0; i < resp->page->n_items; i++) {
            fn(arg, resp->page->items[i]);
        }
        *start = NULL;
        if (resp->page->last_evaluated_key != NULL) {
            item *k = NULL;
            assert_int_equal(wire_item_from_pb(resp->page->last_evaluated_key, &k, err, 256), 0);
            *start = wire_item_to_pb(&a, k);
            item_free(k);
        }
        rpc_response_free(resp);
        if (*start == NULL) {
            break;
        }
    }
    arena_fini(&a);
}

typedef struct collect {
    const char *prefix;
    char **rows;
    size_t n, cap, items;
} collect;

static void on_item(void *arg, const Lapse__Item *it)
{
    collect *c = arg;
    if (has_prefix(it, c->prefix)) {
        c->items++;
        add_row(&c->rows, &c->n, &c->cap, it);
    }
}

static void scan_base(collect *c)
{
    for (uint32_t p = 0; p < RT_PARTS; p++) {
        Lapse__Request req = LAPSE__REQUEST__INIT;
        Lapse__ScanRequest body = LAPSE__SCAN_REQUEST__INIT;
        body.table = RT;
        body.partition = p;
        req.body_case = LAPSE__REQUEST__BODY_SCAN;
        req.scan = &body;
        pages(node_index(pmap_owner(rt, p)), &req, &body.exclusive_start_key, on_item, c);
    }
}

size_t base_gsi_rows(const char *prefix, char ***rows)
{
    collect c = {.prefix = prefix};
    scan_base(&c);
    if (c.n > 0) {
        qsort(c.rows, c.n, sizeof(*c.rows), cmp_str);
    }
    *rows = c.rows;
    return c.n;
}

size_t base_count(const char *prefix)
{
    collect c = {.prefix = prefix};
    scan_base(&c);
    free_rows(c.rows, c.n);
    return c.items;
}

size_t gsi_rows(const char *prefix, char ***rows)
{
    return gsi_rows_hide(prefix, 0, rows);
}

size_t gsi_rows_hide(const char *prefix, int hide_expired, char ***rows)
{
    collect c = {.prefix = prefix};
    arena a;
    arena_init(&a);
    int gi = pmap_gsi_find(rt, RT_GSI);
    assert_true(gi >= 0);
    for (int g = 0; g < RT_G_VALUES; g++) {
        char gv[16];
        snprintf(gv, sizeof(gv), "g%d", g);
        uint32_t gp = part_of(gv, RT_GSI_PARTS);
        Lapse__Request req = LAPSE__REQUEST__INIT;
        Lapse__QueryRequest body = LAPSE__QUERY_REQUEST__INIT;
        body.table = RT;
        body.index = RT_GSI;
        body.index_partition = gp;
        body.partition_key = pb_s(&a, gv);
        body.hide_expired = hide_expired;
        req.body_case = LAPSE__REQUEST__BODY_QUERY;
        req.query = &body;
        pages(node_index(pmap_gsi_owner(rt, (uint32_t)gi, gp)), &req, &body.exclusive_start_key,
              on_item, &c);
    }
    arena_fini(&a);
    if (c.n > 0) {
        qsort(c.rows, c.n, sizeof(*c.rows), cmp_str);
    }
    *rows = c.rows;
    return c.n;
}

void free_rows(char **rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(rows[i]);
    }
    free(rows);
}

void wait_gsi_equals_base(const char *prefix, int timeout_ms)
{
    clock_mono deadline = clock_mono_after_ms(timeout_ms);
    for (;;) {
        char **b = NULL, **g = NULL;
        size_t nb = base_gsi_rows(prefix, &b);
        size_t ng = gsi_rows(prefix, &g);
        int same = nb == ng;
        for (size_t i = 0; same && i < nb; i++) {
            same = strcmp(b[i], g[i]) == 0;
        }
        free_rows(b, nb);
        free_rows(g, ng);
        if (same) {
            return;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("GSI of \"%s\" items: %zu entries, base projection %zu rows (or they differ)",
                     prefix, ng, nb);
        }
        clock_sleep_ms(50);
    }
}

/* ------------------------------------------------------------------------ */
/* The stream                                                                */
/* ------------------------------------------------------------------------ */

int get_records(int node, uint32_t shard, uint64_t after, uint32_t limit, uint32_t wait_ms,
                Lapse__Response **resp, char *err)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__GetStreamRecordsRequest body = LAPSE__GET_STREAM_RECORDS_REQUEST__INIT;
    body.table = RT;
    body.shard = shard;
    body.after_sequence = after;
    body.limit = limit;
    body.wait_ms = wait_ms;
    req.body_case = LAPSE__REQUEST__BODY_GET_STREAM_RECORDS;
    req.get_stream_records = &body;
    req.pmap_version = nt.map != NULL ? nt.map->version : 0;
    err[0] = 0;
    return rpc_call(nt.nc[node], &req, (int)wait_ms + CALL_MS, resp, err, 256);
}

static void flatten(const Lapse__StreamRecord *r, stream_ev *e)
{
    char pk[64], sk[32];
    memset(e, 0, sizeof(*e));
    e->shard = r->shard;
    e->seq = r->sequence_number;
    e->event = (int)r->event_name;
    snprintf(e->key, sizeof(e->key), "%s|%s", text_of(r->keys, "pk", pk, sizeof(pk)),
             text_of(r->keys, "sk", sk, sizeof(sk)));
    e->ttl = r->ttl_delete;
    e->expires_ms = r->ttl_expires_at_ms;
    e->deleted_ms = r->ttl_deleted_at_ms;
    e->created_ms = r->approximate_creation_ms;
    snprintf(e->ttl_attr, sizeof(e->ttl_attr), "%s", r->ttl_attribute);
    snprintf(e->old_v, sizeof(e->old_v), "-");
    snprintf(e->new_v, sizeof(e->new_v), "-");
    if (r->old_image != NULL) {
        text_of(r->old_image, "v", e->old_v, sizeof(e->old_v));
    }
    if (r->new_image != NULL) {
        text_of(r->new_image, "v", e->new_v, sizeof(e->new_v));
    }
}

size_t stream_all(const char *prefix, stream_ev **evs)
{
    size_t n = 0, cap = 1024;
    *evs = calloc(cap, sizeof(**evs));
    assert_non_null(*evs);
    for (uint32_t shard = 0; shard < RT_PARTS; shard++) {
        int node = node_index(pmap_stream_host(rt, shard));
        uint64_t after = 0, expect = 0, last = 0;
        for (int round = 0; round < 100000; round++) {
            Lapse__Response *resp = NULL;
            char err[256];
            int rv = get_records(node, shard, after, 1000, 0, &resp, err);
            if (rv != 0) {
                fail_msg("GetStreamRecords shard %u on node %d: %s: %s", shard, node,
                         lapse_strerror(rv), err);
            }
            Lapse__GetStreamRecordsResponse *g = resp->get_stream_records;
            last = g->last_sequence;
            if (expect == 0) {
                expect = g->oldest_sequence; /* the first record retained */
            }
            for (size_t i = 0; i < g->n_records; i++) {
                const Lapse__StreamRecord *r = g->records[i];
                if (r->sequence_number != expect) {
                    fail_msg("shard %u: record %llu where %llu was expected (a gap)", shard,
                             (unsigned long long)r->sequence_number, (unsigned long long)expect);
                }
                assert_int_equal(r->shard, shard);
                expect++;
                after = r->sequence_number;
                if (n == cap) {
                    cap *= 2;
                    *evs = realloc(*evs, cap * sizeof(**evs));
                    assert_non_null(*evs);
                }
                flatten(r, &(*evs)[n]);
                if (prefix == NULL || strncmp((*evs)[n].key, prefix, strlen(prefix)) == 0) {
                    n++;
                }
            }
            size_t got = g->n_records;
            rpc_response_free(resp);
            if (got == 0) {
                break;
            }
        }
        if (after != last) {
            fail_msg("shard %u: read up to %llu, last_sequence is %llu", shard,
                     (unsigned long long)after, (unsigned long long)last);
        }
    }
    return n;
}

size_t count_events(const stream_ev *evs, size_t n, const char *key, int event, int ttl)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        c +=
            strcmp(evs[i].key, key) == 0 && evs[i].event == event && (ttl < 0 || evs[i].ttl == ttl);
    }
    return c;
}

/* ------------------------------------------------------------------------ */
/* Waits and checks                                                          */
/* ------------------------------------------------------------------------ */

double metric0(int i, const char *series)
{
    double v = metric(i, series);
    return v < 0 ? 0 : v;
}

void wait_up(int i)
{
    wait_serving(i);
    clock_mono deadline = clock_mono_after_ms(10000);
    while (!log_contains(nt.node[i].log, "TTL scanners start")) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("node %d made no clock check", i);
        }
        clock_sleep_ms(20);
    }
}

int cmp_ev(const void *a, const void *b)
{
    const stream_ev *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c != 0) {
        return c;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Checks the events of the keys pk "<prefix><i>" sk 0, i < n, written[i]
 * (written NULL: all): exactly one INSERT each and exactly one TTL REMOVE
 * for those removed[i] (removed NULL: none), none for the others, nothing
 * else. */
void check_once(const char *prefix, const int *removed, const int *written, int n)
{
    stream_ev *evs = NULL;
    size_t ne = stream_all(prefix, &evs);
    if (ne > 0) {
        qsort(evs, ne, sizeof(*evs), cmp_ev);
    }
    int *ins = calloc((size_t)n, sizeof(int)), *rem = calloc((size_t)n, sizeof(int));
    assert_non_null(ins);
    assert_non_null(rem);
    for (size_t k = 0; k < ne; k++) {
        int i = atoi(evs[k].key + strlen(prefix));
        assert_true(i >= 0 && i < n);
        if (evs[k].event == LAPSE__STREAM_RECORD__EVENT_NAME__INSERT) {
            ins[i]++;
        } else if (evs[k].event == LAPSE__STREAM_RECORD__EVENT_NAME__REMOVE && evs[k].ttl) {
            rem[i]++;
        } else {
            fail_msg("unexpected event %d for %s", evs[k].event, evs[k].key);
        }
    }
    for (int i = 0; i < n; i++) {
        int w = written == NULL || written[i];
        int r = removed != NULL && removed[i];
        if (ins[i] != w || rem[i] != r) {
            fail_msg("%s%d: %d INSERT and %d REMOVE in the stream, expected %d and %d", prefix, i,
                     ins[i], rem[i], w, r);
        }
    }
    free(ins);
    free(rem);
    free(evs);
}

/* Waits until the stream holds want events of prefix. */
void wait_stream_events(const char *prefix, size_t want, int timeout_ms)
{
    clock_mono deadline = clock_mono_after_ms(timeout_ms);
    for (;;) {
        stream_ev *evs = NULL;
        size_t n = stream_all(prefix, &evs);
        free(evs);
        if (n >= want) {
            return;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("stream of \"%s\": %zu events, expected %zu", prefix, n, want);
        }
        clock_sleep_ms(50);
    }
}

void wait_pending_zero(int timeout_ms)
{
    clock_mono deadline = clock_mono_after_ms(timeout_ms);
    for (;;) {
        double sum = 0;
        for (int n = 0; n < NODES; n++) {
            for (int d = 0; d < NODES; d++) {
                char series[96];
                snprintf(series, sizeof(series), "lapse_outbox_pending_records{dest=\"%u\"}",
                         nt.node[d].id);
                sum += metric0(n, series);
            }
        }
        if (sum == 0) {
            return;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("%.0f outbox records still pending", sum);
        }
        clock_sleep_ms(50);
    }
}
