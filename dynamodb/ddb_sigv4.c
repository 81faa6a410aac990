/*
 * ddb_sigv4.c: SigV4 verification (ddb_sigv4.h), following AWS's
 * documented algorithm: a canonical request, a string to sign over its
 * SHA-256, and a signing key derived from the secret by HMAC-SHA256 over the
 * date, region, service and "aws4_request".
 */
#include "ddb_sigv4.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "../common/buf.h"

#define MAX_KEY 128                    /* AWS's longest access key id */
#define MAX_SKEW_MS (15LL * 60 * 1000) /* AWS's tolerance for X-Amz-Date */
#define ALGORITHM "AWS4-HMAC-SHA256"

typedef struct key {
    char id[MAX_KEY + 1], secret[MAX_KEY + 1];
} key;

struct ddb_credentials {
    key *v;
    size_t n;
};

/* ======================= the credentials file ======================= */

static int load_fail(char *err, size_t errlen, FILE *f, ddb_credentials *c, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int load_fail(char *err, size_t errlen, FILE *f, ddb_credentials *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    if (f != NULL) {
        fclose(f);
    }
    ddb_credentials_free(c);
    return -1;
}

int ddb_credentials_load(const char *path, ddb_credentials **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return load_fail(err, errlen, NULL, NULL, "cannot open %s: %s", path, strerror(errno));
    }
    ddb_credentials *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return load_fail(err, errlen, f, NULL, "out of memory");
    }
    char line[1024];
    for (int no = 1; fgets(line, sizeof line, f) != NULL; no++) {
        if (strchr(line, '\n') == NULL && !feof(f)) {
            return load_fail(err, errlen, f, c, "%s line %d: longer than %zu bytes", path, no,
                             sizeof line - 2);
        }
        const char *p = line + strspn(line, " \t\r\n");
        if (*p == '\0' || *p == '#') {
            continue;
        }
        char id[MAX_KEY + 2], secret[MAX_KEY + 2], extra[2];
        if (sscanf(p, "%129s %129s %1s", id, secret, extra) != 2 || strlen(id) > MAX_KEY ||
            strlen(secret) > MAX_KEY) {
            return load_fail(err, errlen, f, c,
                             "%s line %d: want ACCESS_KEY_ID SECRET_ACCESS_KEY (each 1 to %d "
                             "characters, no spaces)",
                             path, no, MAX_KEY);
        }
        for (size_t i = 0; i < c->n; i++) {
            if (strcmp(c->v[i].id, id) == 0) {
                return load_fail(err, errlen, f, c, "%s line %d: access key %s listed twice", path,
                                 no, id);
            }
        }
        key *v = realloc(c->v, (c->n + 1) * sizeof *v);
        if (v == NULL) {
            return load_fail(err, errlen, f, c, "out of memory");
        }
        c->v = v;
        memcpy(c->v[c->n].id, id, strlen(id) + 1); /* both checked: at most MAX_KEY */
        memcpy(c->v[c->n].secret, secret, strlen(secret) + 1);
        c->n++;
    }
    if (ferror(f)) {
        return load_fail(err, errlen, f, c, "cannot read %s: %s", path, strerror(errno));
    }
    if (c->n == 0) {
        return load_fail(err, errlen, f, c, "%s lists no access key", path);
    }
    fclose(f);
    *out = c;
    return 0;
}

void ddb_credentials_free(ddb_credentials *c)
{
    if (c != NULL) {
        OPENSSL_cleanse(c->v, c->n * sizeof *c->v);
        free(c->v);
        free(c);
    }
}

size_t ddb_credentials_count(const ddb_credentials *c)
{
    return c != NULL ? c->n : 0;
}

/* ======================= hashing ======================= */

static void to_hex(const unsigned char *d, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[2 * n] = '\0';
}

/* The hex SHA-256 of d into out (65 bytes); -1 when libcrypto fails. */
static int sha256_hex(const void *d, size_t n, char *out)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(d != NULL ? d : "", n, md, &len, EVP_sha256(), NULL) != 1 || len != 32) {
        return -1;
    }
    to_hex(md, 32, out);
    return 0;
}

/* HMAC-SHA256 of the string data under k (klen bytes) into out (32). */
static int hmac(const void *k, size_t klen, const char *data, unsigned char *out)
{
    unsigned int len = 32;
    return HMAC(EVP_sha256(), k, (int)klen, (const unsigned char *)data, strlen(data), out, &len) !=
                       NULL &&
                   len == 32
               ? 0
               : -1;
}

/* ======================= verification ======================= */

typedef struct verdict {
    char *type, *msg;
    size_t typelen, msglen;
} verdict;

static int refuse(verdict *v, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(verdict *v, const char *type, const char *fmt, ...)
{
    va_list ap;
    snprintf(v->type, v->typelen, "%s", type);
    va_start(ap, fmt);
    vsnprintf(v->msg, v->msglen, fmt, ap);
    va_end(ap);
    return -1;
}

/* The parts of an Authorization header (pointers into a copy). */
typedef struct auth {
    char copy[4096];
    const char *credential, *signed_headers, *signature;
    const char *id, *date, *region, *service, *terminal; /* Credential's five parts */
} auth;

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) {
        s[--n] = '\0';
    }
    return s;
}

static int parse_auth(verdict *v, const char *h, auth *a)
{
    memset(a, 0, sizeof *a);
    size_t al = strlen(ALGORITHM);
    if (strncmp(h, ALGORITHM, al) != 0 || (h[al] != ' ' && h[al] != '\t')) {
        return refuse(v, "IncompleteSignatureException",
                      "Authorization header must start with " ALGORITHM);
    }
    if (strlen(h + al) >= sizeof a->copy) {
        return refuse(v, "IncompleteSignatureException", "Authorization header too long");
    }
    snprintf(a->copy, sizeof a->copy, "%s", h + al);
    char *save = NULL;
    for (char *f = strtok_r(a->copy, ",", &save); f != NULL; f = strtok_r(NULL, ",", &save)) {
        f = trim(f);
        char *eq = strchr(f, '=');
        if (eq == NULL) {
            return refuse(v, "IncompleteSignatureException",
                          "Authorization header component %.64s is not name=value", f);
        }
        *eq = '\0';
        const char **slot = strcmp(f, "Credential") == 0      ? &a->credential
                            : strcmp(f, "SignedHeaders") == 0 ? &a->signed_headers
                            : strcmp(f, "Signature") == 0     ? &a->signature
                                                              : NULL;
        if (slot == NULL || *slot != NULL) {
            return refuse(v, "IncompleteSignatureException",
                          "Authorization header component %.64s is unknown or repeated", f);
        }
        *slot = eq + 1;
    }
    const char *missing = a->credential == NULL       ? "Credential"
                          : a->signed_headers == NULL ? "SignedHeaders"
                          : a->signature == NULL      ? "Signature"
                                                      : NULL;
    if (missing != NULL) {
        return refuse(v, "IncompleteSignatureException",
                      "Authorization header requires '%s' parameter", missing);
    }
    /* Credential=ID/YYYYMMDD/REGION/SERVICE/aws4_request, split in place
     * (it lives in copy). */
    const char **parts[5] = {&a->id, &a->date, &a->region, &a->service, &a->terminal};
    int n = 0;
    for (char *p = (char *)a->credential; p != NULL && n < 6; n++) {
        char *slash = strchr(p, '/');
        if (slash != NULL) {
            *slash = '\0';
        }
        if (n < 5) {
            *parts[n] = p;
        }
        p = slash != NULL ? slash + 1 : NULL;
    }
    if (n != 5 || strlen(a->date) != 8 || strspn(a->date, "0123456789") != 8 ||
        strcmp(a->terminal, "aws4_request") != 0 || a->id[0] == '\0') {
        return refuse(v, "IncompleteSignatureException",
                      "Credential must be ACCESS_KEY_ID/YYYYMMDD/REGION/SERVICE/aws4_request");
    }
    if (strlen(a->signature) != 64 || strspn(a->signature, "0123456789abcdef") != 64) {
        return refuse(v, "IncompleteSignatureException",
                      "Signature must be 64 lowercase hexadecimal digits");
    }
    return 0;
}

/* X-Amz-Date (YYYYMMDDTHHMMSSZ) as epoch ms into *ms; -1 when malformed. */
static int parse_amz_date(const char *s, int64_t *ms)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (strlen(s) != 16 || strspn(s, "0123456789") != 8 || s[8] != 'T' ||
        strspn(s + 9, "0123456789") != 6 || s[15] != 'Z' ||
        sscanf(s, "%4d%2d%2dT%2d%2d%2dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec) != 6) {
        return -1;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    if (t == (time_t)-1) {
        return -1;
    }
    *ms = (int64_t)t * 1000;
    return 0;
}

/* Appends header value v, trimmed and with inner runs of spaces as one
 * (SigV4's canonical value). */
static int append_canonical_value(buf *b, const char *v)
{
    int space = 0, rv = 0;
    v += strspn(v, " \t");
    for (; *v != '\0' && rv == 0; v++) {
        if (*v == ' ' || *v == '\t') {
            space = 1;
            continue;
        }
        if (space) {
            rv = buf_append_byte(b, ' ');
            space = 0;
        }
        rv = rv == 0 ? buf_append_byte(b, (uint8_t)*v) : rv;
    }
    return rv;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The canonical query of the query part q (after '?'): its name=value
 * pairs, sorted, joined by '&'. */
static int append_canonical_query(buf *b, const char *q)
{
    char *copy = strdup(q);
    size_t n = 1;
    for (const char *p = q; *p != '\0'; p++) {
        n += *p == '&';
    }
    char **v = calloc(n, sizeof *v);
    int rv = copy == NULL || v == NULL ? -1 : 0;
    size_t k = 0;
    char *save = NULL;
    for (char *f = rv == 0 ? strtok_r(copy, "&", &save) : NULL; f != NULL;
         f = strtok_r(NULL, "&", &save)) {
        v[k++] = f;
    }
    qsort(v, k, sizeof *v, cmp_str);
    for (size_t i = 0; i < k && rv == 0; i++) {
        rv = buf_printf(b, "%s%s%s", i > 0 ? "&" : "", v[i], strchr(v[i], '=') ? "" : "=");
    }
    free(v);
    free(copy);
    return rv;
}

/* The canonical request of r signed over signed_headers into b. */
static int canonical_request(verdict *v, const ddb_sigv4_request *r, const char *signed_headers,
                             buf *b)
{
    char payload[65];
    const char *q = strchr(r->uri, '?');
    size_t plen = q != NULL ? (size_t)(q - r->uri) : strlen(r->uri);
    if (buf_printf(b, "%s\n%.*s\n", r->method, (int)plen, r->uri) != 0 ||
        (q != NULL && append_canonical_query(b, q + 1) != 0) || buf_append_byte(b, '\n') != 0) {
        return refuse(v, "InternalFailure", "out of memory");
    }
    /* SignedHeaders: lowercase names in strictly increasing order, host among
     * them; each one's value as received. */
    char names[1024], prev[256] = "";
    int host = 0;
    if (strlen(signed_headers) >= sizeof names) {
        return refuse(v, "IncompleteSignatureException", "SignedHeaders too long");
    }
    snprintf(names, sizeof names, "%s", signed_headers);
    char *save = NULL;
    for (char *h = strtok_r(names, ";", &save); h != NULL; h = strtok_r(NULL, ";", &save)) {
        for (const char *c = h; *c != '\0'; c++) {
            if (isupper((unsigned char)*c)) {
                return refuse(v, "IncompleteSignatureException",
                              "SignedHeaders must be lowercase: %.64s", h);
            }
        }
        if (strlen(h) >= sizeof prev || strcmp(prev, h) >= 0) {
            return refuse(v, "IncompleteSignatureException",
                          "SignedHeaders must be sorted and unique: %.64s", h);
        }
        snprintf(prev, sizeof prev, "%s", h);
        host |= strcmp(h, "host") == 0;
        const char *val = r->header(r->arg, h);
        if (val == NULL) {
            return refuse(v, "InvalidSignatureException",
                          "The signed header %.64s is not in the request", h);
        }
        if (buf_printf(b, "%s:", h) != 0 || append_canonical_value(b, val) != 0 ||
            buf_append_byte(b, '\n') != 0) {
            return refuse(v, "InternalFailure", "out of memory");
        }
    }
    if (!host) {
        return refuse(v, "InvalidSignatureException", "'Host' must be a 'SignedHeader'");
    }
    if (sha256_hex(r->body, r->len, payload) != 0 ||
        buf_printf(b, "\n%s\n%s", signed_headers, payload) != 0) {
        return refuse(v, "InternalFailure", "cannot hash the request");
    }
    return 0;
}

/* The hex signature of string to sign sts by secret for a's scope into out
 * (65 bytes). */
static int sign(const char *secret, const auth *a, const char *sts, char *out)
{
    char k0[MAX_KEY + 8];
    unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
    snprintf(k0, sizeof k0, "AWS4%s", secret);
    int rv = hmac(k0, strlen(k0), a->date, k1) != 0 || hmac(k1, 32, a->region, k2) != 0 ||
                     hmac(k2, 32, a->service, k3) != 0 || hmac(k3, 32, "aws4_request", k4) != 0 ||
                     hmac(k4, 32, sts, sig) != 0
                 ? -1
                 : 0;
    to_hex(sig, 32, out);
    OPENSSL_cleanse(k0, sizeof k0);
    OPENSSL_cleanse(k4, sizeof k4);
    return rv;
}

int ddb_sigv4_verify(const ddb_credentials *c, const char *region, const ddb_sigv4_request *r,
                     char *type, size_t typelen, char *msg, size_t msglen)
{
    verdict v = {type, msg, typelen, msglen};
    const char *h = r->header(r->arg, "Authorization");
    if (h == NULL) {
        return refuse(&v, "MissingAuthenticationTokenException",
                      "Request is missing Authentication Token");
    }
    auth a;
    if (parse_auth(&v, h, &a) != 0) {
        return -1;
    }
    const key *k = NULL;
    for (size_t i = 0; i < c->n && k == NULL; i++) {
        k = strcmp(c->v[i].id, a.id) == 0 ? &c->v[i] : NULL;
    }
    if (k == NULL) {
        return refuse(&v, "UnrecognizedClientException",
                      "The security token included in the request is invalid.");
    }
    if (strcmp(a.region, region) != 0) {
        return refuse(&v, "InvalidSignatureException",
                      "Credential should be scoped to a valid region, not '%.64s' (this "
                      "endpoint is %.64s)",
                      a.region, region);
    }
    if (strcmp(a.service, "dynamodb") != 0) {
        return refuse(&v, "InvalidSignatureException",
                      "Credential should be scoped to correct service: 'dynamodb', not '%.64s'",
                      a.service);
    }
    const char *when = r->header(r->arg, "X-Amz-Date");
    int64_t when_ms;
    if (when == NULL) {
        return refuse(&v, "IncompleteSignatureException",
                      "Authorization header requires existence of a 'X-Amz-Date' header");
    }
    if (parse_amz_date(when, &when_ms) != 0) {
        return refuse(&v, "IncompleteSignatureException",
                      "X-Amz-Date %.32s is not YYYYMMDDTHHMMSSZ", when);
    }
    if (strncmp(when, a.date, 8) != 0) {
        return refuse(&v, "InvalidSignatureException",
                      "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of "
                      "date from HTTP: '%s' != '%.8s'",
                      a.date, when);
    }
    if (when_ms < r->now_ms - MAX_SKEW_MS || when_ms > r->now_ms + MAX_SKEW_MS) {
        return refuse(&v, "InvalidSignatureException",
                      "Signature expired or not yet current: %.32s is more than 15 minutes from "
                      "the endpoint's clock",
                      when);
    }
    buf creq, sts;
    buf_init(&creq);
    buf_init(&sts);
    char creq_hash[65], sig[65];
    int rv = canonical_request(&v, r, a.signed_headers, &creq);
    if (rv == 0 &&
        (buf_append_byte(&creq, 0) != 0 || sha256_hex(creq.data, creq.len - 1, creq_hash) != 0 ||
         buf_printf(&sts, ALGORITHM "\n%s\n%s/%s/%s/aws4_request\n%s", when, a.date, a.region,
                    a.service, creq_hash) != 0 ||
         buf_append_byte(&sts, 0) != 0 || sign(k->secret, &a, (const char *)sts.data, sig) != 0)) {
        rv = refuse(&v, "InternalFailure", "cannot compute the signature");
    }
    if (rv == 0 && CRYPTO_memcmp(sig, a.signature, 64) != 0) {
        rv = refuse(&v, "InvalidSignatureException",
                    "The request signature we calculated does not match the signature you "
                    "provided. Check your AWS Secret Access Key and signing method.");
    }
    buf_fini(&creq);
    buf_fini(&sts);
    return rv;
}
