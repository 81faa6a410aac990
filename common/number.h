/*
 * number.h: DynamoDB numbers. An N value is decimal text: an optional '-',
 * digits with an optional '.', and an optional exponent (e/E, optional sign,
 * digits). At most 38 significant digits; magnitude 1E-130 to
 * 9.9999999999999999999999999999999999999E+125, or zero. Leading and
 * trailing zeros are not significant. Items keep the text exactly as given;
 * comparisons and key encodings use the normalized form.
 *
 * Thread-safe (pure functions).
 */
#ifndef LAPSE_NUMBER_H
#define LAPSE_NUMBER_H

#include <stddef.h>
#include <stdint.h>

#define NUMBER_MAX_DIGITS 38

/* A number in normalized form: value = (neg ? -1 : 1) * 0.d1d2...dn * 10^exp
 * with d1 != 0 and dn != 0, or zero (ndigits == 0). */
typedef struct number {
    int neg;
    int exp;
    int ndigits;
    char digits[NUMBER_MAX_DIGITS]; /* '0'..'9', not NUL-terminated */
} number;

/* Parses and validates text. Returns 0 or LAPSE_EINVAL; with a non-NULL
 * err a reason is written there ("more than 38 significant digits", ...). */
int number_parse(const char *s, size_t len, number *out, char *err, size_t errlen);
/* Returns 0 when s is a valid number, else LAPSE_EINVAL. */
int number_validate(const char *s, size_t len);
/* Returns <0, 0, >0 as a < b, a == b, a > b. */
int number_cmp(const number *a, const number *b);
/* Writes the shortest plain text of n (e.g. "-12.5", "1E+100" for values
 * whose plain form would be longer than 50 characters) into out, NUL-
 * terminated. REQUIRES: outlen >= 64. */
void number_format(const number *n, char *out, size_t outlen);
/* The integer part of n, truncated toward zero, for TTL epoch seconds.
 * Returns 0, or LAPSE_EINVAL when it does not fit in int64_t. */
int number_to_i64(const number *n, int64_t *out);

#endif
