/*
 * client_stream_test.c: the pure parts of index queries and the change stream in
 * liblapse, without a cluster: a query's route (the GSI partition the client
 * computes is the one partition/itemkey.c stores the entry under; an LSI
 * query goes to the base partition), and stream records from hand-built
 * GetStreamRecords replies, checked in order and rendered as DynamoDB
 * Streams JSON (INSERT, MODIFY, REMOVE, TTL delete).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../common/ddbjson.h"
#include "../common/lapse_err.h"
#include "../placement/hash.h"
#include "../partition/itemkey.h"
#include "../rpc/wire.h"
#include "stream.h"

/* ---- routing ---- */

/* Orders(Customer S, OrderNo N; 16 partitions), LSI ByDate(Date S), GSIs
 * ByStatus(Status S, Date S; 8 partitions), ByProduct(Product N; 2) and
 * ByBlob(Blob B; 4). */
static void orders_schema(table_schema *t)
{
    memset(t, 0, sizeof *t);
    t->id = 7;
    snprintf(t->name, sizeof t->name, "Orders");
    snprintf(t->pk.name, sizeof t->pk.name, "Customer");
    t->pk.type = ATTR_S;
    snprintf(t->sk.name, sizeof t->sk.name, "OrderNo");
    t->sk.type = ATTR_N;
    t->partitions = 16;
    t->nlsi = 1;
    t->lsi[0].id = 1;
    snprintf(t->lsi[0].name, sizeof t->lsi[0].name, "ByDate");
    snprintf(t->lsi[0].sk.name, sizeof t->lsi[0].sk.name, "Date");
    t->lsi[0].sk.type = ATTR_S;
    static const struct {
        const char *name, *pk;
        attr_type type;
        const char *sk;
        uint32_t parts;
    } g[] = {{"ByStatus", "Status", ATTR_S, "Date", 8},
             {"ByProduct", "Product", ATTR_N, NULL, 2},
             {"ByBlob", "Blob", ATTR_B, NULL, 4}};
    t->ngsi = 3;
    for (uint32_t i = 0; i < 3; i++) {
        index_def *d = &t->gsi[i];
        d->id = 2 + i;
        snprintf(d->name, sizeof d->name, "%s", g[i].name);
        snprintf(d->pk.name, sizeof d->pk.name, "%s", g[i].pk);
        d->pk.type = g[i].type;
        if (g[i].sk != NULL) {
            snprintf(d->sk.name, sizeof d->sk.name, "%s", g[i].sk);
            d->sk.type = ATTR_S;
        }
        d->partitions = g[i].parts;
    }
}

static item *parse_item(const char *json)
{
    item *it = NULL;
    char msg[256] = "";
    if (ddbjson_parse_item(json, strlen(json), &it, msg, sizeof msg) != 0) {
        fail_msg("bad test item %s: %s", json, msg);
    }
    return it;
}

/* The GSI partition a query of value v computes is the one the partition
 * layer files the entry of an item carrying v under, for every key type. */
static void test_gsi_partition_matches_partition_layer(void **state)
{
    (void)state;
    table_schema t;
    orders_schema(&t);
    buf k;
    buf_init(&k);
    size_t spread[3][8] = {{0}};
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 300; i++) {
        /* Three bytes (i, i >> 6, 'Z') are four base64 digits. */
        char blob[5] = {b64[i & 63], b64[(i >> 6) & 63], b64[5], b64[26], 0};
        char json[512];
        snprintf(json, sizeof json,
                 "{\"Customer\":{\"S\":\"c%d\"},\"OrderNo\":{\"N\":\"%d\"},"
                 "\"Status\":{\"S\":\"status-%d\"},\"Date\":{\"S\":\"2026-%02d\"},"
                 "\"Product\":{\"N\":\"%d.5\"},\"Blob\":{\"B\":\"%s\"}}",
                 i, i, i, i % 12 + 1, i - 150, blob);
        item *it = parse_item(json);
        for (uint32_t g = 0; g < t.ngsi; g++) {
            uint32_t want = 99;
            assert_int_equal(itemkey_gsi_of(&k, &t, &t.gsi[g], it, &want), 0);
            client_target tg = {0};
            client_query_keys keys;
            lapse_error err;
            const attr_value *pk = item_get(it, t.gsi[g].pk.name);
            if (client_query_route(&t, t.gsi[g].name, pk, &tg, &keys, &err) != 0) {
                fail_msg("route %s: %s", t.gsi[g].name, err.message);
            }
            assert_int_equal(tg.kind, CLIENT_ROUTE_GSI);
            assert_int_equal(tg.gsi, g);
            assert_int_equal(tg.part, want);
            assert_true(keys.is_gsi);
            assert_string_equal(keys.index, t.gsi[g].name);
            assert_string_equal(keys.pk->name, t.gsi[g].pk.name);
            spread[g][want]++;
        }
        item_free(it);
    }
    /* The values really spread over every GSI partition. */
    for (uint32_t g = 0; g < t.ngsi; g++) {
        for (uint32_t p = 0; p < t.gsi[g].partitions; p++) {
            assert_true(spread[g][p] > 0);
        }
    }
    buf_fini(&k);
}

/* The table and an LSI route to the base partition of the table's key. */
static void test_base_and_lsi_routes(void **state)
{
    (void)state;
    table_schema t;
    orders_schema(&t);
    lapse_error err;
    for (int i = 0; i < 50; i++) {
        char text[32];
        snprintf(text, sizeof text, "customer-%d", i);
        attr_value pk;
        assert_int_equal(item_value_init_bytes(&pk, ATTR_S, text, strlen(text)), 0);
        uint32_t base;
        assert_int_equal(hash_partition(&pk, t.partitions, &base), 0);
        const char *names[] = {NULL, "", "ByDate"};
        for (size_t n = 0; n < 3; n++) {
            client_target tg = {0};
            client_query_keys keys;
            assert_int_equal(client_query_route(&t, names[n], &pk, &tg, &keys, &err), 0);
            assert_int_equal(tg.kind, CLIENT_ROUTE_BASE);
            assert_int_equal(tg.part, base);
            assert_false(keys.is_gsi);
            assert_string_equal(keys.pk->name, "Customer");
            assert_string_equal(keys.sk->name, n == 2 ? "Date" : "OrderNo");
            assert_string_equal(keys.index, n == 2 ? "ByDate" : "");
        }
        item_value_fini(&pk);
    }
    /* No such index; a value of the wrong type for the index's key. */
    attr_value s;
    assert_int_equal(item_value_init_bytes(&s, ATTR_S, "x", 1), 0);
    client_target tg = {0};
    client_query_keys keys;
    assert_int_equal(client_query_route(&t, "ByNothing", &s, &tg, &keys, &err), LAPSE_ENOTFOUND);
    assert_non_null(strstr(err.message, "has no index \"ByNothing\""));
    assert_int_equal(client_query_route(&t, "ByProduct", &s, &tg, &keys, &err), LAPSE_EINVAL);
    assert_non_null(strstr(err.message, "\"Product\" must be of type N, not S"));
    item_value_fini(&s);
}

/* ---- stream records ---- */

/* A hand-built reply and the arena its parts live in. */
typedef struct reply {
    arena a;
    Lapse__GetStreamRecordsResponse r;
    Lapse__StreamRecord *rec[8];
} reply;

static void reply_init(reply *x, uint64_t last, uint64_t oldest)
{
    arena_init(&x->a);
    lapse__get_stream_records_response__init(&x->r);
    x->r.records = x->rec;
    x->r.last_sequence = last;
    x->r.oldest_sequence = oldest;
}

static Lapse__Item *pb_item(reply *x, const char *json)
{
    if (json == NULL) {
        return NULL;
    }
    item *it = parse_item(json);
    Lapse__Item *pb = wire_item_to_pb(&x->a, it);
    item_free(it);
    assert_non_null(pb);
    return pb;
}

static Lapse__StreamRecord *add(reply *x, uint64_t seq, Lapse__StreamRecord__EventName ev,
                                int64_t ms, const char *keys, const char *old_image,
                                const char *new_image)
{
    Lapse__StreamRecord *r = arena_alloc(&x->a, sizeof *r);
    assert_non_null(r);
    lapse__stream_record__init(r);
    r->sequence_number = seq;
    r->event_name = ev;
    r->approximate_creation_ms = ms;
    r->keys = pb_item(x, keys);
    r->old_image = pb_item(x, old_image);
    r->new_image = pb_item(x, new_image);
    r->size_bytes = 40 + seq;
    r->shard = 3;
    x->rec[x->r.n_records++] = r;
    return r;
}

#define K "{\"Customer\":{\"S\":\"alice\"},\"OrderNo\":{\"N\":\"1\"}}"
#define V1 "{\"Customer\":{\"S\":\"alice\"},\"OrderNo\":{\"N\":\"1\"},\"Status\":{\"S\":\"new\"}}"
#define V2                                                                                         \
    "{\"Customer\":{\"S\":\"alice\"},\"OrderNo\":{\"N\":\"1\"},\"Status\":{\"S\":\"paid\"},"       \
    "\"ExpiresAt\":{\"N\":\"1790000000\"}}"

static void assert_record_json(const lapse_stream_record *r, const char *want)
{
    char *got = lapse_stream_record_to_json(r);
    assert_non_null(got);
    if (strcmp(got, want) != 0) {
        fail_msg("record JSON\n got: %s\nwant: %s", got, want);
    }
    lapse_free(got);
}

static void test_records_render_as_dynamodb_streams_json(void **state)
{
    (void)state;
    reply x;
    reply_init(&x, 9, 2);
    add(&x, 5, LAPSE__STREAM_RECORD__EVENT_NAME__INSERT, 1790000000123, K, NULL, V1);
    add(&x, 6, LAPSE__STREAM_RECORD__EVENT_NAME__MODIFY, 1790000001999, K, V1, V2);
    add(&x, 7, LAPSE__STREAM_RECORD__EVENT_NAME__REMOVE, 1790000002000, K, V2, NULL);
    Lapse__StreamRecord *t =
        add(&x, 9, LAPSE__STREAM_RECORD__EVENT_NAME__REMOVE, 1790000003456, K, V2, NULL);
    t->ttl_delete = 1;
    t->ttl_attribute = "ExpiresAt";
    t->ttl_expires_at_ms = 1790000000000;
    t->ttl_deleted_at_ms = 1790000003400;

    lapse_stream_batch *b = NULL;
    lapse_error err;
    if (stream_batch_from_pb(&x.r, 3, 4, LAPSE_STREAM_NEW_AND_OLD_IMAGES, &b, &err) != 0) {
        fail_msg("stream_batch_from_pb: %s", err.message);
    }
    arena_fini(&x.a); /* the batch owns copies */
    assert_int_equal(lapse_stream_batch_count(b), 4);
    assert_int_equal(lapse_stream_batch_last_sequence(b), 9);
    assert_int_equal(lapse_stream_batch_oldest_sequence(b), 2);
    assert_null(lapse_stream_batch_record(b, 4));

    const lapse_stream_record *r = lapse_stream_batch_record(b, 0);
    assert_int_equal(r->shard, 3);
    assert_int_equal(r->event, LAPSE_STREAM_INSERT);
    assert_null(r->old_image);
    assert_string_equal(lapse_item_get_s(r->new_image, "Status"), "new");
    assert_false(r->ttl_delete);
    assert_string_equal(r->ttl_attribute, "");
    assert_record_json(r,
                       "{\"eventID\":\"3-5\",\"eventName\":\"INSERT\",\"eventSource\":\"lapse\","
                       "\"dynamodb\":{\"Keys\":" K ",\"NewImage\":" V1 ",\"SequenceNumber\":\"5\","
                       "\"ApproximateCreationDateTime\":1790000000,\"SizeBytes\":45,"
                       "\"StreamViewType\":\"NEW_AND_OLD_IMAGES\"},\"shard\":\"3\"}");
    assert_record_json(
        lapse_stream_batch_record(b, 1),
        "{\"eventID\":\"3-6\",\"eventName\":\"MODIFY\",\"eventSource\":\"lapse\","
        "\"dynamodb\":{\"Keys\":" K ",\"OldImage\":" V1 ",\"NewImage\":" V2
        ",\"SequenceNumber\":\"6\",\"ApproximateCreationDateTime\":1790000001,"
        "\"SizeBytes\":46,\"StreamViewType\":\"NEW_AND_OLD_IMAGES\"},\"shard\":\"3\"}");
    /* A user delete carries no userIdentity. */
    assert_record_json(lapse_stream_batch_record(b, 2),
                       "{\"eventID\":\"3-7\",\"eventName\":\"REMOVE\",\"eventSource\":\"lapse\","
                       "\"dynamodb\":{\"Keys\":" K ",\"OldImage\":" V2
                       ",\"SequenceNumber\":\"7\",\"ApproximateCreationDateTime\":1790000002,"
                       "\"SizeBytes\":47,\"StreamViewType\":\"NEW_AND_OLD_IMAGES\"},"
                       "\"shard\":\"3\"}");
    /* A TTL delete: the service principal and the ttl object, times in ms. */
    r = lapse_stream_batch_record(b, 3);
    assert_true(r->ttl_delete);
    assert_string_equal(r->ttl_attribute, "ExpiresAt");
    assert_record_json(r, "{\"eventID\":\"3-9\",\"eventName\":\"REMOVE\",\"eventSource\":\"lapse\","
                          "\"dynamodb\":{\"Keys\":" K ",\"OldImage\":" V2
                          ",\"SequenceNumber\":\"9\",\"ApproximateCreationDateTime\":1790000003,"
                          "\"SizeBytes\":49,\"StreamViewType\":\"NEW_AND_OLD_IMAGES\"},"
                          "\"userIdentity\":{\"type\":\"Service\",\"principalId\":\"lapse.ttl\"},"
                          "\"ttl\":{\"attribute\":\"ExpiresAt\",\"expiresAt\":1790000000000,"
                          "\"deletedAt\":1790000003400},\"shard\":\"3\"}");
    /* A record whose images did not decode on the source: a bare REMOVE. */
    lapse_stream_record bare = *lapse_stream_batch_record(b, 2);
    bare.old_image = NULL;
    bare.approximate_creation_ms = -1; /* before 1970: rounds down */
    assert_record_json(&bare,
                       "{\"eventID\":\"3-7\",\"eventName\":\"REMOVE\",\"eventSource\":\"lapse\","
                       "\"dynamodb\":{\"Keys\":" K ",\"SequenceNumber\":\"7\","
                       "\"ApproximateCreationDateTime\":-1,\"SizeBytes\":47,"
                       "\"StreamViewType\":\"NEW_AND_OLD_IMAGES\"},\"shard\":\"3\"}");
    assert_null(lapse_stream_record_to_json(NULL));
    lapse_stream_batch_free(b);
    lapse_stream_batch_free(NULL);
}

/* Replies that break the contract are refused whole with EPROTO. */
static void test_bad_replies_are_refused(void **state)
{
    (void)state;
    lapse_stream_batch *b = (lapse_stream_batch *)&b;
    lapse_error err;
    reply x;

    /* Out of order. */
    reply_init(&x, 9, 1);
    add(&x, 5, LAPSE__STREAM_RECORD__EVENT_NAME__INSERT, 1, K, NULL, V1);
    add(&x, 5, LAPSE__STREAM_RECORD__EVENT_NAME__MODIFY, 2, K, V1, V2);
    assert_int_equal(stream_batch_from_pb(&x.r, 3, 0, LAPSE_STREAM_NEW_AND_OLD_IMAGES, &b, &err),
                     LAPSE_EPROTO);
    assert_null(b);
    assert_non_null(strstr(err.message, "increasing order"));
    arena_fini(&x.a);

    /* At or before the position asked for. */
    reply_init(&x, 9, 1);
    add(&x, 4, LAPSE__STREAM_RECORD__EVENT_NAME__INSERT, 1, K, NULL, V1);
    assert_int_equal(stream_batch_from_pb(&x.r, 3, 4, LAPSE_STREAM_NEW_AND_OLD_IMAGES, &b, &err),
                     LAPSE_EPROTO);
    arena_fini(&x.a);

    /* No keys. */
    reply_init(&x, 9, 1);
    add(&x, 5, LAPSE__STREAM_RECORD__EVENT_NAME__INSERT, 1, NULL, NULL, V1);
    assert_int_equal(stream_batch_from_pb(&x.r, 3, 0, LAPSE_STREAM_NEW_AND_OLD_IMAGES, &b, &err),
                     LAPSE_EPROTO);
    assert_non_null(strstr(err.message, "without keys"));
    arena_fini(&x.a);

    /* An unknown event. */
    reply_init(&x, 9, 1);
    Lapse__StreamRecord *r = add(&x, 5, LAPSE__STREAM_RECORD__EVENT_NAME__INSERT, 1, K, NULL, V1);
    r->event_name = (Lapse__StreamRecord__EventName)7;
    assert_int_equal(stream_batch_from_pb(&x.r, 3, 0, LAPSE_STREAM_NEW_AND_OLD_IMAGES, &b, &err),
                     LAPSE_EPROTO);
    arena_fini(&x.a);

    /* An empty reply is a batch without records. */
    reply_init(&x, 0, 0);
    assert_int_equal(stream_batch_from_pb(&x.r, 0, 0, LAPSE_STREAM_NEW_AND_OLD_IMAGES, &b, &err),
                     0);
    assert_int_equal(lapse_stream_batch_count(b), 0);
    assert_null(lapse_stream_batch_record(b, 0));
    lapse_stream_batch_free(b);
    arena_fini(&x.a);
}

/* Each view leaves out the images it hides, and the JSON names it. */
static void test_views_hide_images(void **state)
{
    (void)state;
    static const struct {
        lapse_stream_view view;
        const char *name;
        int old_shown, new_shown;
    } cases[] = {
        {LAPSE_STREAM_NEW_AND_OLD_IMAGES, "NEW_AND_OLD_IMAGES", 1, 1},
        {LAPSE_STREAM_KEYS_ONLY, "KEYS_ONLY", 0, 0},
        {LAPSE_STREAM_NEW_IMAGE, "NEW_IMAGE", 0, 1},
        {LAPSE_STREAM_OLD_IMAGE, "OLD_IMAGE", 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        reply x;
        reply_init(&x, 6, 6);
        add(&x, 6, LAPSE__STREAM_RECORD__EVENT_NAME__MODIFY, 1790000001999, K, V1, V2);
        lapse_stream_batch *b = NULL;
        lapse_error err;
        assert_int_equal(stream_batch_from_pb(&x.r, 3, 5, cases[i].view, &b, &err), 0);
        arena_fini(&x.a);
        const lapse_stream_record *r = lapse_stream_batch_record(b, 0);
        assert_non_null(r->keys);
        assert_int_equal(r->old_image != NULL, cases[i].old_shown);
        assert_int_equal(r->new_image != NULL, cases[i].new_shown);
        assert_int_equal(r->view, cases[i].view);
        char *json = lapse_stream_record_to_json(r);
        char want[64];
        snprintf(want, sizeof want, "\"StreamViewType\":\"%s\"", cases[i].name);
        assert_non_null(strstr(json, want));
        assert_int_equal(strstr(json, "\"OldImage\"") != NULL, cases[i].old_shown);
        assert_int_equal(strstr(json, "\"NewImage\"") != NULL, cases[i].new_shown);
        lapse_free(json);
        lapse_stream_batch_free(b);
        assert_string_equal(lapse_stream_view_name((int)cases[i].view), cases[i].name);
        assert_int_equal(lapse_stream_view_parse(cases[i].name), (int)cases[i].view);
    }
    assert_null(lapse_stream_view_name(4));
    assert_null(lapse_stream_view_name(-1));
    assert_int_equal(lapse_stream_view_parse("NEW_IMAGES"), -1);
    assert_int_equal(lapse_stream_view_parse(NULL), -1);
}

/* Calls refuse NULL arguments before touching the network. */
static void test_stream_null_arguments(void **state)
{
    (void)state;
    lapse_error err;
    lapse_stream_shard *shards = (lapse_stream_shard *)&shards;
    size_t n = 5;
    lapse_stream_batch *b = NULL;
    lapse_stream_request q = {.shard = 0};
    lapse_page *page = NULL;
    lapse_query_opts o = {0};
    assert_int_equal(lapse_stream_shards(NULL, "T", &shards, &n, &err), LAPSE_EINVAL);
    assert_null(shards);
    assert_int_equal(n, 0);
    assert_int_equal(lapse_stream_read(NULL, "T", &q, &b, &err), LAPSE_EINVAL);
    assert_int_equal(lapse_stream_read(NULL, "T", NULL, &b, &err), LAPSE_EINVAL);
    assert_int_equal(lapse_stream_read_many(NULL, "T", &q, 1, &b, &err), LAPSE_EINVAL);
    assert_int_equal(lapse_query_index(NULL, "T", "I", &o, &page, &err), LAPSE_EINVAL);
    assert_null(page);
    lapse_stream_info info;
    assert_int_equal(lapse_stream_info_get(NULL, "T", &info, &err), LAPSE_EINVAL);
    assert_int_equal(lapse_refresh_map(NULL, &err), LAPSE_EINVAL);
    assert_int_equal(lapse_stream_batch_count(NULL), 0);
    assert_int_equal(lapse_stream_batch_last_sequence(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gsi_partition_matches_partition_layer),
        cmocka_unit_test(test_base_and_lsi_routes),
        cmocka_unit_test(test_records_render_as_dynamodb_streams_json),
        cmocka_unit_test(test_views_hide_images),
        cmocka_unit_test(test_bad_replies_are_refused),
        cmocka_unit_test(test_stream_null_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
