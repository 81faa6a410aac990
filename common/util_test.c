/* util_test: the small foundations: buf, arena, clocks, log levels and the
 * status names. */
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "arena.h"
#include "buf.h"
#include "clock.h"
#include "lapse_err.h"
#include "log.h"

static void buf_basics(void **state)
{
    (void)state;
    buf b;
    buf_init(&b);
    assert_null(b.data);
    char *empty = buf_detach(&b);
    assert_string_equal(empty, "");
    free(empty);
    assert_int_equal(buf_append_str(&b, "ab"), 0);
    assert_int_equal(buf_append_byte(&b, 'c'), 0);
    assert_int_equal(buf_printf(&b, "-%d-%s", 42, "x"), 0);
    assert_int_equal(b.len, 8);
    assert_string_equal((char *)b.data, "abc-42-x"); /* NUL-terminated */
    assert_int_equal(buf_append_u32be(&b, 0x01020304), 0);
    assert_int_equal(buf_append_u64be(&b, 0x1122334455667788ULL), 0);
    assert_int_equal(buf_get_u32be(b.data + 8), 0x01020304);
    assert_true(buf_get_u64be(b.data + 12) == 0x1122334455667788ULL);
    uint8_t be[8];
    buf_put_u64be(be, 0x1122334455667788ULL);
    assert_memory_equal(be, b.data + 12, 8);
    buf_put_u32be(be, 0x01020304);
    assert_memory_equal(be, b.data + 8, 4);
    assert_int_equal(b.data[b.len], 0);
    /* growth keeps the contents and the terminator */
    for (int i = 0; i < 10000; i++) {
        assert_int_equal(buf_append(&b, "0123456789", 10), 0);
    }
    assert_int_equal(b.len, 20 + 100000);
    assert_true(b.cap >= b.len);
    assert_int_equal(b.data[b.len], 0);
    assert_memory_equal(b.data, "abc-42-x", 8);
    buf_clear(&b);
    assert_int_equal(b.len, 0);
    assert_int_equal(buf_append_str(&b, "z"), 0);
    char *s = buf_detach(&b);
    assert_string_equal(s, "z");
    assert_null(b.data);
    free(s);
    buf_fini(&b);
    buf_fini(NULL);
}

static void arena_basics(void **state)
{
    (void)state;
    arena a;
    arena_init(&a);
    for (size_t n = 0; n < 3000; n += 7) {
        unsigned char *p = arena_alloc(&a, n);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % alignof(max_align_t), 0);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(p[i], 0);
        }
        memset(p, 0xAB, n); /* ASan catches an overlap or overrun */
    }
    unsigned char *big = arena_alloc(&a, 1 << 20);
    assert_non_null(big);
    assert_int_equal(big[(1 << 20) - 1], 0);
    char *s = arena_strdup(&a, "hello");
    assert_string_equal(s, "hello");
    char *t = arena_strndup(&a, "hello", 3);
    assert_string_equal(t, "hel");
    int *m = arena_memdup(&a, (int[]){1, 2, 3}, 3 * sizeof(int));
    assert_int_equal(m[2], 3);
    arena_fini(&a);
    arena_fini(&a); /* idempotent */
}

static void clocks(void **state)
{
    (void)state;
    clock_mono a = clock_mono_now();
    clock_sleep_ms(20);
    clock_mono b = clock_mono_now();
    assert_true(b.ms - a.ms >= 19);
    clock_mono d = clock_mono_after_ms(10000);
    assert_true(clock_mono_remaining_ms(d) > 9000);
    assert_int_equal(clock_mono_remaining_ms(a), 0);

    clock_wall w0 = clock_wall_now();
    assert_true(w0.ms > 1600000000000LL); /* after 2020 */
    clock_wall_set_offset_ms(3600 * 1000);
    clock_wall w1 = clock_wall_now();
    assert_true(w1.ms - w0.ms >= 3600 * 1000 && w1.ms - w0.ms < 3600 * 1000 + 5000);
    clock_wall_set_offset_ms(0);
    assert_true(clock_wall_now().ms - w0.ms < 5000);
}

static void log_and_errors(void **state)
{
    (void)state;
    enum log_level l;
    assert_int_equal(log_level_parse("warn", &l), 0);
    assert_int_equal(l, LOG_WARN);
    assert_int_equal(log_level_parse("debug", &l), 0);
    assert_int_equal(l, LOG_DEBUG);
    assert_int_equal(log_level_parse("loud", &l), LAPSE_EINVAL);
    log_init("util_test", LOG_INFO);
    log_info("a line with time, level and component: %d", 1);
    log_debug("not printed");

    assert_string_equal(lapse_strerror(LAPSE_OK), "ok");
    assert_string_equal(lapse_strerror(LAPSE_EINVAL), "invalid argument");
    assert_string_equal(lapse_strerror(LAPSE_ECONDITION), "conditional check failed");
    assert_string_equal(lapse_strerror(LAPSE_EWRONGNODE), "wrong node");
    for (int c = 0; c < LAPSE_STATUS_COUNT; c++) {
        assert_non_null(lapse_strerror(c));
        assert_string_not_equal(lapse_strerror(c), "unknown error");
    }
    assert_string_equal(lapse_strerror(-1), "unknown error");
    assert_string_equal(lapse_strerror(LAPSE_STATUS_COUNT), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buf_basics),
        cmocka_unit_test(arena_basics),
        cmocka_unit_test(clocks),
        cmocka_unit_test(log_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
