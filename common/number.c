/* number.c: DynamoDB numbers (number.h).
 *
 * Parsing collects the significant digits of the mantissa, from the first
 * non-zero digit to the last non-zero digit, and computes exp so that
 * value = 0.d1...dn * 10^exp. The DynamoDB range 1E-130 .. 9.99...9E+125
 * is then exactly exp in [NUMBER_MIN_EXP, NUMBER_MAX_EXP]. */
#include "number.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lapse_err.h"

#define NUMBER_MIN_EXP (-129)  /* 0.1E-129 == 1E-130 */
#define NUMBER_MAX_EXP 126     /* 0.99..9E+126 == 9.9..9E+125 */
#define EXP_CLAMP 1000000000LL /* exponent text beyond this is out of range anyway */

static int fail(char *err, size_t errlen, const char *why)
{
    if (err != NULL && errlen > 0) {
        snprintf(err, errlen, "%s", why);
    }
    return LAPSE_EINVAL;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* What parse_mantissa learns besides the significant digits. */
typedef struct mantissa {
    int64_t digits;     /* mantissa digits read, zeros included */
    int64_t int_digits; /* of them, those before the '.' */
    int64_t first_nz;   /* the index (among all of them) of the first non-zero digit; -1: none */
    int too_many;       /* more than NUMBER_MAX_DIGITS significant digits */
} mantissa;

/* Reads the mantissa of s from *i (left past it) into n's digits and *m.
 * Returns 0, or LAPSE_EINVAL with err set. */
static int parse_mantissa(const char *s, size_t len, size_t *i, number *n, mantissa *m, char *err,
                          size_t errlen)
{
    int saw_point = 0;
    *m = (mantissa){.int_digits = -1, .first_nz = -1};
    for (; *i < len; (*i)++) {
        char c = s[*i];
        if (c == '.') {
            if (saw_point) {
                return fail(err, errlen, "not a number");
            }
            saw_point = 1;
            m->int_digits = m->digits;
            continue;
        }
        if (!is_digit(c)) {
            break;
        }
        if (c != '0') {
            if (m->first_nz < 0) {
                m->first_nz = m->digits;
            }
            int64_t pos = m->digits - m->first_nz; /* index among significant digits */
            if (pos >= NUMBER_MAX_DIGITS) {
                m->too_many = 1;
            } else {
                /* zeros between non-zero digits are significant */
                for (int64_t k = n->ndigits; k < pos; k++) {
                    n->digits[k] = '0';
                }
                n->digits[pos] = c;
                n->ndigits = (int)pos + 1;
            }
        }
        m->digits++;
    }
    if (m->digits == 0) {
        return fail(err, errlen, "not a number");
    }
    if (!saw_point) {
        m->int_digits = m->digits;
    }
    return 0;
}

/* Reads the exponent part of s from i to len (none when i == len) into *e,
 * clamped near EXP_CLAMP. Returns 0, or LAPSE_EINVAL with err set. */
static int parse_exponent(const char *s, size_t len, size_t i, int64_t *e, char *err, size_t errlen)
{
    *e = 0;
    if (i >= len) {
        return 0;
    }
    if (s[i] != 'e' && s[i] != 'E') {
        return fail(err, errlen, "not a number");
    }
    i++;
    int eneg = 0;
    if (i < len && (s[i] == '+' || s[i] == '-')) {
        eneg = s[i] == '-';
        i++;
    }
    if (i >= len) {
        return fail(err, errlen, "not a number");
    }
    for (; i < len; i++) {
        if (!is_digit(s[i])) {
            return fail(err, errlen, "not a number");
        }
        if (*e < EXP_CLAMP) {
            *e = *e * 10 + (s[i] - '0');
        }
    }
    if (eneg) {
        *e = -*e;
    }
    return 0;
}

int number_parse(const char *s, size_t len, number *out, char *err, size_t errlen)
{
    number n;
    memset(&n, 0, sizeof(n));
    size_t i = 0;
    if (s == NULL || len == 0) {
        return fail(err, errlen, "empty number");
    }
    if (s[i] == '-') {
        n.neg = 1;
        i++;
    }
    mantissa m;
    int64_t e;
    int rv;
    if ((rv = parse_mantissa(s, len, &i, &n, &m, err, errlen)) != 0 ||
        (rv = parse_exponent(s, len, i, &e, err, errlen)) != 0) {
        return rv;
    }
    if (m.first_nz < 0) {
        /* Zero, whatever its sign, spelling or exponent. */
        memset(out, 0, sizeof(*out));
        return 0;
    }
    if (m.too_many) {
        return fail(err, errlen, "more than 38 significant digits");
    }
    int64_t exp = m.int_digits - m.first_nz + e;
    if (exp > NUMBER_MAX_EXP) {
        return fail(err, errlen, "number too large (magnitude above 9.99E+125)");
    }
    if (exp < NUMBER_MIN_EXP) {
        return fail(err, errlen, "number too small (magnitude below 1E-130)");
    }
    n.exp = (int)exp;
    *out = n;
    return 0;
}

int number_validate(const char *s, size_t len)
{
    number n;
    return number_parse(s, len, &n, NULL, 0);
}

int number_cmp(const number *a, const number *b)
{
    int sa = a->ndigits == 0 ? 0 : (a->neg ? -1 : 1);
    int sb = b->ndigits == 0 ? 0 : (b->neg ? -1 : 1);
    if (sa != sb) {
        return sa < sb ? -1 : 1;
    }
    if (sa == 0) {
        return 0;
    }
    int mag; /* magnitude comparison of a against b */
    if (a->exp != b->exp) {
        mag = a->exp < b->exp ? -1 : 1;
    } else {
        int m = a->ndigits < b->ndigits ? a->ndigits : b->ndigits;
        int c = memcmp(a->digits, b->digits, (size_t)m);
        if (c != 0) {
            mag = c < 0 ? -1 : 1;
        } else {
            /* the last digit is non-zero, so more digits is bigger */
            mag = a->ndigits == b->ndigits ? 0 : (a->ndigits < b->ndigits ? -1 : 1);
        }
    }
    return sa < 0 ? -mag : mag;
}

void number_format(const number *n, char *out, size_t outlen)
{
    char tmp[256];
    size_t k = 0;
    if (n->ndigits == 0) {
        snprintf(out, outlen, "0");
        return;
    }
    if (n->neg) {
        tmp[k++] = '-';
    }
    int nd = n->ndigits, exp = n->exp;
    /* Length of the plain form, to choose between plain and exponent form. */
    size_t plain = (size_t)n->neg;
    if (exp <= 0) {
        plain += 2 + (size_t)(-exp) + (size_t)nd; /* "0." zeros digits */
    } else if (exp < nd) {
        plain += (size_t)nd + 1;
    } else {
        plain += (size_t)exp;
    }
    if (plain <= 50) {
        if (exp <= 0) {
            tmp[k++] = '0';
            tmp[k++] = '.';
            for (int z = 0; z < -exp; z++) {
                tmp[k++] = '0';
            }
            memcpy(tmp + k, n->digits, (size_t)nd);
            k += (size_t)nd;
        } else if (exp < nd) {
            memcpy(tmp + k, n->digits, (size_t)exp);
            k += (size_t)exp;
            tmp[k++] = '.';
            memcpy(tmp + k, n->digits + exp, (size_t)(nd - exp));
            k += (size_t)(nd - exp);
        } else {
            memcpy(tmp + k, n->digits, (size_t)nd);
            k += (size_t)nd;
            for (int z = nd; z < exp; z++) {
                tmp[k++] = '0';
            }
        }
        tmp[k] = 0;
    } else {
        tmp[k++] = n->digits[0];
        if (nd > 1) {
            tmp[k++] = '.';
            memcpy(tmp + k, n->digits + 1, (size_t)(nd - 1));
            k += (size_t)(nd - 1);
        }
        snprintf(tmp + k, sizeof(tmp) - k, "E%+d", exp - 1);
    }
    snprintf(out, outlen, "%s", tmp);
}

int number_to_i64(const number *n, int64_t *out)
{
    if (n->ndigits == 0 || n->exp <= 0) {
        *out = 0;
        return 0;
    }
    if (n->exp > 19) {
        return LAPSE_EINVAL;
    }
    uint64_t limit = n->neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    for (int i = 0; i < n->exp; i++) {
        unsigned d = i < n->ndigits ? (unsigned)(n->digits[i] - '0') : 0;
        if (v > (limit - d) / 10) {
            return LAPSE_EINVAL;
        }
        v = v * 10 + d;
    }
    if (n->neg) {
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        *out = (int64_t)v;
    }
    return 0;
}
