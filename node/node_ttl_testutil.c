/*
 * node_ttl_testutil.c: the helpers of node_ttl_test.c (node_ttl_testutil.h).
 */
#include <arpa/inet.h>
#include <sys/time.h>

#include "node_ttl_testutil.h"

int metrics_port[NODES];
int skewed[NODES]; /* node i runs with --debug-clock-offset-ms */

void need_cluster(void)
{
    if (!nt.started) {
        skip();
    }
}

/* ------------------------------------------------------------------------ */
/* Processes and coordinator calls                                           */
/* ------------------------------------------------------------------------ */

void start_ttl_node(int i)
{
    proc *p = &nt.node[i];
    char id[16], mlisten[64];
    snprintf(id, sizeof(id), "%u", p->id);
    snprintf(mlisten, sizeof(mlisten), "127.0.0.1:%d", metrics_port[i]);
    char *argv[24] = {"lapse-node", "--id",          id,           "--listen",
                      p->url,       "--coordinator", nt.coord.url, "--data",
                      p->dir,       "--workers",     "2",          "--metrics-listen",
                      mlisten,      "--ttl-workers", "2"};
    int n = 15;
    if (i == 0) {
        argv[n++] = "--ttl-backfill-rate";
        argv[n++] = BF_RATE;
    }
    if (skewed[i]) {
        argv[n++] = "--debug-clock-offset-ms";
        argv[n++] = SKEW_MS;
    }
    argv[n] = NULL;
    p->pid = spawn(argv, p->log);
}

int64_t now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* UpdateTimeToLive; *status gets the description's status ("" if none). */
int update_ttl(const char *table, Lapse__UpdateTimeToLiveRequest__Action action, char *status,
               size_t len, char *err)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__UpdateTimeToLiveRequest body = LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    body.table = (char *)table;
    body.action = action;
    body.attribute = action == LAPSE__UPDATE_TIME_TO_LIVE_REQUEST__ACTION__ENABLE ? ATTR : "";
    req.body_case = LAPSE__REQUEST__BODY_UPDATE_TTL;
    req.update_ttl = &body;
    int rv = coord_call(&req, &resp, err);
    if (status != NULL) {
        status[0] = 0;
        if (rv == 0 && resp->update_ttl != NULL && resp->update_ttl->description != NULL) {
            snprintf(status, len, "%s", resp->update_ttl->description->status);
        }
    }
    rpc_response_free(resp);
    return rv;
}

/* DescribeTimeToLive; caller frees *resp. */
Lapse__TtlDescription *describe_ttl(const char *table, Lapse__Response **resp)
{
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__DescribeTimeToLiveRequest body = LAPSE__DESCRIBE_TIME_TO_LIVE_REQUEST__INIT;
    char err[256];
    body.table = (char *)table;
    req.body_case = LAPSE__REQUEST__BODY_DESCRIBE_TTL;
    req.describe_ttl = &body;
    *resp = NULL;
    int rv = coord_call(&req, resp, err);
    if (rv != 0) {
        fail_msg("DescribeTimeToLive %s: %s: %s", table, lapse_strerror(rv), err);
    }
    return (*resp)->describe_ttl->description;
}

void wait_status(const char *table, const char *want, int timeout_ms)
{
    clock_mono deadline = clock_mono_after_ms(timeout_ms);
    char last[32] = "";
    for (;;) {
        Lapse__Response *resp = NULL;
        Lapse__TtlDescription *d = describe_ttl(table, &resp);
        snprintf(last, sizeof(last), "%s", d != NULL ? d->status : "");
        rpc_response_free(resp);
        if (strcmp(last, want) == 0) {
            return;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("table %s: TTL status %s, expected %s within %d ms", table, last, want,
                     timeout_ms);
        }
        clock_sleep_ms(20);
    }
}

void create_table(const char *name, uint32_t parts)
{
    arena a;
    arena_init(&a);
    table_schema s = {0};
    snprintf(s.name, sizeof(s.name), "%s", name);
    snprintf(s.pk.name, sizeof(s.pk.name), "pk");
    s.pk.type = ATTR_S;
    s.partitions = parts;
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__CreateTableRequest body = LAPSE__CREATE_TABLE_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    char err[256];
    body.schema = wire_schema_to_pb(&a, &s);
    req.body_case = LAPSE__REQUEST__BODY_CREATE_TABLE;
    req.create_table = &body;
    int rv = coord_call(&req, &resp, err);
    if (rv != 0) {
        fail_msg("CreateTable %s: %s: %s", name, lapse_strerror(rv), err);
    }
    rpc_response_free(resp);
    arena_fini(&a);
    fetch_map();
}

/* ------------------------------------------------------------------------ */
/* Item calls on any table                                                   */
/* ------------------------------------------------------------------------ */

const pmap_table *table_of(const char *name)
{
    const pmap_table *t = pmap_table_find(nt.map, name);
    if (t == NULL) {
        fail_msg("table %s is not in the map", name);
    }
    return t;
}

int owner_in(const char *table, const char *pk)
{
    const pmap_table *t = table_of(table);
    attr_value v;
    uint32_t part = 0;
    assert_int_equal(item_value_init_bytes(&v, ATTR_S, pk, strlen(pk)), 0);
    assert_int_equal(hash_partition(&v, t->schema.partitions, &part), 0);
    item_value_fini(&v);
    for (int n = 0; n < NODES; n++) {
        if (nt.node[n].id == pmap_owner(t, part)) {
            return n;
        }
    }
    fail_msg("partition %u of %s has an unknown owner", part, table);
    return -1;
}

/* An item of TABLE (pk, sk 0) with "exp" = N text exp (NULL: none), or an
 * S "exp" when exp_s is set. */
Lapse__Item *ttl_item(arena *a, const char *pk, const char *exp, const char *exp_s)
{
    if (exp_s != NULL) {
        return pb_item(a, "pk", pb_s(a, pk), "sk", pb_n(a, "0"), ATTR, pb_s(a, exp_s), NULL);
    }
    if (exp == NULL) {
        return pb_item(a, "pk", pb_s(a, pk), "sk", pb_n(a, "0"), NULL);
    }
    return pb_item(a, "pk", pb_s(a, pk), "sk", pb_n(a, "0"), ATTR, pb_n(a, exp), NULL);
}

void put_exp(const char *pk, int64_t exp_s)
{
    arena a;
    arena_init(&a);
    char err[256], exp[32];
    snprintf(exp, sizeof(exp), "%lld", (long long)exp_s);
    int rv = put(owner_in(TABLE, pk), &a, ttl_item(&a, pk, exp, NULL), NULL, err);
    if (rv != 0) {
        fail_msg("put %s: %s: %s", pk, lapse_strerror(rv), err);
    }
    arena_fini(&a);
}

/* GetItem on TABLE; returns 1 when the item is there. */
int present(const char *pk, int hide)
{
    arena a;
    arena_init(&a);
    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__GetItemRequest body = LAPSE__GET_ITEM_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    char err[256];
    body.table = TABLE;
    body.key = pb_item(&a, "pk", pb_s(&a, pk), "sk", pb_n(&a, "0"), NULL);
    body.hide_expired = hide;
    req.body_case = LAPSE__REQUEST__BODY_GET_ITEM;
    req.get_item = &body;
    int rv = call(nt.nc[owner_in(TABLE, pk)], &req, &resp, err);
    if (rv != 0) {
        fail_msg("get %s: %s: %s", pk, lapse_strerror(rv), err);
    }
    int there = resp->get_item != NULL && resp->get_item->item != NULL;
    rpc_response_free(resp);
    arena_fini(&a);
    return there;
}

/* Items returned by Query (pk) and Scan (its partition) and BatchGet with
 * hide_expired, each 0 or 1. */
void hidden_reads(const char *pk, int *q, int *s, int *b)
{
    arena a;
    arena_init(&a);
    char err[256];
    int node = owner_in(TABLE, pk);
    uint32_t part = 0;
    attr_value v;
    assert_int_equal(item_value_init_bytes(&v, ATTR_S, pk, strlen(pk)), 0);
    assert_int_equal(hash_partition(&v, nt.t->schema.partitions, &part), 0);
    item_value_fini(&v);

    Lapse__Request req = LAPSE__REQUEST__INIT;
    Lapse__QueryRequest qb = LAPSE__QUERY_REQUEST__INIT;
    Lapse__Response *resp = NULL;
    qb.table = TABLE;
    qb.partition_key = pb_s(&a, pk);
    qb.hide_expired = 1;
    req.body_case = LAPSE__REQUEST__BODY_QUERY;
    req.query = &qb;
    assert_int_equal(call(nt.nc[node], &req, &resp, err), 0);
    *q = (int)resp->page->n_items;
    rpc_response_free(resp);

    Lapse__Request sreq = LAPSE__REQUEST__INIT;
    Lapse__ScanRequest sb = LAPSE__SCAN_REQUEST__INIT;
    sb.table = TABLE;
    sb.partition = part;
    sb.hide_expired = 1;
    sreq.body_case = LAPSE__REQUEST__BODY_SCAN;
    sreq.scan = &sb;
    *s = 0;
    assert_int_equal(call(nt.nc[node], &sreq, &resp, err), 0);
    for (size_t i = 0; i < resp->page->n_items; i++) {
        for (size_t k = 0; k < resp->page->items[i]->n_attrs; k++) {
            Lapse__Attribute *at = resp->page->items[i]->attrs[k];
            if (strcmp(at->name, "pk") == 0 && at->value->s.len == strlen(pk) &&
                memcmp(at->value->s.data, pk, strlen(pk)) == 0) {
                (*s)++;
            }
        }
    }
    rpc_response_free(resp);

    Lapse__Request breq = LAPSE__REQUEST__INIT;
    Lapse__BatchGetRequest bb = LAPSE__BATCH_GET_REQUEST__INIT;
    Lapse__Item *keys[1] = {pb_item(&a, "pk", pb_s(&a, pk), "sk", pb_n(&a, "0"), NULL)};
    bb.table = TABLE;
    bb.keys = keys;
    bb.n_keys = 1;
    bb.hide_expired = 1;
    breq.body_case = LAPSE__REQUEST__BODY_BATCH_GET;
    breq.batch_get = &bb;
    assert_int_equal(call(nt.nc[node], &breq, &resp, err), 0);
    *b = resp->batch_get->n_items == 1 && resp->batch_get->items[0]->n_attrs > 0;
    rpc_response_free(resp);
    arena_fini(&a);
}

/* GET /metrics of node i into out (NUL-terminated). Returns 0 on a 200. */
int scrape(int i, char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)metrics_port[i])};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    const char *rq = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, rq, strlen(rq)) != (ssize_t)strlen(rq)) {
        close(fd);
        return -1;
    }
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, out + n, cap - 1 - n)) > 0) {
        n += (size_t)r;
    }
    out[n] = 0;
    close(fd);
    return strncmp(out, "HTTP/1.1 200", 12) == 0 || strncmp(out, "HTTP/1.0 200", 12) == 0 ? 0 : -1;
}

/* The value of the first sample line starting with series in node i's
 * metrics, or -1 when absent. */
double metric(int i, const char *series)
{
    static char body[1 << 20];
    if (scrape(i, body, sizeof(body)) != 0) {
        return -1;
    }
    size_t len = strlen(series);
    for (char *line = body; line != NULL && *line; line = strchr(line, '\n')) {
        if (*line == '\n') {
            line++;
        }
        if (strncmp(line, series, len) == 0 && (line[len] == ' ' || line[len] == '{')) {
            char *sp = strchr(line, ' ');
            return sp != NULL ? strtod(sp + 1, NULL) : -1;
        }
    }
    return -1;
}
