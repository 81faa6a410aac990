/*
 * store_testutil.c: the fixture and item helpers shared by store_test.c and
 * store_query_test.c (declared in store_testutil.h).
 */
#include "store_testutil.h"

table_schema music;
table_schema events;
table_schema plain;

table_schema mk_schema(uint32_t id, const char *name, const char *pk, attr_type pkt,
                       const char *sk, attr_type skt, uint32_t partitions)
{
    table_schema t;
    memset(&t, 0, sizeof(t));
    t.id = id;
    snprintf(t.name, sizeof(t.name), "%s", name);
    snprintf(t.pk.name, sizeof(t.pk.name), "%s", pk);
    t.pk.type = pkt;
    if (sk != NULL) {
        snprintf(t.sk.name, sizeof(t.sk.name), "%s", sk);
        t.sk.type = skt;
    }
    t.partitions = partitions;
    return t;
}

void reopen(fixture *f)
{
    store_close(f->st);
    f->st = NULL;
    assert_ok(store_open(&f->st, f->dir, f->err, sizeof(f->err)), f);
}

int setup(void **state)
{
    music = mk_schema(1, "Music", "Artist", ATTR_S, "Song", ATTR_S, 8);
    events = mk_schema(2, "Events", "Id", ATTR_S, "Ts", ATTR_N, 4);
    plain = mk_schema(3, "Plain", "Pk", ATTR_N, NULL, 0, 16);
    fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || testdir_make(f->dir, sizeof(f->dir), "store_test") != 0) {
        free(f);
        return -1;
    }
    /* A nested directory that does not exist yet: store_open creates it. */
    strncat(f->dir, "/data/db", sizeof(f->dir) - strlen(f->dir) - 1);
    if (store_open(&f->st, f->dir, f->err, sizeof(f->err)) != 0) {
        fprintf(stderr, "store_open: %s\n", f->err);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

int teardown(void **state)
{
    fixture *f = *state;
    store_close(f->st);
    char *slash = strstr(f->dir, "/data/db");
    if (slash != NULL) {
        *slash = 0;
    }
    testdir_remove(f->dir);
    free(f);
    return 0;
}

attr_value val(attr_type t, const char *text)
{
    attr_value v;
    int rv = item_value_init_bytes(&v, t, text, strlen(text));
    if (rv != 0) {
        fail_msg("bad test value %s: %s", text, lapse_strerror(rv));
    }
    return v;
}

/* itm(n, name1, type1, text1, ...): an item of n S/N/B attributes. */
item *itm(int n, ...)
{
    item *it = item_new();
    assert_non_null(it);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *name = va_arg(ap, const char *);
        attr_type t = (attr_type)va_arg(ap, int);
        const char *text = va_arg(ap, const char *);
        attr_value v = val(t, text);
        assert_int_equal(item_set(it, name, &v), 0);
    }
    va_end(ap);
    return it;
}

item *song(const char *artist, const char *title, const char *year)
{
    if (year == NULL) {
        return itm(2, "Artist", ATTR_S, artist, "Song", ATTR_S, title);
    }
    return itm(3, "Artist", ATTR_S, artist, "Song", ATTR_S, title, "Year", ATTR_N, year);
}

item *song_key(const char *artist, const char *title)
{
    return song(artist, title, NULL);
}

void put(fixture *f, const table_schema *t, item *it)
{
    assert_ok(store_put(f->st, t, it, NULL, NULL, f->err, sizeof(f->err)), f);
    item_free(it);
}

item *get(fixture *f, const table_schema *t, item *key)
{
    item *out = NULL;
    assert_ok(store_get(f->st, t, key, &out, f->err, sizeof(f->err)), f);
    item_free(key);
    return out;
}

void assert_attr(const item *it, const char *name, attr_type t, const char *text)
{
    assert_non_null(it);
    const attr_value *v = item_get(it, name);
    if (v == NULL) {
        fail_msg("attribute %s missing", name);
    }
    attr_value want = val(t, text);
    if (!item_value_eq(v, &want)) {
        fail_msg("attribute %s is %.*s, expected %s", name, (int)v->u.bytes.len, v->u.bytes.ptr,
                 text);
    }
    item_value_fini(&want);
}
