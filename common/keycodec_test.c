/* keycodec_test: key encodings round-trip and sort exactly like the values,
 * proven over many random values (fixed seeds) per type. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "keycodec.h"
#include "lapse_err.h"
#include "number.h"

#define NVALUES 20000
#define NPAIRS 200000

/* xorshift64*: a small deterministic generator, so a failure reproduces. */
static uint64_t rng_state;

static void rng_seed(uint64_t s)
{
    rng_state = s * 0x9E3779B97F4A7C15ULL + 1;
}

static uint32_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

static uint32_t rng_below(uint32_t n)
{
    return rng() % n;
}

typedef struct sample {
    attr_value v;
    number num; /* N only */
    buf enc;
} sample;

static void samples_free(sample *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        item_value_fini(&s[i].v);
        buf_fini(&s[i].enc);
    }
    free(s);
}

static int enc_cmp(const buf *a, const buf *b)
{
    size_t m = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->data, b->data, m);
    if (c != 0) {
        return c < 0 ? -1 : 1;
    }
    return a->len == b->len ? 0 : (a->len < b->len ? -1 : 1);
}

static int bytes_cmp(const attr_value *a, const attr_value *b)
{
    size_t m = a->u.bytes.len < b->u.bytes.len ? a->u.bytes.len : b->u.bytes.len;
    int c = m == 0 ? 0 : memcmp(a->u.bytes.ptr, b->u.bytes.ptr, m);
    if (c != 0) {
        return c < 0 ? -1 : 1;
    }
    return a->u.bytes.len == b->u.bytes.len ? 0 : (a->u.bytes.len < b->u.bytes.len ? -1 : 1);
}

static int sign(int c)
{
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

/* ---- value generators ---- */

/* A random N as text, in a random spelling, biased toward values that are
 * close to each other: few exponents, shared digit prefixes, the extremes. */
static void gen_number_text(char *out, size_t outlen)
{
    static const int exps[] = {-129, -128, -5, -1, 0, 1, 2, 3, 38, 125, 126};
    if (rng_below(40) == 0) {
        snprintf(out, outlen, "%s", rng_below(2) ? "0" : "-0.000");
        return;
    }
    int neg = rng_below(2);
    int nd = rng_below(4) == 0 ? 38 : 1 + (int)rng_below(rng_below(2) ? 4 : 38);
    char digits[NUMBER_MAX_DIGITS + 1];
    for (int i = 0; i < nd; i++) {
        /* a small alphabet makes shared prefixes common */
        digits[i] = rng_below(3) ? (char)('0' + rng_below(3) * 4 + 1) : (char)('0' + rng_below(10));
    }
    digits[0] = digits[0] == '0' ? '1' : digits[0];
    digits[nd - 1] = digits[nd - 1] == '0' ? '9' : digits[nd - 1];
    digits[nd] = 0;
    int exp =
        rng_below(2) ? exps[rng_below(sizeof(exps) / sizeof(exps[0]))] : -129 + (int)rng_below(256);
    /* value = 0.digits * 10^exp, written as d1.d2...dn E (exp-1), or with a
     * trailing-zero or leading-zero spelling */
    switch (rng_below(3)) {
    case 0:
        snprintf(out, outlen, "%s%c%s%s%sE%d", neg ? "-" : "", digits[0], nd > 1 ? "." : "",
                 digits + 1, "", exp - 1);
        break;
    case 1:
        snprintf(out, outlen, "%s0.%s000e%+d", neg ? "-" : "", digits, exp);
        break;
    default:
        snprintf(out, outlen, "%s00%s0E%d", neg ? "-" : "", digits, exp - nd - 1);
        break;
    }
}

static void gen_bytes(char *out, size_t *len)
{
    static const char alphabet[] = {0x00, 0x01, (char)0xFF, 'a', 'b', (char)0xFE};
    size_t n = rng_below(9);
    for (size_t i = 0; i < n; i++) {
        out[i] = alphabet[rng_below(sizeof(alphabet))];
    }
    *len = n;
}

static sample *make_samples(attr_type t, uint64_t seed)
{
    sample *s = calloc(NVALUES, sizeof(sample));
    assert_non_null(s);
    rng_seed(seed);
    for (size_t i = 0; i < NVALUES; i++) {
        buf_init(&s[i].enc);
        if (t == ATTR_N) {
            char text[128];
            gen_number_text(text, sizeof(text));
            char err[128] = "";
            if (number_parse(text, strlen(text), &s[i].num, err, sizeof(err)) != 0) {
                fail_msg("generated number %s rejected: %s", text, err);
            }
            assert_int_equal(item_value_init_bytes(&s[i].v, ATTR_N, text, strlen(text)), 0);
        } else {
            char b[16];
            size_t n;
            gen_bytes(b, &n);
            assert_int_equal(item_value_init_bytes(&s[i].v, t, b, n), 0);
        }
        assert_int_equal(keycodec_append(&s[i].enc, &s[i].v), 0);
    }
    return s;
}

static int value_cmp(const sample *a, const sample *b)
{
    if (a->v.type == ATTR_N) {
        return sign(number_cmp(&a->num, &b->num));
    }
    return bytes_cmp(&a->v, &b->v);
}

static int sample_enc_cmp(const void *a, const void *b)
{
    return enc_cmp(&((const sample *)a)->enc, &((const sample *)b)->enc);
}

static void describe(const sample *s, char *out, size_t outlen)
{
    size_t k = 0;
    for (size_t i = 0; i < s->v.u.bytes.len && k + 4 < outlen; i++) {
        k += (size_t)snprintf(out + k, outlen - k, "%02x", (uint8_t)s->v.u.bytes.ptr[i]);
    }
    out[k] = 0;
}

/* The core property: memcmp order of encodings equals value order. Checked
 * on random pairs, and on the whole set sorted by encoding (adjacent pairs
 * of a sorted sequence pin down the total order). */
static void check_order(attr_type t, uint64_t seed)
{
    sample *s = make_samples(t, seed);
    rng_seed(seed ^ 0xABCDEF);
    for (size_t k = 0; k < NPAIRS; k++) {
        const sample *a = &s[rng_below(NVALUES)], *b = &s[rng_below(NVALUES)];
        int ec = enc_cmp(&a->enc, &b->enc), vc = value_cmp(a, b);
        if (ec != vc) {
            char da[64], db[64];
            describe(a, da, sizeof(da));
            describe(b, db, sizeof(db));
            fail_msg("%s: encoding order %d != value order %d for %s / %s (%s / %s)",
                     item_type_name(t), ec, vc, a->v.u.bytes.ptr, b->v.u.bytes.ptr, da, db);
        }
    }
    qsort(s, NVALUES, sizeof(sample), sample_enc_cmp);
    for (size_t i = 1; i < NVALUES; i++) {
        int ec = enc_cmp(&s[i - 1].enc, &s[i].enc), vc = value_cmp(&s[i - 1], &s[i]);
        if (ec != vc) {
            fail_msg("%s: sorted neighbours %s / %s: encoding %d, value %d", item_type_name(t),
                     s[i - 1].v.u.bytes.ptr, s[i].v.u.bytes.ptr, ec, vc);
        }
    }
    samples_free(s, NVALUES);
}

static void order_n(void **state)
{
    (void)state;
    check_order(ATTR_N, 1);
}

static void order_s(void **state)
{
    (void)state;
    check_order(ATTR_S, 2);
}

static void order_b(void **state)
{
    (void)state;
    check_order(ATTR_B, 3);
}

/* Decoding returns the value (N normalized), reports the bytes used, stops at
 * the end of its own encoding when more follows, and rejects every proper
 * prefix as truncated. */
static void check_round_trip(attr_type t, uint64_t seed)
{
    sample *s = make_samples(t, seed);
    for (size_t i = 0; i < NVALUES; i++) {
        buf *e = &s[i].enc;
        attr_value out;
        size_t used = 0;
        int rv = keycodec_decode(e->data, e->len, t, &out, &used);
        if (rv != 0) {
            fail_msg("decode of %s failed: %s", s[i].v.u.bytes.ptr, lapse_strerror(rv));
        }
        assert_int_equal(used, e->len);
        assert_true(item_value_eq(&out, &s[i].v));
        if (t == ATTR_N) {
            char norm[64];
            number_format(&s[i].num, norm, sizeof(norm));
            assert_string_equal(out.u.bytes.ptr, norm);
        }
        item_value_fini(&out);
        /* followed by other bytes (a sort key): same result */
        buf cat;
        buf_init(&cat);
        assert_int_equal(buf_append(&cat, e->data, e->len), 0);
        assert_int_equal(buf_append(&cat, "\x00\x01\xff", 3), 0);
        assert_int_equal(keycodec_decode(cat.data, cat.len, t, &out, &used), 0);
        assert_int_equal(used, e->len);
        item_value_fini(&out);
        buf_fini(&cat);
        for (size_t k = 0; k < e->len; k++) {
            rv = keycodec_decode(e->data, k, t, &out, &used);
            if (rv != LAPSE_ECORRUPT) {
                fail_msg("decode of a %zu-byte prefix of %s: %s", k, s[i].v.u.bytes.ptr,
                         lapse_strerror(rv));
            }
            assert_int_equal(out.type, ATTR_NULL);
        }
    }
    samples_free(s, NVALUES);
}

static void round_trip_n(void **state)
{
    (void)state;
    check_round_trip(ATTR_N, 4);
}

static void round_trip_s(void **state)
{
    (void)state;
    check_round_trip(ATTR_S, 5);
}

static void round_trip_b(void **state)
{
    (void)state;
    check_round_trip(ATTR_B, 6);
}

static void enc_of(buf *b, attr_type t, const char *p, size_t n)
{
    attr_value v;
    assert_int_equal(item_value_init_bytes(&v, t, p, n), 0);
    buf_init(b);
    assert_int_equal(keycodec_append(b, &v), 0);
    item_value_fini(&v);
}

static void documented_bytes(void **state)
{
    (void)state;
    struct {
        attr_type t;
        const char *in;
        size_t inlen;
        const char *want;
        size_t wantlen;
    } cases[] = {
        {ATTR_S, "ab", 2, "\x61\x62\x00\x01", 4},
        {ATTR_S, "a\0b", 3, "\x61\x00\xff\x62\x00\x01", 6},
        {ATTR_B, "", 0, "\x00\x01", 2},
        {ATTR_N, "0", 1, "\x02", 1},
        {ATTR_N, "1", 1, "\x03\x80\x01\x20", 4},
        {ATTR_N, "12.5", 4, "\x03\x80\x02\x23\x60", 5},
        {ATTR_N, "0.01", 4, "\x03\x7f\xff\x20", 4},
        {ATTR_N, "-1", 2, "\x01\x7f\xfe\xdf", 4},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        buf b;
        enc_of(&b, cases[i].t, cases[i].in, cases[i].inlen);
        assert_int_equal(b.len, cases[i].wantlen);
        assert_memory_equal(b.data, cases[i].want, cases[i].wantlen);
        buf_fini(&b);
    }
    /* spellings of one number encode identically */
    buf a, b;
    enc_of(&a, ATTR_N, "1.50", 4);
    enc_of(&b, ATTR_N, "15E-1", 5);
    assert_int_equal(enc_cmp(&a, &b), 0);
    buf_fini(&a);
    buf_fini(&b);
}

/* pk || sk sorts by pk, then sk, even when one pk is a prefix of another. */
static void composite_order(void **state)
{
    (void)state;
    enum { N = 5000 };
    typedef struct {
        attr_value pk, sk;
        number skn;
        buf enc;
    } row;
    row *r = calloc(N, sizeof(row));
    assert_non_null(r);
    rng_seed(7);
    for (size_t i = 0; i < N; i++) {
        char b[16], text[128];
        size_t n;
        gen_bytes(b, &n);
        gen_number_text(text, sizeof(text));
        assert_int_equal(item_value_init_bytes(&r[i].pk, ATTR_S, b, n), 0);
        assert_int_equal(item_value_init_bytes(&r[i].sk, ATTR_N, text, strlen(text)), 0);
        assert_int_equal(number_parse(text, strlen(text), &r[i].skn, NULL, 0), 0);
        buf_init(&r[i].enc);
        assert_int_equal(keycodec_append(&r[i].enc, &r[i].pk), 0);
        assert_int_equal(keycodec_append(&r[i].enc, &r[i].sk), 0);
    }
    for (size_t k = 0; k < 100000; k++) {
        row *a = &r[rng_below(N)], *b = &r[rng_below(N)];
        int want = bytes_cmp(&a->pk, &b->pk);
        if (want == 0) {
            want = sign(number_cmp(&a->skn, &b->skn));
        }
        if (enc_cmp(&a->enc, &b->enc) != want) {
            fail_msg("composite (%s,%s) vs (%s,%s) misordered", a->pk.u.bytes.ptr,
                     a->sk.u.bytes.ptr, b->pk.u.bytes.ptr, b->sk.u.bytes.ptr);
        }
        /* and the pair decodes back */
        attr_value pk, sk;
        size_t u1, u2;
        assert_int_equal(keycodec_decode(a->enc.data, a->enc.len, ATTR_S, &pk, &u1), 0);
        assert_int_equal(keycodec_decode(a->enc.data + u1, a->enc.len - u1, ATTR_N, &sk, &u2), 0);
        assert_int_equal(u1 + u2, a->enc.len);
        assert_true(item_value_eq(&pk, &a->pk));
        assert_true(item_value_eq(&sk, &a->sk));
        item_value_fini(&pk);
        item_value_fini(&sk);
    }
    for (size_t i = 0; i < N; i++) {
        item_value_fini(&r[i].pk);
        item_value_fini(&r[i].sk);
        buf_fini(&r[i].enc);
    }
    free(r);
}

/* begins_with(v, p) holds exactly when enc(v) starts with prefix_enc(p). */
static void prefix_matches_begins_with(void **state)
{
    (void)state;
    rng_seed(8);
    for (size_t k = 0; k < 50000; k++) {
        char vb[16], pb[16];
        size_t vn, pn;
        gen_bytes(vb, &vn);
        gen_bytes(pb, &pn);
        if (rng_below(2) && vn > 0) { /* often a real prefix */
            pn = rng_below((uint32_t)vn + 1);
            memcpy(pb, vb, pn);
        }
        attr_value v, p;
        assert_int_equal(item_value_init_bytes(&v, ATTR_S, vb, vn), 0);
        assert_int_equal(item_value_init_bytes(&p, ATTR_S, pb, pn), 0);
        buf ev, ep;
        buf_init(&ev);
        buf_init(&ep);
        assert_int_equal(keycodec_append(&ev, &v), 0);
        assert_int_equal(keycodec_append_prefix(&ep, &p), 0);
        int begins = pn <= vn && memcmp(vb, pb, pn) == 0;
        int enc_begins = ep.len <= ev.len && memcmp(ev.data, ep.data, ep.len) == 0;
        assert_int_equal(begins, enc_begins);
        buf_fini(&ev);
        buf_fini(&ep);
        item_value_fini(&v);
        item_value_fini(&p);
    }
    attr_value n;
    buf b;
    buf_init(&b);
    assert_int_equal(item_value_init_bytes(&n, ATTR_N, "5", 1), 0);
    assert_int_equal(keycodec_append_prefix(&b, &n), LAPSE_EINVAL);
    item_value_fini(&n);
    buf_fini(&b);
}

static void rejects(void **state)
{
    (void)state;
    attr_value v, out;
    buf b;
    size_t used;
    buf_init(&b);
    item_value_init_bool(&v, 1);
    assert_int_equal(keycodec_append(&b, &v), LAPSE_EINVAL);
    assert_int_equal(b.len, 0);
    /* malformed encodings */
    struct {
        attr_type t;
        const char *p;
        size_t n;
    } bad[] = {
        {ATTR_S, "a\x00\x02", 3},            /* 00 followed by neither 01 nor FF */
        {ATTR_N, "\x04", 1},                 /* unknown marker */
        {ATTR_N, "\x03\x80\x01\xb0", 4},     /* digit nibble 11 */
        {ATTR_N, "\x03\x80\x01\x02", 4},     /* non-zero pad after terminator */
        {ATTR_N, "\x03\x80\x01\x00", 4},     /* no digits */
        {ATTR_N, "\x03\x80\x01\x21\x00", 5}, /* trailing zero digit */
        {ATTR_N, "\x03\x90\x00\x20", 4},     /* exponent out of range */
        {ATTR_BOOL, "\x01", 1},              /* not a key type */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rv = keycodec_decode((const uint8_t *)bad[i].p, bad[i].n, bad[i].t, &out, &used);
        if (rv != LAPSE_ECORRUPT) {
            fail_msg("bad encoding %zu decoded: %s", i, lapse_strerror(rv));
        }
    }
    buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(documented_bytes),
        cmocka_unit_test(order_n),
        cmocka_unit_test(order_s),
        cmocka_unit_test(order_b),
        cmocka_unit_test(round_trip_n),
        cmocka_unit_test(round_trip_s),
        cmocka_unit_test(round_trip_b),
        cmocka_unit_test(composite_order),
        cmocka_unit_test(prefix_matches_begins_with),
        cmocka_unit_test(rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
