/*
 * cmocka_skip.c: makes a cmocka test that skipped visible to ctest.
 *
 * cmocka prints "[  SKIPPED ]" for a test that called skip() but counts it
 * as passed: cmocka_run_group_tests returns the number of failures only, so
 * the executable exits 0 and ctest reports it as passed. Every lapse_test()
 * executable is linked with this file and with
 * -Wl,--wrap=_skip,--wrap=_cmocka_run_group_tests (cmake/lapse_test.cmake):
 *
 * 1. skip() (cmocka's macro for _skip) counts the skip, then skips as before.
 * 2. When the group ran with no failure but at least one skip, the runner
 *    returns 77, the executable's exit status (main returns the runner's
 *    result), which lapse_test() declares as SKIP_RETURN_CODE: ctest says
 *    "Skipped", and `make test` fails unless the test may skip
 *    (cmake/check-skips.sh).
 * 3. A failure wins over a skip: the runner's own failure count is returned.
 *
 * Not thread-safe: skip() is called from the test's main thread, as cmocka
 * requires anyway (it longjmps back to the runner).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

/* ctest's SKIP_RETURN_CODE for every lapse_test() (and the scripts' 77). */
#define SKIPPED_EXIT 77

static int skipped; /* skip() calls so far in this process */

void __real__skip(const char *const file, const int line);
void __wrap__skip(const char *const file, const int line);
int __real__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                                   const size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown);
int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                                   const size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown);

void __wrap__skip(const char *const file, const int line)
{
    skipped++;
    __real__skip(file, line);
}

/* Returns the group's failure count, else 77 when any test skipped, else 0. */
int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                                   const size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown)
{
    int failed =
        __real__cmocka_run_group_tests(group_name, tests, num_tests, group_setup, group_teardown);
    if (failed == 0 && skipped > 0) {
        printf("%s: %d skip() call(s) and no failure: exit %d, reported as skipped\n", group_name,
               skipped, SKIPPED_EXIT);
        fflush(stdout);
        return SKIPPED_EXIT;
    }
    return failed;
}
