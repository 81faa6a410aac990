#!/bin/sh
# check-skips.sh BUILD_DIR JUNIT: fails when a test of the ctest run that wrote
# the JUnit report JUNIT (ctest --output-junit) skipped, unless the test has
# the label may-skip (it needs what deploy/install-deps.sh cannot give: root,
# network namespaces, a working systemd). Run by `make test`, so a test that
# must run in CI cannot pass by skipping: cmocka tests exit 77 when any of
# their cases called skip() (cmake/cmocka_skip.c), scripts exit 77 themselves.
# Prints every skip either way. Exit: 0 no forbidden skip, 1 otherwise.
set -eu

build=$1
junit=$2
[ -f "$junit" ] || {
    echo "check-skips: no JUnit report $junit" >&2
    exit 1
}

# Test names: ctest writes one <testcase name="N" ... status="notrun"> each.
skipped=$(grep -o '<testcase name="[^"]*"[^>]*status="notrun"' "$junit" |
    sed 's/^<testcase name="\([^"]*\)".*/\1/')
allowed=$(ctest --test-dir "$build" -N -L '^may-skip$' | sed -n 's/^ *Test *#[0-9]*: *//p')

bad=0
for t in $skipped; do
    if printf '%s\n' "$allowed" | grep -qx "$t"; then
        echo "check-skips: $t skipped (allowed: label may-skip)"
    else
        echo "check-skips: $t skipped, but it must run here (no label may-skip): FAIL" >&2
        bad=1
    fi
done
exit $bad
