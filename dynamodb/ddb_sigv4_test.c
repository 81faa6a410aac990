/* ddb_sigv4_test: SigV4 verification without a cluster (ddb_sigv4.h). The
 * reference request was signed by botocore (the aws CLI's and boto3's
 * signer, botocore.auth.SigV4Auth) with access key AKIDLAPSETEST, secret
 * "lapse/secret+key", region us-east-1, service dynamodb, at
 * 2026-11-26T08:19:05Z; it must verify, and every change to what it signs
 * must not. Also: the credentials file's errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cmocka.h>

#include "ddb_sigv4.h"

#define SIGNED_AT_MS 1795681145000LL /* 2026-11-26T08:19:05Z */
#define AUTH                                                                                       \
    "AWS4-HMAC-SHA256 Credential=AKIDLAPSETEST/20261126/us-east-1/dynamodb/aws4_request, "         \
    "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "                                    \
    "Signature=104bc838c7b85ff88ff182c1d6ef7a88aec4c2cae6e0df36165bce68ac345ca8"
#define BODY "{\"TableName\":\"SessionData\"}"

/* A request's headers, changeable per case. */
typedef struct headers {
    const char *name[8], *value[8];
    size_t n;
} headers;

static const char *get_header(void *arg, const char *name)
{
    const headers *h = arg;
    for (size_t i = 0; i < h->n; i++) {
        if (strcasecmp(h->name[i], name) == 0) {
            return h->value[i];
        }
    }
    return NULL;
}

static void set(headers *h, const char *name, const char *value)
{
    for (size_t i = 0; i < h->n; i++) {
        if (strcasecmp(h->name[i], name) == 0) {
            h->value[i] = value;
            return;
        }
    }
    h->name[h->n] = name;
    h->value[h->n++] = value;
}

static headers reference(void)
{
    headers h = {.n = 0};
    set(&h, "Host", "127.0.0.1:8000");
    set(&h, "Content-Type", "application/x-amz-json-1.0");
    set(&h, "X-Amz-Target", "DynamoDB_20120810.DescribeTable");
    set(&h, "X-Amz-Date", "20261126T081905Z");
    set(&h, "Authorization", AUTH);
    set(&h, "Content-Length", "27"); /* not signed: may change */
    return h;
}

static char g_dir[64];

/* A credentials file holding text; returns its path (static storage). */
static const char *creds_file(const char *text)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/credentials", g_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static ddb_credentials *load(const char *text)
{
    char err[256];
    ddb_credentials *c = NULL;
    if (ddb_credentials_load(creds_file(text), &c, err, sizeof err) != 0) {
        fail_msg("load: %s", err);
    }
    return c;
}

/* Verifies h with body against c in region at now_ms; returns the error
 * type ("" when accepted). */
static const char *verify(const ddb_credentials *c, const char *region, headers *h,
                          const char *body, int64_t now_ms)
{
    static char type[64];
    char msg[512];
    ddb_sigv4_request r = {.method = "POST",
                           .uri = "/",
                           .header = get_header,
                           .arg = h,
                           .body = body,
                           .len = strlen(body),
                           .now_ms = now_ms};
    type[0] = '\0';
    if (ddb_sigv4_verify(c, region, &r, type, sizeof type, msg, sizeof msg) == 0) {
        return "";
    }
    assert_true(msg[0] != '\0');
    return type;
}

static void botocore_signature_verifies(void **state)
{
    (void)state;
    ddb_credentials *c =
        load("# test keys\n\nOTHERKEY other\n  AKIDLAPSETEST lapse/secret+key  \n");
    assert_int_equal(ddb_credentials_count(c), 2);
    headers h = reference();
    assert_string_equal(verify(c, "us-east-1", &h, BODY, SIGNED_AT_MS), "");
    /* Within 15 minutes either way of the signing time. */
    assert_string_equal(verify(c, "us-east-1", &h, BODY, SIGNED_AT_MS + 14 * 60000), "");
    assert_string_equal(verify(c, "us-east-1", &h, BODY, SIGNED_AT_MS - 14 * 60000), "");
    /* Header values are compared trimmed, inner spaces as one; unsigned
     * headers may change. */
    set(&h, "Content-Type", "  application/x-amz-json-1.0 ");
    set(&h, "Content-Length", "99");
    assert_string_equal(verify(c, "us-east-1", &h, BODY, SIGNED_AT_MS), "");
    ddb_credentials_free(c);
}

static void changes_are_refused(void **state)
{
    (void)state;
    ddb_credentials *c = load("AKIDLAPSETEST lapse/secret+key\n");
    ddb_credentials *wrong = load("AKIDLAPSETEST lapse/secret+kez\n");
    headers h = reference();
    const char *inv = "InvalidSignatureException";
    assert_string_equal(verify(wrong, "us-east-1", &h, BODY, SIGNED_AT_MS), inv);
    assert_string_equal(verify(c, "us-east-1", &h, "{\"TableName\":\"SessionDatb\"}", SIGNED_AT_MS),
                        inv);
    assert_string_equal(verify(c, "eu-west-1", &h, BODY, SIGNED_AT_MS), inv);
    assert_string_equal(verify(c, "us-east-1", &h, BODY, SIGNED_AT_MS + 16 * 60000), inv);
    assert_string_equal(verify(c, "us-east-1", &h, BODY, SIGNED_AT_MS - 16 * 60000), inv);

    static const struct {
        const char *name, *value, *type;
    } cases[] = {
        {"X-Amz-Target", "DynamoDB_20120810.DeleteTable", "InvalidSignatureException"},
        {"Host", "127.0.0.1:8001", "InvalidSignatureException"},
        {"X-Amz-Date", "20261126T081906Z", "InvalidSignatureException"},
        {"X-Amz-Date", "2026-11-26T08:19:05Z", "IncompleteSignatureException"},
        {"Authorization", NULL, "MissingAuthenticationTokenException"},
        {"Authorization", "AWS4-HMAC-SHA1 Credential=x", "IncompleteSignatureException"},
        {"Authorization", "AWS4-HMAC-SHA256", "IncompleteSignatureException"},
        {"Authorization",
         "AWS4-HMAC-SHA256 Credential=AKIDLAPSETEST/20261126/us-east-1/dynamodb/aws4_request, "
         "SignedHeaders=content-type;host;x-amz-date;x-amz-target",
         "IncompleteSignatureException"},
        {"Authorization",
         "AWS4-HMAC-SHA256 Credential=NOSUCHKEY/20261126/us-east-1/dynamodb/aws4_request, "
         "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
         "Signature=104bc838c7b85ff88ff182c1d6ef7a88aec4c2cae6e0df36165bce68ac345ca8",
         "UnrecognizedClientException"},
        {"Authorization",
         "AWS4-HMAC-SHA256 Credential=AKIDLAPSETEST/20261126/us-east-1/dynamodb/aws4_request/x, "
         "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
         "Signature=104bc838c7b85ff88ff182c1d6ef7a88aec4c2cae6e0df36165bce68ac345ca8",
         "IncompleteSignatureException"},
        {"Authorization",
         "AWS4-HMAC-SHA256 Credential=AKIDLAPSETEST/20261126/us-east-1/s3/aws4_request, "
         "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
         "Signature=104bc838c7b85ff88ff182c1d6ef7a88aec4c2cae6e0df36165bce68ac345ca8",
         "InvalidSignatureException"},
        {"Authorization",
         "AWS4-HMAC-SHA256 Credential=AKIDLAPSETEST/20261125/us-east-1/dynamodb/aws4_request, "
         "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
         "Signature=104bc838c7b85ff88ff182c1d6ef7a88aec4c2cae6e0df36165bce68ac345ca8",
         "InvalidSignatureException"},
        {"Authorization",
         "AWS4-HMAC-SHA256 Credential=AKIDLAPSETEST/20261126/us-east-1/dynamodb/aws4_request, "
         "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
         "Signature=104BC838C7B85FF88FF182C1D6EF7A88AEC4C2CAE6E0DF36165BCE68AC345CA8",
         "IncompleteSignatureException"},
        {"Authorization",
         "AWS4-HMAC-SHA256 Credential=AKIDLAPSETEST/20261126/us-east-1/dynamodb/aws4_request, "
         "SignedHeaders=content-type;x-amz-date;x-amz-target, "
         "Signature=104bc838c7b85ff88ff182c1d6ef7a88aec4c2cae6e0df36165bce68ac345ca8",
         "InvalidSignatureException"}, /* host unsigned */
        {"Authorization",
         "AWS4-HMAC-SHA256 Credential=AKIDLAPSETEST/20261126/us-east-1/dynamodb/aws4_request, "
         "SignedHeaders=host;content-type;x-amz-date;x-amz-target, "
         "Signature=104bc838c7b85ff88ff182c1d6ef7a88aec4c2cae6e0df36165bce68ac345ca8",
         "IncompleteSignatureException"}, /* not sorted */
        {"Authorization",
         "AWS4-HMAC-SHA256 Credential=AKIDLAPSETEST/20261126/us-east-1/dynamodb/aws4_request, "
         "SignedHeaders=content-type;host;x-amz-date;x-amz-target;x-missing, "
         "Signature=104bc838c7b85ff88ff182c1d6ef7a88aec4c2cae6e0df36165bce68ac345ca8",
         "InvalidSignatureException"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        headers m = reference();
        set(&m, cases[i].name, cases[i].value); /* NULL: absent */
        const char *got = verify(c, "us-east-1", &m, BODY, SIGNED_AT_MS);
        if (strcmp(got, cases[i].type) != 0) {
            fail_msg("%s: %s: got \"%s\", want %s", cases[i].name,
                     cases[i].value ? cases[i].value : "(absent)", got, cases[i].type);
        }
    }
    ddb_credentials_free(c);
    ddb_credentials_free(wrong);
}

static void credentials_file_errors(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "", "# only a comment\n", "AKID\n", "AKID secret extra\n", "AKID secret\nAKID other\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        ddb_credentials *c = (ddb_credentials *)&c;
        assert_int_equal(ddb_credentials_load(creds_file(bad[i]), &c, err, sizeof err), -1);
        assert_null(c);
        assert_true(err[0] != '\0');
    }
    char long_key[300];
    memset(long_key, 'k', 200);
    snprintf(long_key + 200, 100, " secret\n");
    char err[256];
    ddb_credentials *c = NULL;
    assert_int_equal(ddb_credentials_load(creds_file(long_key), &c, err, sizeof err), -1);
    assert_int_equal(ddb_credentials_load("/nonexistent/credentials", &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/credentials"));
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/ddb_sigv4_test.XXXXXX");
    return mkdtemp(g_dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/credentials", g_dir);
    unlink(path);
    return rmdir(g_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(botocore_signature_verifies),
        cmocka_unit_test(changes_are_refused),
        cmocka_unit_test(credentials_file_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
