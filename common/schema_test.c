/* schema_test: table schema validation and the key/size checks every write
 * makes, with the reasons a user sees. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lapse_err.h"
#include "schema.h"

static table_schema users(void)
{
    table_schema t;
    memset(&t, 0, sizeof(t));
    snprintf(t.name, sizeof(t.name), "Users");
    snprintf(t.pk.name, sizeof(t.pk.name), "UserName");
    t.pk.type = ATTR_S;
    snprintf(t.sk.name, sizeof(t.sk.name), "Id");
    t.sk.type = ATTR_N;
    t.partitions = SCHEMA_DEFAULT_PARTITIONS;
    return t;
}

static void expect(int got, int want, const char *err, const char *reason)
{
    if (got != want) {
        fail_msg("got %s (%s), want %s", lapse_strerror(got), err, lapse_strerror(want));
    }
    if (reason != NULL && strstr(err, reason) == NULL) {
        fail_msg("reason \"%s\" lacks \"%s\"", err, reason);
    }
}

static void table_names(void **state)
{
    (void)state;
    char err[256] = "";
    assert_int_equal(schema_validate_table_name("abc", err, sizeof(err)), 0);
    assert_int_equal(schema_validate_table_name("My_Table-1.v2", err, sizeof(err)), 0);
    expect(schema_validate_table_name("ab", err, sizeof(err)), LAPSE_EINVAL, err, "3-255");
    expect(schema_validate_table_name("bad name", err, sizeof(err)), LAPSE_EINVAL, err,
           "may contain only");
    expect(schema_validate_table_name("tab/le", err, sizeof(err)), LAPSE_EINVAL, err, NULL);
    char longn[300];
    memset(longn, 'x', 256);
    longn[256] = 0;
    expect(schema_validate_table_name(longn, err, sizeof(err)), LAPSE_EINVAL, err, "3-255");
    longn[255] = 0;
    assert_int_equal(schema_validate_table_name(longn, err, sizeof(err)), 0);
}

static void schemas(void **state)
{
    (void)state;
    char err[256] = "";
    table_schema t = users();
    assert_int_equal(schema_validate(&t, err, sizeof(err)), 0);
    t.sk.name[0] = 0; /* no sort key */
    t.sk.type = 0;
    assert_int_equal(schema_validate(&t, err, sizeof(err)), 0);

    t = users();
    t.pk.name[0] = 0;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err, "partition key name");
    t = users();
    t.pk.type = ATTR_BOOL;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err, "S, N or B");
    t = users();
    t.sk.type = ATTR_M;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err, "sort key");
    t = users();
    snprintf(t.sk.name, sizeof(t.sk.name), "UserName");
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err, "must differ");
    uint32_t bad[] = {0, 3, 48, 8192};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        t = users();
        t.partitions = bad[i];
        expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err, "power of two");
    }
    uint32_t good[] = {1, 2, 64, 4096};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        t = users();
        t.partitions = good[i];
        assert_int_equal(schema_validate(&t, err, sizeof(err)), 0);
    }
}

/* Users with one LSI and two GSIs, ids 1-3, as the coordinator fills it. */
static table_schema indexed(void)
{
    table_schema t = users();
    t.nlsi = 1;
    t.lsi[0].id = 1;
    snprintf(t.lsi[0].name, sizeof(t.lsi[0].name), "ByCreated");
    snprintf(t.lsi[0].sk.name, sizeof(t.lsi[0].sk.name), "Created");
    t.lsi[0].sk.type = ATTR_N;
    t.ngsi = 2;
    t.gsi[0].id = 2;
    snprintf(t.gsi[0].name, sizeof(t.gsi[0].name), "ByEmail");
    snprintf(t.gsi[0].pk.name, sizeof(t.gsi[0].pk.name), "Email");
    t.gsi[0].pk.type = ATTR_S;
    t.gsi[0].partitions = 16;
    t.gsi[1].id = 3;
    snprintf(t.gsi[1].name, sizeof(t.gsi[1].name), "by.city-age_2");
    snprintf(t.gsi[1].pk.name, sizeof(t.gsi[1].pk.name), "City");
    t.gsi[1].pk.type = ATTR_S;
    snprintf(t.gsi[1].sk.name, sizeof(t.gsi[1].sk.name), "Age");
    t.gsi[1].sk.type = ATTR_N;
    t.gsi[1].projection = INDEX_PROJECT_KEYS;
    t.gsi[1].partitions = 1;
    t.stream.enabled = 1;
    t.stream.ttl_deletes = 1;
    t.stream.retention_hours = 24;
    return t;
}

static void lsi_rules(void **state)
{
    (void)state;
    char err[512] = "";
    table_schema t = indexed();
    assert_int_equal(schema_validate(&t, err, sizeof(err)), 0);

    t = indexed(); /* DynamoDB: an LSI needs a table with a sort key */
    t.sk.name[0] = 0;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "LSI \"ByCreated\" needs a table with a sort key");
    t = indexed();
    t.lsi[0].sk.name[0] = 0;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "LSI \"ByCreated\" sort key name must be 1-255 bytes");
    t = indexed();
    t.lsi[0].sk.type = ATTR_BOOL;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "LSI \"ByCreated\" sort key \"Created\" must be of type S, N or B");
    t = indexed();
    snprintf(t.lsi[0].sk.name, sizeof(t.lsi[0].sk.name), "UserName");
    t.lsi[0].sk.type = ATTR_S;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "must differ from the table's partition key");
    t = indexed();
    snprintf(t.lsi[0].pk.name, sizeof(t.lsi[0].pk.name), "UserName");
    t.lsi[0].pk.type = ATTR_S;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err, "leave its own unset");
    t = indexed();
    t.lsi[0].partitions = 4;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err, "ByCreated");

    t = indexed(); /* five is the limit */
    t.ngsi = 0;
    t.nlsi = SCHEMA_MAX_LSI;
    for (uint32_t i = 0; i < SCHEMA_MAX_LSI; i++) {
        t.lsi[i] = t.lsi[0];
        t.lsi[i].id = i + 1;
        snprintf(t.lsi[i].name, sizeof(t.lsi[i].name), "lsi%u", (unsigned)i);
    }
    assert_int_equal(schema_validate(&t, err, sizeof(err)), 0);
    t.nlsi = SCHEMA_MAX_LSI + 1;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err, "at most 5");
}

static void gsi_rules(void **state)
{
    (void)state;
    char err[512] = "";
    table_schema t = indexed();
    t.gsi[0].pk.name[0] = 0;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "GSI \"ByEmail\" partition key name must be 1-255 bytes");
    t = indexed();
    t.gsi[0].pk.type = ATTR_L;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "GSI \"ByEmail\" partition key \"Email\" must be of type S, N or B");
    t = indexed();
    t.gsi[1].sk.type = ATTR_M;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "GSI \"by.city-age_2\" sort key \"Age\"");
    t = indexed();
    snprintf(t.gsi[1].sk.name, sizeof(t.gsi[1].sk.name), "City");
    t.gsi[1].sk.type = ATTR_S;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "GSI \"by.city-age_2\": sort key \"City\" must differ from its partition key");
    uint32_t bad[] = {0, 3, 12, 8192};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        t = indexed();
        t.gsi[0].partitions = bad[i];
        expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
               "GSI \"ByEmail\": partition count");
    }
    t = indexed();
    t.gsi[0].partitions = SCHEMA_MAX_PARTITIONS;
    assert_int_equal(schema_validate(&t, err, sizeof(err)), 0);
    t.gsi[0].projection = (index_projection)7;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err, "unknown projection");

    /* A GSI on the table's own key attributes is fine with the same types. */
    t = indexed();
    snprintf(t.gsi[0].pk.name, sizeof(t.gsi[0].pk.name), "Id");
    t.gsi[0].pk.type = ATTR_N;
    snprintf(t.gsi[0].sk.name, sizeof(t.gsi[0].sk.name), "UserName");
    t.gsi[0].sk.type = ATTR_S;
    assert_int_equal(schema_validate(&t, err, sizeof(err)), 0);
    t.gsi[0].pk.type = ATTR_S; /* Id is N in the table */
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "key attribute \"Id\" is of type N in the table but S in ByEmail");

    t = indexed();
    t.ngsi = SCHEMA_MAX_GSI;
    for (uint32_t i = 0; i < SCHEMA_MAX_GSI; i++) {
        t.gsi[i] = t.gsi[0];
        t.gsi[i].id = 10 + i;
        snprintf(t.gsi[i].name, sizeof(t.gsi[i].name), "gsi%02u", (unsigned)i);
    }
    assert_int_equal(schema_validate(&t, err, sizeof(err)), 0);
    t.ngsi = SCHEMA_MAX_GSI + 1;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err, "at most 20");
}

static void index_names_and_ids(void **state)
{
    (void)state;
    char err[512] = "";
    table_schema t = indexed();
    snprintf(t.gsi[0].name, sizeof(t.gsi[0].name), "ab");
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "GSI name \"ab\" must be 3-255 characters");
    snprintf(t.gsi[0].name, sizeof(t.gsi[0].name), "by email");
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "GSI name \"by email\" may contain only");
    t = indexed();
    t.lsi[0].name[0] = 0;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err, "LSI name");
    t = indexed();
    memset(t.gsi[1].name, 'g', SCHEMA_MAX_NAME);
    t.gsi[1].name[SCHEMA_MAX_NAME] = 0;
    assert_int_equal(schema_validate(&t, err, sizeof(err)), 0);

    t = indexed(); /* unique across LSIs and GSIs */
    snprintf(t.gsi[1].name, sizeof(t.gsi[1].name), "ByCreated");
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "index name \"ByCreated\" is used twice");
    t = indexed();
    t.gsi[1].id = 0;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "GSI \"by.city-age_2\" has no index id");
    t = indexed();
    t.gsi[0].id = 1;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "LSI \"ByCreated\" and GSI \"ByEmail\" have the same index id 1");
}

static void stream_rules(void **state)
{
    (void)state;
    char err[512] = "";
    table_schema t = indexed();
    uint32_t good[] = {0, 1, 24, SCHEMA_MAX_STREAM_RETENTION_HOURS};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        t.stream.retention_hours = good[i];
        assert_int_equal(schema_validate(&t, err, sizeof(err)), 0);
    }
    t.stream.retention_hours = SCHEMA_MAX_STREAM_RETENTION_HOURS + 1;
    expect(schema_validate(&t, err, sizeof(err)), LAPSE_EINVAL, err,
           "stream retention of 8761 hours is over the limit of 8760");
    assert_true(schema_has_outbox(&t));
    t.ngsi = 0;
    assert_true(schema_has_outbox(&t));
    t.stream.enabled = 0;
    assert_false(schema_has_outbox(&t));
}

static void put_bytes(item *it, const char *name, attr_type ty, const void *p, size_t n)
{
    attr_value v;
    assert_int_equal(item_value_init_bytes(&v, ty, p, n), 0);
    assert_int_equal(item_set(it, name, &v), 0);
}

static item *user_item(void)
{
    item *it = item_new();
    put_bytes(it, "UserName", ATTR_S, "user1", 5);
    put_bytes(it, "Id", ATTR_N, "7", 1);
    put_bytes(it, "Email", ATTR_S, "u@example.com", 13);
    return it;
}

static void item_checks(void **state)
{
    (void)state;
    char err[256] = "";
    table_schema t = users();
    item *it = user_item();
    assert_int_equal(schema_check_item(&t, it, 0, err, sizeof(err)), 0);
    expect(schema_check_item(&t, it, 1, err, sizeof(err)), LAPSE_EINVAL, err,
           "only the key attributes, found \"Email\"");

    item *k = NULL;
    assert_int_equal(schema_key_of(&t, it, &k), 0);
    assert_int_equal(k->n, 2);
    assert_int_equal(schema_check_item(&t, k, 1, err, sizeof(err)), 0);
    assert_null(item_get(k, "Email"));
    assert_true(item_value_eq(item_get(k, "Id"), item_get(it, "Id")));
    item_free(k);

    item_remove(it, "UserName");
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_EINVAL, err,
           "missing key attribute \"UserName\"");
    put_bytes(it, "UserName", ATTR_S, "user1", 5);
    item_remove(it, "Id");
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_EINVAL, err,
           "missing key attribute \"Id\"");
    put_bytes(it, "Id", ATTR_S, "7", 1);
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_EINVAL, err,
           "key attribute \"Id\" must be of type N, got S");
    put_bytes(it, "Id", ATTR_N, "7", 1);
    put_bytes(it, "UserName", ATTR_S, "", 0);
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_EINVAL, err,
           "\"UserName\" must not be empty");
    item_free(it);
}

/* Index key attributes may be missing (sparse), never of the wrong type. */
static void index_key_checks(void **state)
{
    (void)state;
    char err[256] = "";
    table_schema t = indexed();
    item *it = user_item(); /* carries Email (S): in ByEmail only */
    assert_int_equal(schema_check_item(&t, it, 0, err, sizeof(err)), 0);
    put_bytes(it, "Email", ATTR_N, "7", 1);
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_EINVAL, err,
           "attribute \"Email\" is the partition key of global secondary index \"ByEmail\" and "
           "must be of type S, got N");
    put_bytes(it, "Email", ATTR_S, "", 0);
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_EINVAL, err,
           "\"ByEmail\" and must not be empty");
    item_remove(it, "Email");
    put_bytes(it, "City", ATTR_S, "Oslo", 4);
    put_bytes(it, "Age", ATTR_S, "40", 2);
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_EINVAL, err,
           "\"Age\" is the sort key of global secondary index \"by.city-age_2\"");
    put_bytes(it, "Age", ATTR_N, "40", 2);
    put_bytes(it, "Created", ATTR_B, "x", 1);
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_EINVAL, err,
           "\"Created\" is the sort key of local secondary index \"ByCreated\"");
    put_bytes(it, "Created", ATTR_N, "1", 1);
    assert_int_equal(schema_check_item(&t, it, 0, err, sizeof(err)), 0);
    char *big = malloc(SCHEMA_MAX_KEY_BYTES + 1);
    memset(big, 'x', SCHEMA_MAX_KEY_BYTES + 1);
    put_bytes(it, "City", ATTR_S, big, SCHEMA_MAX_KEY_BYTES + 1);
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_ETOOBIG, err, "\"City\"");
    free(big);
    item_free(it);
}

static void size_limits(void **state)
{
    (void)state;
    char err[256] = "";
    table_schema t = users();
    t.sk.type = ATTR_B;
    char *big = malloc(ITEM_MAX_BYTES + 1);
    memset(big, 'x', ITEM_MAX_BYTES + 1);

    item *it = item_new();
    put_bytes(it, "UserName", ATTR_S, big, SCHEMA_MAX_KEY_BYTES);
    put_bytes(it, "Id", ATTR_B, big, SCHEMA_MAX_SORT_KEY_BYTES);
    assert_int_equal(schema_check_item(&t, it, 0, err, sizeof(err)), 0);
    put_bytes(it, "UserName", ATTR_S, big, SCHEMA_MAX_KEY_BYTES + 1);
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_ETOOBIG, err, "\"UserName\"");
    put_bytes(it, "UserName", ATTR_S, "u", 1);
    put_bytes(it, "Id", ATTR_B, big, SCHEMA_MAX_SORT_KEY_BYTES + 1);
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_ETOOBIG, err, "\"Id\"");
    put_bytes(it, "Id", ATTR_B, "", 0);
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_EINVAL, err, "empty");
    put_bytes(it, "Id", ATTR_B, "i", 1);

    /* item size: names count; exactly at the limit passes */
    size_t base = item_size(it) + strlen("Data");
    put_bytes(it, "Data", ATTR_S, big, ITEM_MAX_BYTES - base);
    assert_int_equal(item_size(it), ITEM_MAX_BYTES);
    assert_int_equal(schema_check_item(&t, it, 0, err, sizeof(err)), 0);
    put_bytes(it, "Data", ATTR_S, big, ITEM_MAX_BYTES - base + 1);
    expect(schema_check_item(&t, it, 0, err, sizeof(err)), LAPSE_ETOOBIG, err, "exceeds");
    item_free(it);
    free(big);
}

static void nesting_limit(void **state)
{
    (void)state;
    char err[256] = "";
    table_schema t = users();
    for (int depth = 32; depth <= 33; depth++) {
        item *it = user_item();
        attr_value v;
        item_value_init_null(&v);
        for (int i = 1; i < depth; i++) {
            attr_value l;
            item_value_init_list(&l);
            assert_int_equal(item_value_list_append(&l, &v), 0);
            v = l;
        }
        assert_int_equal(item_set(it, "Deep", &v), 0);
        int rv = schema_check_item(&t, it, 0, err, sizeof(err));
        if (depth <= ITEM_MAX_DEPTH) {
            assert_int_equal(rv, 0);
        } else {
            expect(rv, LAPSE_EINVAL, err, "\"Deep\" is nested deeper than 32");
        }
        item_free(it);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_names),   cmocka_unit_test(schemas),
        cmocka_unit_test(item_checks),   cmocka_unit_test(size_limits),
        cmocka_unit_test(nesting_limit), cmocka_unit_test(lsi_rules),
        cmocka_unit_test(gsi_rules),     cmocka_unit_test(index_names_and_ids),
        cmocka_unit_test(stream_rules),  cmocka_unit_test(index_key_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
