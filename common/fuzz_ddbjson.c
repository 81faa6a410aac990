/*
 * fuzz_ddbjson.c: libFuzzer target for the DynamoDB JSON decoder (ddbjson.h),
 * which reads every item and value a client, the CLI or a config hands over
 * as text. Each input is tried as an item and as one typed value: the parse
 * must either fail with an error text or succeed, and what succeeds must
 * survive a round trip (formatted, parsed again, equal; formatted again, the
 * same text), and its text must be what jansson dumps of its document.
 *
 * Built and run by cmake/fuzz-run.sh (ctest fuzz_ddbjson_test, make fuzz)
 * with clang -fsanitize=fuzzer,address; its corpus is common/fuzz/corpus/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ddbjson.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_ddbjson: invariant failed: %s\n", what);
        abort();
    }
}

static void check_item(const char *text, size_t len)
{
    item *it = NULL, *back = NULL;
    char err[256] = "";
    if (ddbjson_parse_item(text, len, &it, err, sizeof err) != 0) {
        must(err[0] != '\0', "a failed item parse says why");
        return;
    }
    char *out = ddbjson_format_item(it);
    must(out != NULL, "format of a parsed item");
    json_t *doc = ddbjson_item_to_json(it);
    char *ref = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    must(ref != NULL && strcmp(out, ref) == 0, "the text is jansson's dump of the document");
    free(ref);
    json_decref(doc);
    must(ddbjson_parse_item(out, strlen(out), &back, err, sizeof err) == 0,
         "parse of a formatted item");
    must(item_eq(it, back), "item round trip");
    char *again = ddbjson_format_item(back);
    must(again != NULL && strcmp(out, again) == 0, "formatting a round-tripped item");
    free(again);
    free(out);
    item_free(back);
    item_free(it);
}

static void check_value(const char *text, size_t len)
{
    attr_value v, back;
    char err[256] = "";
    if (ddbjson_parse_value(text, len, &v, err, sizeof err) != 0) {
        must(err[0] != '\0', "a failed value parse says why");
        return;
    }
    char *out = ddbjson_format_value(&v);
    must(out != NULL, "format of a parsed value");
    must(ddbjson_parse_value(out, strlen(out), &back, err, sizeof err) == 0,
         "parse of a formatted value");
    must(item_value_eq(&v, &back), "value round trip");
    free(out);
    item_value_fini(&back);
    item_value_fini(&v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_item((const char *)data, size);
    check_value((const char *)data, size);
    return 0;
}
