#!/usr/bin/env bash
# skip_report_test: a skipped test is reported as skipped, and `make test`'s
# check fails on a skip that is not allowed.
#
#   tests/skip_report_test.sh SKIP_PROBE CHECK_SKIPS
#
# 1. skip_probe (a cmocka program linked as every lapse_test) exits 0 when
#    nothing skipped, 77 when a case skipped, 1 when a case failed and
#    another skipped.
# 2. In a scratch ctest directory, a skipping test is "Skipped" in the JUnit
#    report; cmake/check-skips.sh accepts it with the label may-skip and
#    fails, naming it, without.
set -euo pipefail

probe=$(realpath "$1") check=$(realpath "$2")
fail() {
  echo "skip_report_test: FAIL: $*" >&2
  exit 1
}

rc=0; "$probe" >/dev/null 2>&1 || rc=$?
[[ $rc == 0 ]] || fail "nothing skipped: exit $rc, want 0"
rc=0; SKIP=1 "$probe" >/dev/null 2>&1 || rc=$?
[[ $rc == 77 ]] || fail "a case skipped: exit $rc, want 77"
rc=0; SKIP=1 FAIL=1 "$probe" >/dev/null 2>&1 || rc=$?
[[ $rc == 1 ]] || fail "a case skipped, another failed: exit $rc, want 1"

tmp_root=${LAPSE_TEST_TMP:-/tmp}
mkdir -p "$tmp_root"
tmp=$(mktemp -d "$tmp_root/skip_report_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# $1: the skipping test's labels. Runs ctest there, then check-skips.sh.
run_check() {
  cat >"$tmp/CTestTestfile.cmake" <<EOT
add_test(probe_runs "$probe")
set_tests_properties(probe_runs PROPERTIES SKIP_RETURN_CODE 77)
add_test(probe_skips "$probe")
set_tests_properties(probe_skips PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT "SKIP=1" LABELS "$1")
EOT
  rm -f "$tmp/junit.xml"
  ctest --test-dir "$tmp" --output-junit junit.xml >"$tmp/ctest.out" 2>&1 ||
    fail "ctest failed: $(cat "$tmp/ctest.out")"
  grep -q 'probe_skips .*Skipped' "$tmp/ctest.out" || fail "ctest did not say Skipped: $(cat "$tmp/ctest.out")"
  "$check" "$tmp" "$tmp/junit.xml" >"$tmp/check.out" 2>&1
}

run_check "x;may-skip" || fail "an allowed skip failed the check: $(cat "$tmp/check.out")"
grep -q 'probe_skips skipped (allowed' "$tmp/check.out" || fail "allowed skip not printed: $(cat "$tmp/check.out")"
if run_check "x"; then
  fail "a skip without may-skip passed the check: $(cat "$tmp/check.out")"
fi
grep -q 'probe_skips skipped, but it must run' "$tmp/check.out" ||
  fail "the forbidden skip is not named: $(cat "$tmp/check.out")"
grep -q 'probe_runs' "$tmp/check.out" && fail "a test that ran is reported: $(cat "$tmp/check.out")"
echo "skip_report_test: OK"
