/*
 * skip_probe.c: a cmocka program for skip_report_test.sh. Its first test
 * calls skip() when $SKIP is set, its second fails when $FAIL is set; built
 * as every lapse_test() is (cmake/cmocka_skip.c), so it must exit 0, 77
 * (skipped) or 1 (a failure, skip or not).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

static void skips_when_asked(void **state)
{
    (void)state;
    if (getenv("SKIP") != NULL) {
        skip();
    }
}

static void fails_when_asked(void **state)
{
    (void)state;
    if (getenv("FAIL") != NULL) {
        fail_msg("FAIL is set");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(skips_when_asked),
        cmocka_unit_test(fails_when_asked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
