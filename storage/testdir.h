/*
 * testdir.h: the old name of storage_testutil.h, kept only while
 * partition/store_test_util.h still includes it (partition/ is being reworked
 * in parallel); remove it once that include names storage_testutil.h.
 */
#include "storage_testutil.h"
