/*
 * item_testutil.h: item helpers for unit tests (header-only: include it
 * after <cmocka.h>, whose assertions it uses). Not part of lapse_common.
 */
#ifndef LAPSE_ITEM_TESTUTIL_H
#define LAPSE_ITEM_TESTUTIL_H

#include <stdarg.h>
#include <string.h>

#include "item.h"

/* Encodes into out (buf_init'ed here; caller buf_free) an item of n S
 * attributes given as name, value, name, value, ... */
static inline void item_testutil_encode_s(buf *out, int n, ...)
{
    item *it = item_new();
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *name = va_arg(ap, const char *);
        const char *text = va_arg(ap, const char *);
        attr_value v;
        assert_int_equal(item_value_init_bytes(&v, ATTR_S, text, strlen(text)), 0);
        assert_int_equal(item_set(it, name, &v), 0);
    }
    va_end(ap);
    buf_init(out);
    assert_int_equal(item_encode(it, out), 0);
    item_free(it);
}

#endif
