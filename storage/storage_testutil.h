/*
 * storage_testutil.h: scratch directories for the unit tests that open a real
 * RocksDB (storage/db_test.c, partition/store_test.c). Test-only; header-only;
 * its exports are testdir_*.
 *
 * testdir_make creates a fresh directory under $LAPSE_TEST_TMP (set by ctest,
 * created if missing) or /tmp; testdir_remove deletes it recursively.
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

#endif
