# shellcheck shell=bash
# tests/lib/tap.sh: test points for the shell tests, sourced (not run). Each test point prints
# "ok N - what" or "not ok N - what"; the script ends with tap_done, whose "N passed, M failed"
# line is what ctest's output and CI read, and whose status is the script's.
pass=0
fail=0

ok() {
    pass=$((pass + 1))
    echo "ok $((pass + fail)) - $*"
}
not_ok() {
    fail=$((fail + 1))
    echo "not ok $((pass + fail)) - $*"
}
# check DESCRIPTION CMD...: one test point, passed when CMD succeeds.
check() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else not_ok "$what"; fi
}
# The closing line; returns non-zero when anything failed.
tap_done() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
