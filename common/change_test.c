/*
 * change_test.c: the change record encoding (change.h): round trips of
 * every event and principal, the encoder refusing records that break the
 * invariants, and the decoder against malformed input: every truncation,
 * trailing bytes, every single-byte corruption and seeded random garbling
 * must give LAPSE_ECORRUPT or a record that re-encodes to the very same
 * bytes (the format is canonical), never a crash or an over-read (the ASan
 * build checks that).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "item_testutil.h"
#include "item.h"
#include "lapse_err.h"
#include "change.h"

typedef struct sample {
    buf keys, old_img, new_img, enc;
    change_record r;
} sample;

/* A record of each kind: 0 INSERT, 1 MODIFY, 2 REMOVE by a user, 3 REMOVE
 * by TTL, 4 REMOVE without an old image. */
static void make(sample *s, int kind)
{
    item_testutil_encode_s(&s->keys, 2, "Pk", "alice", "Sk", "1");
    item_testutil_encode_s(&s->old_img, 3, "Pk", "alice", "Sk", "1", "V", "old");
    item_testutil_encode_s(&s->new_img, 3, "Pk", "alice", "Sk", "1", "V", "new");
    buf_init(&s->enc);
    change_record *r = &s->r;
    memset(r, 0, sizeof(*r));
    r->table_id = 0xA1B2C3D4u;
    r->part = 17;
    r->seq = 0x0102030405060708ull;
    r->stream_seq = kind == 3 ? 0 : 99;
    r->commit_ms = 1717171717171;
    r->principal = CHANGE_USER;
    r->keys = (change_bytes){s->keys.data, s->keys.len};
    switch (kind) {
    case 0:
        r->event = CHANGE_INSERT;
        r->new_image = (change_bytes){s->new_img.data, s->new_img.len};
        break;
    case 1:
        r->event = CHANGE_MODIFY;
        r->old_image = (change_bytes){s->old_img.data, s->old_img.len};
        r->new_image = (change_bytes){s->new_img.data, s->new_img.len};
        break;
    case 3:
        r->principal = CHANGE_TTL;
        r->ttl_attr = (change_bytes){(const uint8_t *)"ExpiresAt", 9};
        r->expires_at_ms = 1717000000000;
        r->deleted_at_ms = 1717000000456;
        /* fall through */
    case 2:
        r->event = CHANGE_REMOVE;
        r->old_image = (change_bytes){s->old_img.data, s->old_img.len};
        break;
    default:
        r->event = CHANGE_REMOVE;
        break;
    }
    assert_int_equal(change_encode(r, &s->enc), 0);
}

static void unmake(sample *s)
{
    buf_fini(&s->keys);
    buf_fini(&s->old_img);
    buf_fini(&s->new_img);
    buf_fini(&s->enc);
}

static void bytes_equal(change_bytes a, change_bytes b)
{
    assert_true((a.data == NULL) == (b.data == NULL));
    assert_int_equal(a.len, b.len);
    if (a.len > 0) {
        assert_memory_equal(a.data, b.data, a.len);
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    for (int kind = 0; kind < 5; kind++) {
        sample s;
        make(&s, kind);
        change_record d;
        assert_int_equal(change_decode(s.enc.data, s.enc.len, &d), 0);
        assert_int_equal(d.table_id, s.r.table_id);
        assert_int_equal(d.part, s.r.part);
        assert_true(d.seq == s.r.seq);
        assert_true(d.stream_seq == s.r.stream_seq);
        assert_true(d.commit_ms == s.r.commit_ms);
        assert_int_equal(d.event, s.r.event);
        assert_int_equal(d.principal, s.r.principal);
        bytes_equal(d.keys, s.r.keys);
        bytes_equal(d.old_image, s.r.old_image);
        bytes_equal(d.new_image, s.r.new_image);
        if (kind == 3) {
            bytes_equal(d.ttl_attr, s.r.ttl_attr);
            assert_true(d.expires_at_ms == s.r.expires_at_ms);
            assert_true(d.deleted_at_ms == s.r.deleted_at_ms);
        } else {
            assert_null(d.ttl_attr.data);
        }
        /* The head alone. */
        change_record h;
        assert_int_equal(change_decode_head(s.enc.data, s.enc.len, &h), 0);
        assert_true(h.seq == s.r.seq && h.commit_ms == s.r.commit_ms);
        assert_null(h.keys.data);
        /* Canonical: decoding and encoding again gives the same bytes. */
        buf again;
        buf_init(&again);
        assert_int_equal(change_encode(&d, &again), 0);
        assert_int_equal(again.len, s.enc.len);
        assert_memory_equal(again.data, s.enc.data, again.len);
        buf_fini(&again);
        unmake(&s);
    }
}

static void test_encode_refuses_bad_records(void **state)
{
    (void)state;
    sample s;
    make(&s, 1);
    buf out;
    buf_init(&out);
    change_record r = s.r;
    r.event = CHANGE_INSERT; /* with an old image */
    assert_int_equal(change_encode(&r, &out), LAPSE_EINVAL);
    r = s.r;
    r.event = CHANGE_REMOVE; /* with a new image */
    assert_int_equal(change_encode(&r, &out), LAPSE_EINVAL);
    r = s.r;
    r.principal = CHANGE_TTL; /* TTL but not a REMOVE, no attribute */
    assert_int_equal(change_encode(&r, &out), LAPSE_EINVAL);
    r = s.r;
    r.keys.data = NULL;
    assert_int_equal(change_encode(&r, &out), LAPSE_EINVAL);
    r = s.r;
    r.seq = 0;
    assert_int_equal(change_encode(&r, &out), LAPSE_EINVAL);
    r = s.r;
    r.event = (change_event)9;
    assert_int_equal(change_encode(&r, &out), LAPSE_EINVAL);
    assert_int_equal(out.len, 0); /* nothing appended on error */
    buf_fini(&out);
    unmake(&s);
}

/* Decodes garbled bytes: ECORRUPT, or a record that encodes back to them. */
static void decode_garbled(const uint8_t *p, size_t len)
{
    /* A copy of exactly len bytes, so ASan sees any over-read. */
    uint8_t *copy = malloc(len > 0 ? len : 1);
    assert_non_null(copy);
    memcpy(copy, p, len);
    change_record d;
    int rv = change_decode(copy, len, &d);
    if (rv == 0) {
        buf again;
        buf_init(&again);
        assert_int_equal(change_encode(&d, &again), 0);
        assert_int_equal(again.len, len);
        assert_memory_equal(again.data, copy, len);
        buf_fini(&again);
    } else {
        assert_int_equal(rv, LAPSE_ECORRUPT);
    }
    change_record h;
    rv = change_decode_head(copy, len, &h);
    assert_true(rv == 0 || rv == LAPSE_ECORRUPT);
    free(copy);
}

static void test_malformed_input(void **state)
{
    (void)state;
    unsigned seed = 4242;
    for (int kind = 0; kind < 5; kind++) {
        sample s;
        make(&s, kind);
        const uint8_t *p = s.enc.data;
        size_t n = s.enc.len;
        change_record d;
        /* Every proper prefix is truncated. */
        for (size_t len = 0; len < n; len++) {
            uint8_t *copy = malloc(len > 0 ? len : 1);
            memcpy(copy, p, len);
            assert_int_equal(change_decode(copy, len, &d), LAPSE_ECORRUPT);
            free(copy);
        }
        /* Trailing bytes. */
        buf longer;
        buf_init(&longer);
        assert_int_equal(buf_append(&longer, p, n), 0);
        assert_int_equal(buf_append_byte(&longer, 0), 0);
        assert_int_equal(change_decode(longer.data, longer.len, &d), LAPSE_ECORRUPT);
        buf_fini(&longer);
        /* An unknown version. */
        uint8_t *copy = malloc(n);
        memcpy(copy, p, n);
        copy[0] = 2;
        assert_int_equal(change_decode(copy, n, &d), LAPSE_ECORRUPT);
        assert_int_equal(change_decode_head(copy, n, &d), LAPSE_ECORRUPT);
        /* Every byte replaced by a few values, one at a time. */
        static const uint8_t vals[] = {0x00, 0x01, 0x02, 0x03, 0x7F, 0x80, 0xFF};
        for (size_t i = 0; i < n; i++) {
            for (size_t v = 0; v < sizeof(vals); v++) {
                memcpy(copy, p, n);
                copy[i] = vals[v];
                decode_garbled(copy, n);
            }
        }
        /* Random garbling: a few bytes flipped, truncated or not. */
        for (int round = 0; round < 3000; round++) {
            memcpy(copy, p, n);
            int flips = 1 + rand_r(&seed) % 4;
            for (int j = 0; j < flips; j++) {
                copy[rand_r(&seed) % n] ^= (uint8_t)(1 + rand_r(&seed) % 255);
            }
            size_t len = rand_r(&seed) % 4 == 0 ? (size_t)rand_r(&seed) % n : n;
            decode_garbled(copy, len);
        }
        free(copy);
        unmake(&s);
    }
    /* NULL and garbage that is not a record at all. */
    change_record d;
    assert_int_equal(change_decode(NULL, 0, &d), LAPSE_ECORRUPT);
    assert_int_equal(change_decode_head(NULL, 0, &d), LAPSE_ECORRUPT);
    uint8_t junk[64];
    for (int round = 0; round < 2000; round++) {
        for (size_t i = 0; i < sizeof(junk); i++) {
            junk[i] = (uint8_t)rand_r(&seed);
        }
        junk[0] = CHANGE_FORMAT_V1;
        decode_garbled(junk, (size_t)rand_r(&seed) % sizeof(junk));
    }
}

static void test_list(void **state)
{
    (void)state;
    change_list l;
    change_list_init(&l);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(change_list_push(&l, (uint64_t)i + 1, "abcdef", (size_t)(i % 7)), 0);
    }
    assert_int_equal(l.n, 100);
    assert_true(l.v[99].seq == 100);
    size_t bytes = 0;
    for (int i = 0; i < 100; i++) {
        bytes += (size_t)(i % 7);
    }
    assert_int_equal(l.bytes, bytes);
    change_list_fini(&l);
    assert_int_equal(l.n, 0);
    change_list_fini(&l); /* twice is fine */
    change_list_fini(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_encode_refuses_bad_records),
        cmocka_unit_test(test_malformed_input),
        cmocka_unit_test(test_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
