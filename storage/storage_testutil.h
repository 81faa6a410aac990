/*
 * storage_testutil.h: scratch directories for the unit tests that open a real
 * RocksDB (storage/db_test.c, partition/store_test.c). Test-only; header-only;
 * its exports are testdir_*.
 *
 * testdir_make creates a fresh directory under $LAPSE_TEST_TMP (set by ctest,
 * created if missing) or /tmp; testdir_remove deletes it recursively.
 * testdir_setup / testdir_teardown are the cmocka fixture of a test that
 * needs one such directory and an error buffer (testdir_fixture), and
 * testdir_assert_ok fails a test with a call's error and that buffer.
 */
#ifndef LAPSE_STORAGE_TESTUTIL_H
#define LAPSE_STORAGE_TESTUTIL_H

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes the new directory's path into out. Returns 0, or -1 with errno. */
static inline int testdir_make(char *out, size_t outlen, const char *tag)
{
    const char *base = getenv("LAPSE_TEST_TMP");
    if (base == NULL || base[0] == 0) {
        base = "/tmp";
    }
    if (mkdir(base, 0755) != 0 && errno != EEXIST) {
        return -1;
    }
    if ((size_t)snprintf(out, outlen, "%s/%s-XXXXXX", base, tag) >= outlen) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkdtemp(out) != NULL ? 0 : -1;
}

static inline int testdir_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static inline void testdir_remove(const char *path)
{
    nftw(path, testdir_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A test's scratch directory and the error buffer of its calls. */
typedef struct testdir_fixture {
    char dir[512];
    char err[512];
} testdir_fixture;

static inline int testdir_setup(void **state)
{
    testdir_fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || testdir_make(f->dir, sizeof(f->dir), "storage_test") != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static inline int testdir_teardown(void **state)
{
    testdir_fixture *f = *state;
    testdir_remove(f->dir);
    free(f);
    return 0;
}

/* Fails the test when call returns other than 0, with its code and f->err
 * (for files that include cmocka.h and lapse_err.h). */
#define testdir_assert_ok(call, f)                                                                 \
    do {                                                                                           \
        int rv_ = (call);                                                                          \
        if (rv_ != 0) {                                                                            \
            fail_msg("%s returned %d (%s): %s", #call, rv_, lapse_strerror(rv_), (f)->err);        \
        }                                                                                          \
    } while (0)

#endif
