/*
 * wire_stream_test.c: a stored stream record as a StreamRecord
 * (wire_stream_record_to_pb): every event with its images, a TTL delete's
 * fields, size_bytes, and damaged bytes refused with LAPSE_ECORRUPT at every
 * truncation (never a crash or an over-read: the ASan build checks).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../common/item_testutil.h"
#include "../common/item.h"
#include "../common/lapse_err.h"
#include "../common/change.h"
#include "wire.h"

/* The S value of name in it, or NULL. */
static const char *s_of(const Lapse__Item *it, const char *name, char *out, size_t len)
{
    for (size_t i = 0; it != NULL && i < it->n_attrs; i++) {
        if (strcmp(it->attrs[i]->name, name) == 0) {
            snprintf(out, len, "%.*s", (int)it->attrs[i]->value->s.len,
                     (const char *)it->attrs[i]->value->s.data);
            return out;
        }
    }
    return NULL;
}

typedef struct sample {
    buf keys, old_img, new_img, enc;
} sample;

/* kind 0 INSERT, 1 MODIFY, 2 REMOVE by TTL. */
static void make(sample *s, int kind)
{
    item_testutil_encode_s(&s->keys, 1, "pk", "alice");
    item_testutil_encode_s(&s->old_img, 2, "pk", "alice", "v", "old");
    item_testutil_encode_s(&s->new_img, 2, "pk", "alice", "v", "new");
    buf_init(&s->enc);
    change_record r;
    memset(&r, 0, sizeof(r));
    r.table_id = 7;
    r.part = 3;
    r.seq = 41;
    r.stream_seq = 17;
    r.commit_ms = 1790000003412LL;
    r.event = kind == 0 ? CHANGE_INSERT : kind == 1 ? CHANGE_MODIFY : CHANGE_REMOVE;
    r.principal = kind == 2 ? CHANGE_TTL : CHANGE_USER;
    r.keys = (change_bytes){s->keys.data, s->keys.len};
    if (kind != 0) {
        r.old_image = (change_bytes){s->old_img.data, s->old_img.len};
    }
    if (kind != 2) {
        r.new_image = (change_bytes){s->new_img.data, s->new_img.len};
    }
    if (kind == 2) {
        r.ttl_attr = (change_bytes){(const uint8_t *)"exp", 3};
        r.expires_at_ms = 1790000000000LL;
        r.deleted_at_ms = 1790000003412LL;
    }
    assert_int_equal(change_encode(&r, &s->enc), 0);
}

static void sample_fini(sample *s)
{
    buf_fini(&s->keys);
    buf_fini(&s->old_img);
    buf_fini(&s->new_img);
    buf_fini(&s->enc);
}

static void test_events(void **state)
{
    (void)state;
    static const Lapse__StreamRecord__EventName names[] = {
        LAPSE__STREAM_RECORD__EVENT_NAME__INSERT, LAPSE__STREAM_RECORD__EVENT_NAME__MODIFY,
        LAPSE__STREAM_RECORD__EVENT_NAME__REMOVE};
    for (int kind = 0; kind < 3; kind++) {
        sample s;
        arena a;
        arena_init(&a);
        make(&s, kind);
        Lapse__StreamRecord *r = NULL;
        char text[32];
        assert_int_equal(
            wire_stream_record_to_pb(&a, s.enc.data, s.enc.len, STREAM_VIEW_NEW_AND_OLD, &r), 0);
        assert_int_equal(r->sequence_number, 17);
        assert_int_equal(r->shard, 3);
        assert_int_equal(r->event_name, names[kind]);
        assert_int_equal(r->approximate_creation_ms, 1790000003412LL);
        assert_string_equal(s_of(r->keys, "pk", text, sizeof(text)), "alice");
        assert_int_equal(r->old_image != NULL, kind != 0);
        assert_int_equal(r->new_image != NULL, kind != 2);
        if (kind != 0) {
            assert_string_equal(s_of(r->old_image, "v", text, sizeof(text)), "old");
        }
        if (kind != 2) {
            assert_string_equal(s_of(r->new_image, "v", text, sizeof(text)), "new");
        }
        size_t want =
            s.keys.len + (kind != 0 ? s.old_img.len : 0) + (kind != 2 ? s.new_img.len : 0);
        assert_int_equal(r->size_bytes, want);
        assert_int_equal(r->ttl_delete, kind == 2);
        if (kind == 2) {
            assert_string_equal(r->ttl_attribute, "exp");
            assert_int_equal(r->ttl_expires_at_ms, 1790000000000LL);
            assert_int_equal(r->ttl_deleted_at_ms, 1790000003412LL);
        } else {
            assert_int_equal(r->ttl_expires_at_ms, 0);
        }
        /* It packs (every string is set). */
        size_t len = lapse__stream_record__get_packed_size(r);
        uint8_t *packed = malloc(len);
        assert_non_null(packed);
        lapse__stream_record__pack(r, packed);
        free(packed);
        /* A view leaves out what it hides; the size stays the record's. */
        static const struct {
            stream_view view;
            int old_shown, new_shown;
        } views[] = {{STREAM_VIEW_KEYS_ONLY, 0, 0},
                     {STREAM_VIEW_NEW_IMAGE, 0, 1},
                     {STREAM_VIEW_OLD_IMAGE, 1, 0}};
        for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) {
            Lapse__StreamRecord *rv = NULL;
            assert_int_equal(
                wire_stream_record_to_pb(&a, s.enc.data, s.enc.len, views[v].view, &rv), 0);
            assert_non_null(rv->keys);
            assert_int_equal(rv->old_image != NULL, views[v].old_shown && kind != 0);
            assert_int_equal(rv->new_image != NULL, views[v].new_shown && kind != 2);
            assert_int_equal(rv->size_bytes, want);
        }
        arena_fini(&a);
        sample_fini(&s);
    }
}

static void test_damaged(void **state)
{
    (void)state;
    sample s;
    make(&s, 1);
    for (size_t cut = 0; cut < s.enc.len; cut++) {
        arena a;
        arena_init(&a);
        Lapse__StreamRecord *r = (Lapse__StreamRecord *)1;
        uint8_t *copy = malloc(cut ? cut : 1);
        assert_non_null(copy);
        memcpy(copy, s.enc.data, cut);
        assert_int_equal(wire_stream_record_to_pb(&a, copy, cut, STREAM_VIEW_NEW_AND_OLD, &r),
                         LAPSE_ECORRUPT);
        assert_null(r);
        free(copy);
        arena_fini(&a);
    }
    sample_fini(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_damaged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
