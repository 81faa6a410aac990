/*
 * wire_test.c: protobuf conversions. Round trips go through pack/unpack, so
 * they prove what actually crosses the wire; rejections feed hand-built bad
 * trees, as a hostile peer would send them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../common/lapse_err.h"
#include "wire.h"

#define assert_rv(call, code, err)                                                                 \
    do {                                                                                           \
        int rv_ = (call);                                                                          \
        if (rv_ != (code)) {                                                                       \
            fail_msg("%s returned %d (%s), expected %d: %s", #call, rv_, lapse_strerror(rv_),      \
                     (code), (err));                                                               \
        }                                                                                          \
    } while (0)

/* ---- helpers ---- */

static attr_value bytes_value(attr_type t, const void *p, size_t n)
{
    attr_value v;
    assert_int_equal(item_value_init_bytes(&v, t, p, n), 0);
    return v;
}

static void set(item *it, const char *name, attr_value v)
{
    assert_int_equal(item_set(it, name, &v), 0);
}

/* Packs an item tree, unpacks it as a peer would, and converts it back. */
static item *through_wire(const item *it)
{
    arena a;
    arena_init(&a);
    Lapse__Item *pb = wire_item_to_pb(&a, it);
    assert_non_null(pb);
    size_t n = lapse__item__get_packed_size(pb);
    uint8_t *buf = malloc(n + 1);
    assert_non_null(buf);
    lapse__item__pack(pb, buf);
    arena_fini(&a);

    assert_int_equal(wire_check_nesting(&lapse__item__descriptor, buf, n, WIRE_MAX_NESTING), 0);
    Lapse__Item *back = lapse__item__unpack(NULL, n, buf);
    free(buf);
    assert_non_null(back);
    item *out = NULL;
    char err[256] = "";
    assert_rv(wire_item_from_pb(back, &out, err, sizeof err), 0, err);
    lapse__item__free_unpacked(back, NULL);
    return out;
}

/* A value nested depth levels deep: depth-1 lists around a string. */
static Lapse__AttributeValue *nested_pb(arena *a, int depth, int use_maps)
{
    Lapse__AttributeValue *v = arena_alloc(a, sizeof *v);
    lapse__attribute_value__init(v);
    if (depth == 1) {
        v->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_S;
        v->s.data = (uint8_t *)arena_strdup(a, "leaf");
        v->s.len = 4;
        return v;
    }
    Lapse__AttributeValue *inner = nested_pb(a, depth - 1, use_maps);
    if (use_maps) {
        Lapse__MapValue *m = arena_alloc(a, sizeof *m);
        Lapse__Attribute *at = arena_alloc(a, sizeof *at);
        lapse__map_value__init(m);
        lapse__attribute__init(at);
        at->name = "k";
        at->value = inner;
        m->attrs = arena_alloc(a, sizeof *m->attrs);
        m->attrs[0] = at;
        m->n_attrs = 1;
        v->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_M;
        v->m = m;
    } else {
        Lapse__ListValue *l = arena_alloc(a, sizeof *l);
        lapse__list_value__init(l);
        l->values = arena_alloc(a, sizeof *l->values);
        l->values[0] = inner;
        l->n_values = 1;
        v->value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_L;
        v->l = l;
    }
    return v;
}

/* ---- round trips ---- */

static void item_round_trip_keeps_every_type(void **state)
{
    (void)state;
    item *it = item_new();
    assert_non_null(it);
    set(it, "s", bytes_value(ATTR_S, "hello", 5));
    set(it, "s_nul", bytes_value(ATTR_S, "a\0b", 3));
    set(it, "s_empty", bytes_value(ATTR_S, "", 0));
    set(it, "n", bytes_value(ATTR_N, "-12.50E3", 8));
    set(it, "n_big", bytes_value(ATTR_N, "12345678901234567890123456789012345678", 38));
    set(it, "b", bytes_value(ATTR_B, "\0\1\2\0\377", 5));
    attr_value v;
    item_value_init_bool(&v, 1);
    set(it, "t", v);
    item_value_init_bool(&v, 0);
    set(it, "f", v);
    item_value_init_null(&v);
    set(it, "null", v);

    /* L [S, N, L [], M {x: BOOL}] */
    attr_value list, e, inner, map;
    item_value_init_list(&list);
    e = bytes_value(ATTR_S, "x", 1);
    assert_int_equal(item_value_list_append(&list, &e), 0);
    e = bytes_value(ATTR_N, "0.001", 5);
    assert_int_equal(item_value_list_append(&list, &e), 0);
    item_value_init_list(&inner);
    assert_int_equal(item_value_list_append(&list, &inner), 0);
    item_value_init_map(&map);
    item_value_init_bool(&e, 1);
    assert_int_equal(item_value_map_set(&map, "x", &e), 0);
    assert_int_equal(item_value_list_append(&list, &map), 0);
    set(it, "list", list);

    /* M {a: M {b: L [NULL]}, empty: M {}} */
    attr_value outer, mid, l2;
    item_value_init_map(&outer);
    item_value_init_map(&mid);
    item_value_init_list(&l2);
    item_value_init_null(&e);
    assert_int_equal(item_value_list_append(&l2, &e), 0);
    assert_int_equal(item_value_map_set(&mid, "b", &l2), 0);
    assert_int_equal(item_value_map_set(&outer, "a", &mid), 0);
    item_value_init_map(&mid);
    assert_int_equal(item_value_map_set(&outer, "empty", &mid), 0);
    set(it, "map", outer);

    item *back = through_wire(it);
    assert_true(item_eq(it, back));
    const attr_value *s = item_get(back, "s_nul");
    assert_non_null(s);
    assert_int_equal(s->type, ATTR_S);
    assert_int_equal(s->u.bytes.len, 3);
    assert_memory_equal(s->u.bytes.ptr, "a\0b", 3);
    const attr_value *n = item_get(back, "n");
    assert_int_equal(n->type, ATTR_N);
    assert_string_equal(n->u.bytes.ptr, "-12.50E3"); /* kept exactly as given */
    const attr_value *b = item_get(back, "b");
    assert_int_equal(b->u.bytes.len, 5);
    assert_memory_equal(b->u.bytes.ptr, "\0\1\2\0\377", 5);

    /* The decoded item is an ordinary item: it can grow. */
    assert_int_equal(item_set(back, "added", &(attr_value){.type = ATTR_NULL}), 0);
    assert_non_null(item_get(back, "added"));

    item_free(back);
    item_free(it);
}

static void empty_item_round_trips(void **state)
{
    (void)state;
    item *it = item_new();
    item *back = through_wire(it);
    assert_int_equal(back->n, 0);
    item_free(back);
    item_free(it);
}

static void value_to_pb_sets_the_oneof(void **state)
{
    (void)state;
    arena a;
    arena_init(&a);
    attr_value v = bytes_value(ATTR_N, "42", 2);
    Lapse__AttributeValue *pb = wire_value_to_pb(&a, &v);
    assert_non_null(pb);
    assert_int_equal(pb->value_case, LAPSE__ATTRIBUTE_VALUE__VALUE_N);
    assert_string_equal(pb->n, "42");
    item_value_fini(&v);

    item_value_init_null(&v);
    pb = wire_value_to_pb(&a, &v);
    assert_int_equal(pb->value_case, LAPSE__ATTRIBUTE_VALUE__VALUE_NULL);
    assert_true(pb->null);

    attr_value back;
    char err[128];
    assert_rv(wire_value_from_pb(pb, &back, err, sizeof err), 0, err);
    assert_int_equal(back.type, ATTR_NULL);
    arena_fini(&a);
}

static void deepest_allowed_value_round_trips(void **state)
{
    (void)state;
    arena a;
    arena_init(&a);
    attr_value v;
    char err[256] = "";
    for (int maps = 0; maps <= 1; maps++) {
        Lapse__AttributeValue *pb = nested_pb(&a, ITEM_MAX_DEPTH, maps);
        assert_rv(wire_value_from_pb(pb, &v, err, sizeof err), 0, err);
        Lapse__AttributeValue *again = wire_value_to_pb(&a, &v);
        assert_non_null(again);
        item_value_fini(&v);
    }
    arena_fini(&a);
}

static void schema_round_trip(void **state)
{
    (void)state;
    table_schema t = {0};
    t.id = 7;
    snprintf(t.name, sizeof t.name, "Music.v2");
    snprintf(t.pk.name, sizeof t.pk.name, "Artist");
    t.pk.type = ATTR_S;
    snprintf(t.sk.name, sizeof t.sk.name, "Year");
    t.sk.type = ATTR_N;
    t.partitions = 16;

    arena a;
    arena_init(&a);
    Lapse__TableSchema *pb = wire_schema_to_pb(&a, &t);
    assert_non_null(pb);
    assert_int_equal(pb->partition_key->type, LAPSE__KEY_TYPE__KEY_S);
    assert_int_equal(pb->sort_key->type, LAPSE__KEY_TYPE__KEY_N);
    table_schema back;
    char err[256] = "";
    assert_rv(wire_schema_from_pb(pb, &back, err, sizeof err), 0, err);
    assert_memory_equal(&t, &back, sizeof t);

    /* Without a sort key the field is absent, and absent decodes to none. */
    memset(&t.sk, 0, sizeof t.sk);
    t.pk.type = ATTR_B;
    pb = wire_schema_to_pb(&a, &t);
    assert_null(pb->sort_key);
    assert_rv(wire_schema_from_pb(pb, &back, err, sizeof err), 0, err);
    assert_memory_equal(&t, &back, sizeof t);

    /* A sort key of type KEY_NONE with no name also means none. */
    Lapse__KeyDef none = LAPSE__KEY_DEF__INIT;
    pb->sort_key = &none;
    assert_rv(wire_schema_from_pb(pb, &back, err, sizeof err), 0, err);
    assert_int_equal(back.sk.name[0], 0);

    /* TTL config and hide_expired travel with the schema; never-configured
     * TTL is absent on the wire. */
    assert_null(wire_schema_to_pb(&a, &t)->ttl);
    t.ttl.enabled = 1;
    snprintf(t.ttl.attribute, sizeof t.ttl.attribute, "ExpirationTime");
    t.ttl.offset_s = 3600;
    t.ttl.guard_years = 2;
    t.ttl.paused = 1;
    t.ttl.config_version = 41;
    t.hide_expired = 1;
    pb = wire_schema_to_pb(&a, &t);
    assert_non_null(pb->ttl);
    assert_rv(wire_schema_from_pb(pb, &back, err, sizeof err), 0, err);
    assert_memory_equal(&t, &back, sizeof t);
    pb->ttl->offset_seconds = -1;
    assert_int_equal(wire_schema_from_pb(pb, &back, err, sizeof err), LAPSE_EINVAL);
    assert_non_null(strstr(err, "offset"));
    pb->ttl->offset_seconds = 0;
    pb->ttl->attribute = "";
    assert_int_equal(wire_schema_from_pb(pb, &back, err, sizeof err), LAPSE_EINVAL);
    pb->ttl->enabled = 0; /* disabled with no attribute: fine */
    assert_rv(wire_schema_from_pb(pb, &back, err, sizeof err), 0, err);
    pb->ttl->ignore_older_than_years = -3;
    assert_int_equal(wire_schema_from_pb(pb, &back, err, sizeof err), LAPSE_EINVAL);
    arena_fini(&a);
}

static pmap *sample_pmap(void)
{
    pmap *pm = pmap_new();
    assert_non_null(pm);
    pm->version = 42;
    assert_int_equal(pmap_set_node(pm, 1, "tcp://127.0.0.1:7401", PMAP_NODE_UP), 0);
    assert_int_equal(pmap_set_node(pm, 2, "tcp://127.0.0.1:7402", PMAP_NODE_UP), 0);
    assert_int_equal(pmap_set_node(pm, 3, "tcp://127.0.0.1:7403", PMAP_NODE_DOWN), 0);
    assert_int_equal(pmap_set_node_lease(pm, 2, 0x3f91a20ff23abc04), 0);
    assert_int_equal(pmap_set_node_lease(pm, 9, 1), LAPSE_ENOTFOUND);
    assert_int_equal(pmap_set_node_draining(pm, 1, 1), 0);
    assert_int_equal(pmap_set_node_removed(pm, 3), 0);
    assert_int_equal(pmap_set_node_removed(pm, 9), LAPSE_ENOTFOUND);
    table_schema t = {0};
    t.id = 1;
    snprintf(t.name, sizeof t.name, "users");
    snprintf(t.pk.name, sizeof t.pk.name, "id");
    t.pk.type = ATTR_S;
    t.partitions = 8;
    assert_int_equal(pmap_add_table(pm, &t), 0);
    t.id = 2;
    snprintf(t.name, sizeof t.name, "events");
    snprintf(t.sk.name, sizeof t.sk.name, "ts");
    t.sk.type = ATTR_N;
    t.partitions = 4;
    pmap_replicas parts[4] = {{.n = 1, .ids = {1}},
                              {.n = 2, .ids = {2, 1}, .in_sync = 1, .epoch = 4},
                              {.n = 3, .ids = {3, 1, 2}, .in_sync = 7, .epoch = 1},
                              {.n = 1, .ids = {2}}};
    assert_int_equal(pmap_add_table_assigned(pm, &t, parts), 0);
    return pm;
}

static void pmap_round_trip(void **state)
{
    (void)state;
    pmap *pm = sample_pmap();
    arena a;
    arena_init(&a);
    Lapse__PartitionMap *pb = wire_pmap_to_pb(&a, pm);
    assert_non_null(pb);
    size_t n = lapse__partition_map__get_packed_size(pb);
    uint8_t *buf = malloc(n);
    lapse__partition_map__pack(pb, buf);
    arena_fini(&a);
    Lapse__PartitionMap *un = lapse__partition_map__unpack(NULL, n, buf);
    free(buf);
    assert_non_null(un);

    pmap *back = NULL;
    char err[256] = "";
    assert_rv(wire_pmap_from_pb(un, &back, err, sizeof err), 0, err);
    lapse__partition_map__free_unpacked(un, NULL);
    assert_true(pmap_check(back));
    assert_int_equal(back->version, 42);
    assert_int_equal(back->nnodes, 3);
    for (size_t i = 0; i < pm->nnodes; i++) {
        const pmap_node *x = pmap_node_find(back, pm->nodes[i].id);
        assert_non_null(x);
        assert_string_equal(x->address, pm->nodes[i].address);
        assert_int_equal(x->state, pm->nodes[i].state);
        assert_int_equal(x->lease, pm->nodes[i].lease);
        assert_int_equal(x->draining, pm->nodes[i].draining);
        assert_int_equal(x->removed, pm->nodes[i].removed);
    }
    assert_true(pmap_node_find(back, 3)->removed && !pmap_node_find(back, 2)->removed);
    assert_int_equal(pmap_node_find(back, 2)->lease, 0x3f91a20ff23abc04);
    assert_int_equal(back->ntables, 2);
    for (size_t i = 0; i < pm->ntables; i++) {
        const pmap_table *t = &pm->tables[i];
        const pmap_table *u = pmap_table_find(back, t->schema.name);
        assert_non_null(u);
        assert_memory_equal(&t->schema, &u->schema, sizeof t->schema);
        for (uint32_t p = 0; p < t->schema.partitions; p++) {
            assert_int_equal(t->parts[p].n, u->parts[p].n);
            assert_memory_equal(t->parts[p].ids, u->parts[p].ids, t->parts[p].n * sizeof(uint32_t));
        }
    }
    assert_int_equal(pmap_owner(pmap_table_find(back, "events"), 2), 3);
    pmap_free(back);
    pmap_free(pm);
}

/* ---- rejections ---- */

static void value_without_type_is_rejected(void **state)
{
    (void)state;
    Lapse__AttributeValue v = LAPSE__ATTRIBUTE_VALUE__INIT;
    attr_value out;
    char err[256] = "";
    assert_int_equal(wire_value_from_pb(&v, &out, err, sizeof err), LAPSE_EINVAL);
    assert_non_null(strstr(err, "no type"));
    assert_int_equal(wire_value_from_pb(NULL, &out, err, sizeof err), LAPSE_EINVAL);

    /* ... also inside a list and inside an item */
    Lapse__AttributeValue *elems[] = {&v};
    Lapse__ListValue l = LAPSE__LIST_VALUE__INIT;
    l.values = elems;
    l.n_values = 1;
    Lapse__AttributeValue lv = LAPSE__ATTRIBUTE_VALUE__INIT;
    lv.value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_L;
    lv.l = &l;
    assert_int_equal(wire_value_from_pb(&lv, &out, err, sizeof err), LAPSE_EINVAL);

    Lapse__Attribute at = LAPSE__ATTRIBUTE__INIT;
    at.name = "a";
    at.value = &v;
    Lapse__Attribute *ats[] = {&at};
    Lapse__Item it = LAPSE__ITEM__INIT;
    it.attrs = ats;
    it.n_attrs = 1;
    item *o = NULL;
    assert_int_equal(wire_item_from_pb(&it, &o, err, sizeof err), LAPSE_EINVAL);
    assert_null(o);
    assert_non_null(strstr(err, "\"a\""));

    at.value = NULL; /* attribute without a value */
    assert_int_equal(wire_item_from_pb(&it, &o, err, sizeof err), LAPSE_EINVAL);
    assert_int_equal(wire_item_from_pb(NULL, &o, err, sizeof err), LAPSE_EINVAL);
}

static void bad_numbers_are_rejected(void **state)
{
    (void)state;
    const char *bad[] = {"",       "abc",   "1.2.3",
                         "--1",    "1e",    "0x10",
                         " 1",     "1 ",    "123456789012345678901234567890123456789",
                         "1E+999", "1E-999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Lapse__AttributeValue v = LAPSE__ATTRIBUTE_VALUE__INIT;
        v.value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_N;
        v.n = (char *)bad[i];
        attr_value out;
        char err[256] = "";
        if (wire_value_from_pb(&v, &out, err, sizeof err) != LAPSE_EINVAL) {
            fail_msg("number \"%s\" accepted", bad[i]);
        }
        assert_int_equal(out.type, ATTR_NULL); /* owns nothing */
    }
}

/* Sets cross the wire as themselves; an empty one, one with duplicates or
 * with an element of another type is refused. */
static void sets_round_trip_and_bad_ones_are_rejected(void **state)
{
    (void)state;
    item *it = item_new();
    static const attr_type types[] = {ATTR_SS, ATTR_NS, ATTR_BS};
    static const char *const names[] = {"ss", "ns", "bs"};
    for (int k = 0; k < 3; k++) {
        attr_value sv, e;
        item_value_init_set(&sv, types[k]);
        e = bytes_value(item_set_elem_type(types[k]), "1", 1);
        assert_int_equal(item_value_set_add(&sv, &e), 0);
        e = bytes_value(item_set_elem_type(types[k]), "22", 2);
        assert_int_equal(item_value_set_add(&sv, &e), 0);
        set(it, names[k], sv);
    }
    item *back = through_wire(it);
    assert_true(item_eq(it, back));
    assert_int_equal(item_get(back, "ns")->type, ATTR_NS);
    item_free(back);
    item_free(it);

    Lapse__AttributeValue one = LAPSE__ATTRIBUTE_VALUE__INIT, num = LAPSE__ATTRIBUTE_VALUE__INIT;
    one.value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_S;
    one.s = (ProtobufCBinaryData){1, (uint8_t *)"x"};
    num.value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_N;
    num.n = "1";
    Lapse__AttributeValue *dup[2] = {&one, &one}, *mixed[2] = {&one, &num};
    Lapse__ListValue l_empty = LAPSE__LIST_VALUE__INIT, l_dup = LAPSE__LIST_VALUE__INIT,
                     l_mixed = LAPSE__LIST_VALUE__INIT;
    l_dup.values = dup;
    l_dup.n_values = 2;
    l_mixed.values = mixed;
    l_mixed.n_values = 2;
    const Lapse__ListValue *bad[] = {&l_empty, &l_dup, &l_mixed};
    for (size_t i = 0; i < 3; i++) {
        Lapse__AttributeValue v = LAPSE__ATTRIBUTE_VALUE__INIT;
        v.value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_SS;
        v.ss = (Lapse__ListValue *)bad[i];
        attr_value out;
        char err[256] = "";
        assert_int_equal(wire_value_from_pb(&v, &out, err, sizeof err), LAPSE_EINVAL);
        assert_int_equal(out.type, ATTR_NULL);
        assert_non_null(strstr(err, "SS"));
    }
}

static void bad_names_are_rejected(void **state)
{
    (void)state;
    Lapse__AttributeValue v = LAPSE__ATTRIBUTE_VALUE__INIT;
    v.value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_BOOL;
    Lapse__Attribute a1 = LAPSE__ATTRIBUTE__INIT, a2 = LAPSE__ATTRIBUTE__INIT;
    a1.value = &v;
    a2.value = &v;
    Lapse__Attribute *ats[] = {&a1, &a2};
    Lapse__Item it = LAPSE__ITEM__INIT;
    it.attrs = ats;
    it.n_attrs = 2;
    item *o = NULL;
    char err[256] = "";

    a1.name = "ok";
    a2.name = ""; /* empty */
    assert_int_equal(wire_item_from_pb(&it, &o, err, sizeof err), LAPSE_EINVAL);
    assert_non_null(strstr(err, "empty"));

    a2.name = "ok"; /* duplicate */
    assert_int_equal(wire_item_from_pb(&it, &o, err, sizeof err), LAPSE_EINVAL);
    assert_non_null(strstr(err, "duplicate"));

    /* Duplicates among many names are found too (the sorted path). */
    enum { N = 100 };
    Lapse__Attribute many[N];
    Lapse__Attribute *mp[N];
    char names[N][8];
    for (int i = 0; i < N; i++) {
        lapse__attribute__init(&many[i]);
        snprintf(names[i], sizeof names[i], "n%d", i == N - 1 ? 17 : i);
        many[i].name = names[i];
        many[i].value = &v;
        mp[i] = &many[i];
    }
    it.attrs = mp;
    it.n_attrs = N;
    assert_int_equal(wire_item_from_pb(&it, &o, err, sizeof err), LAPSE_EINVAL);
    snprintf(names[N - 1], sizeof names[N - 1], "n%d", N - 1);
    assert_rv(wire_item_from_pb(&it, &o, err, sizeof err), 0, err);
    assert_int_equal(o->n, N);
    item_free(o);

    /* Inside a map value too. */
    Lapse__MapValue m = LAPSE__MAP_VALUE__INIT;
    a1.name = "x";
    a2.name = "";
    m.attrs = ats;
    m.n_attrs = 2;
    Lapse__AttributeValue mv = LAPSE__ATTRIBUTE_VALUE__INIT;
    mv.value_case = LAPSE__ATTRIBUTE_VALUE__VALUE_M;
    mv.m = &m;
    attr_value out;
    assert_int_equal(wire_value_from_pb(&mv, &out, err, sizeof err), LAPSE_EINVAL);
}

static void too_deep_is_rejected(void **state)
{
    (void)state;
    arena a;
    arena_init(&a);
    attr_value v;
    char err[256] = "";
    for (int maps = 0; maps <= 1; maps++) {
        Lapse__AttributeValue *pb = nested_pb(&a, ITEM_MAX_DEPTH + 1, maps);
        assert_int_equal(wire_value_from_pb(pb, &v, err, sizeof err), LAPSE_EINVAL);
        assert_non_null(strstr(err, "deeper"));
        assert_int_equal(v.type, ATTR_NULL);
    }
    arena_fini(&a);
}

static void nesting_check_stops_deep_frames(void **state)
{
    (void)state;
    /* A list nested 10000 deep: each level is AttributeValue.l (field 6)
     * holding ListValue.values (field 1). Built inside out. */
    enum { LEVELS = 10000 };
    size_t cap = LEVELS * 16 + 16;
    uint8_t *buf = malloc(cap);
    size_t start = cap, len = 0;
    for (int i = 0; i < LEVELS; i++) {
        /* wrap the current contents (buf[start..cap)) in a field with tag t */
        for (int k = 0; k < 2; k++) {
            uint8_t tag = k == 0 ? (1 << 3 | 2) : (6 << 3 | 2);
            uint8_t hdr[12];
            size_t h = 0;
            hdr[h++] = tag;
            uint64_t l = len;
            do {
                hdr[h++] = (uint8_t)((l & 0x7f) | (l > 0x7f ? 0x80 : 0));
                l >>= 7;
            } while (l != 0);
            start -= h;
            memcpy(buf + start, hdr, h);
            len += h;
        }
    }
    assert_int_equal(
        wire_check_nesting(&lapse__attribute_value__descriptor, buf + start, len, WIRE_MAX_NESTING),
        LAPSE_EPROTO);
    /* A shallow, valid message passes; bad framing does not. */
    /* The innermost 16 levels alone are fine (32 bytes: 16 two-byte headers). */
    assert_int_equal(wire_check_nesting(&lapse__attribute_value__descriptor, buf + cap - 32, 32,
                                        WIRE_MAX_NESTING),
                     0);
    const uint8_t ok[] = {0x0a, 0x02, 'h', 'i'}; /* s = "hi" */
    assert_int_equal(
        wire_check_nesting(&lapse__attribute_value__descriptor, ok, sizeof ok, WIRE_MAX_NESTING),
        0);
    const uint8_t trunc[] = {0x0a, 0x05, 'h', 'i'};
    assert_int_equal(wire_check_nesting(&lapse__attribute_value__descriptor, trunc, sizeof trunc,
                                        WIRE_MAX_NESTING),
                     LAPSE_EPROTO);
    const uint8_t group[] = {0x0b};
    assert_int_equal(wire_check_nesting(&lapse__attribute_value__descriptor, group, sizeof group,
                                        WIRE_MAX_NESTING),
                     LAPSE_EPROTO);
    assert_int_equal(wire_check_nesting(&lapse__request__descriptor, NULL, 0, WIRE_MAX_NESTING), 0);
    free(buf);
}

static void bad_schemas_are_rejected(void **state)
{
    (void)state;
    Lapse__KeyDef pk = LAPSE__KEY_DEF__INIT, sk = LAPSE__KEY_DEF__INIT;
    Lapse__TableSchema s = LAPSE__TABLE_SCHEMA__INIT;
    table_schema out;
    char err[256] = "";
    s.name = "t1x";
    s.partitions = 4;
    assert_int_equal(wire_schema_from_pb(&s, &out, err, sizeof err), LAPSE_EINVAL); /* no pk */
    s.partition_key = &pk;
    pk.name = "id";
    pk.type = LAPSE__KEY_TYPE__KEY_NONE;
    assert_int_equal(wire_schema_from_pb(&s, &out, err, sizeof err), LAPSE_EINVAL);
    pk.type = (Lapse__KeyType)9; /* out of range, as an open enum allows */
    assert_int_equal(wire_schema_from_pb(&s, &out, err, sizeof err), LAPSE_EINVAL);
    pk.type = LAPSE__KEY_TYPE__KEY_S;
    assert_rv(wire_schema_from_pb(&s, &out, err, sizeof err), 0, err);
    pk.name = "";
    assert_int_equal(wire_schema_from_pb(&s, &out, err, sizeof err), LAPSE_EINVAL);
    pk.name = "id";
    s.sort_key = &sk;
    sk.name = "id"; /* same as the partition key */
    sk.type = LAPSE__KEY_TYPE__KEY_N;
    assert_int_equal(wire_schema_from_pb(&s, &out, err, sizeof err), LAPSE_EINVAL);
    sk.name = "ts";
    sk.type = LAPSE__KEY_TYPE__KEY_NONE; /* named but untyped */
    assert_int_equal(wire_schema_from_pb(&s, &out, err, sizeof err), LAPSE_EINVAL);
    s.sort_key = NULL;
    char longname[SCHEMA_MAX_NAME + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    s.name = longname;
    assert_int_equal(wire_schema_from_pb(&s, &out, err, sizeof err), LAPSE_EINVAL);
    s.name = "";
    assert_int_equal(wire_schema_from_pb(&s, &out, err, sizeof err), LAPSE_EINVAL);
    assert_int_equal(wire_schema_from_pb(NULL, &out, err, sizeof err), LAPSE_EINVAL);
}

/* Encodes the sample map, lets mutate break one field, and expects the
 * decoder to refuse it. */
static void expect_pmap_rejected(void (*mutate)(Lapse__PartitionMap *, arena *), const char *what)
{
    pmap *pm = sample_pmap();
    arena a;
    arena_init(&a);
    Lapse__PartitionMap *pb = wire_pmap_to_pb(&a, pm);
    mutate(pb, &a);
    pmap *out = NULL;
    char err[256] = "";
    int rv = wire_pmap_from_pb(pb, &out, err, sizeof err);
    if (rv != LAPSE_EINVAL) {
        fail_msg("%s: got %d, want EINVAL", what, rv);
    }
    assert_null(out);
    arena_fini(&a);
    pmap_free(pm);
}

static void m_unknown_node(Lapse__PartitionMap *pb, arena *a)
{
    (void)a;
    pb->tables[0]->partitions[0]->node_ids[0] = 99;
}
static void m_no_replicas(Lapse__PartitionMap *pb, arena *a)
{
    (void)a;
    pb->tables[0]->partitions[1]->n_node_ids = 0;
}
static void m_too_many_replicas(Lapse__PartitionMap *pb, arena *a)
{
    uint32_t *ids = arena_alloc(a, 4 * sizeof *ids);
    ids[0] = 1, ids[1] = 2, ids[2] = 3, ids[3] = 1;
    pb->tables[0]->partitions[1]->node_ids = ids;
    pb->tables[0]->partitions[1]->n_node_ids = 4;
}
static void m_repeated_replica(Lapse__PartitionMap *pb, arena *a)
{
    uint32_t *ids = arena_alloc(a, 2 * sizeof *ids);
    ids[0] = 2, ids[1] = 2;
    pb->tables[0]->partitions[1]->node_ids = ids;
    pb->tables[0]->partitions[1]->n_node_ids = 2;
}
static void m_count_mismatch(Lapse__PartitionMap *pb, arena *a)
{
    (void)a;
    pb->tables[0]->n_partitions--;
}
static void m_not_pow2(Lapse__PartitionMap *pb, arena *a)
{
    (void)a;
    pb->tables[0]->schema->partitions = 6;
    pb->tables[0]->n_partitions = 6;
}
static void m_dup_node(Lapse__PartitionMap *pb, arena *a)
{
    (void)a;
    pb->nodes[1]->id = pb->nodes[0]->id;
}
static void m_zero_node(Lapse__PartitionMap *pb, arena *a)
{
    (void)a;
    pb->nodes[2]->id = 0;
}
static void m_bad_state(Lapse__PartitionMap *pb, arena *a)
{
    (void)a;
    pb->nodes[0]->state = (Lapse__NodeState)7;
}
static void m_long_address(Lapse__PartitionMap *pb, arena *a)
{
    char *s = arena_alloc(a, PMAP_MAX_ADDR + 1);
    memset(s, 'x', PMAP_MAX_ADDR);
    pb->nodes[0]->address = s;
}
static void m_dup_table(Lapse__PartitionMap *pb, arena *a)
{
    (void)a;
    pb->tables[1] = pb->tables[0];
}
static void m_no_schema(Lapse__PartitionMap *pb, arena *a)
{
    (void)a;
    pb->tables[1]->schema = NULL;
}
static void m_no_table_id(Lapse__PartitionMap *pb, arena *a)
{
    (void)a;
    pb->tables[1]->schema->id = 0;
}
static void m_bad_table_name(Lapse__PartitionMap *pb, arena *a)
{
    (void)a;
    pb->tables[1]->schema->name = "a b";
}

static void bad_pmaps_are_rejected(void **state)
{
    (void)state;
    expect_pmap_rejected(m_unknown_node, "unknown node");
    expect_pmap_rejected(m_no_replicas, "no replicas");
    expect_pmap_rejected(m_too_many_replicas, "too many replicas");
    expect_pmap_rejected(m_repeated_replica, "repeated replica");
    expect_pmap_rejected(m_count_mismatch, "partition count mismatch");
    expect_pmap_rejected(m_not_pow2, "partitions not a power of two");
    expect_pmap_rejected(m_dup_node, "duplicate node");
    expect_pmap_rejected(m_zero_node, "node id 0");
    expect_pmap_rejected(m_bad_state, "bad node state");
    expect_pmap_rejected(m_long_address, "long address");
    expect_pmap_rejected(m_dup_table, "duplicate table");
    expect_pmap_rejected(m_no_schema, "table without schema");
    expect_pmap_rejected(m_no_table_id, "table without id");
    expect_pmap_rejected(m_bad_table_name, "bad table name");

    pmap *out = NULL;
    char err[128];
    assert_int_equal(wire_pmap_from_pb(NULL, &out, err, sizeof err), LAPSE_EINVAL);
}

static void status_codes_map_one_to_one(void **state)
{
    (void)state;
    for (int i = 0; i < LAPSE_STATUS_COUNT; i++) {
        assert_int_equal(wire_status_from_pb(i), i);
    }
    assert_int_equal(LAPSE__STATUS__EUSAGE, LAPSE_EUSAGE);
    assert_int_equal(LAPSE__STATUS__EWRONGNODE, LAPSE_EWRONGNODE);
    assert_int_equal(wire_status_from_pb(LAPSE_STATUS_COUNT), LAPSE_EPROTO);
    assert_int_equal(wire_status_from_pb(-1), LAPSE_EPROTO);
    assert_int_equal(wire_status_from_pb(1 << 30), LAPSE_EPROTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(item_round_trip_keeps_every_type),
        cmocka_unit_test(empty_item_round_trips),
        cmocka_unit_test(value_to_pb_sets_the_oneof),
        cmocka_unit_test(deepest_allowed_value_round_trips),
        cmocka_unit_test(schema_round_trip),
        cmocka_unit_test(pmap_round_trip),
        cmocka_unit_test(value_without_type_is_rejected),
        cmocka_unit_test(bad_numbers_are_rejected),
        cmocka_unit_test(sets_round_trip_and_bad_ones_are_rejected),
        cmocka_unit_test(bad_names_are_rejected),
        cmocka_unit_test(too_deep_is_rejected),
        cmocka_unit_test(nesting_check_stops_deep_frames),
        cmocka_unit_test(bad_schemas_are_rejected),
        cmocka_unit_test(bad_pmaps_are_rejected),
        cmocka_unit_test(status_codes_map_one_to_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
