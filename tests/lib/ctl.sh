# shellcheck shell=bash
# tests/lib/ctl.sh: helpers for the shell tests that run kpssh-controller as its own process,
# sourced (not run) after the lab's env.sh and tests/lib/tap.sh. It sets BIN (the controller
# under test; KPSSH_CONTROLLER_BIN overrides), KUBECTL and kc (the lab's kubectl); the caller
# defines NS and LEASE (the Lease the replicas contend for) before calling holder or holder_is.

BIN="${KPSSH_CONTROLLER_BIN:-$PWD/../src/kpssh-controller}"
[ -x "$BIN" ] || {
    echo "kpssh-controller not found at $BIN (set KPSSH_CONTROLLER_BIN)" >&2
    exit 1
}
KUBECTL=("$KPSSH_LAB_KUBECTL" --kubeconfig "$KUBECONFIG" --request-timeout=30s)
kc() { "${KUBECTL[@]}" "$@"; }

# HTTP status code and body of a URL; empty/000 when nothing answers within 5 s.
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$1" || true; }
body() { curl -s --max-time 5 "$1" || true; }
is_code() { [ "$(code "$2")" = "$1" ]; }
# The body first: grep -q quitting early would SIGPIPE curl and fail the pipeline. $2 is an
# extended regular expression.
url_has() { grep -qE -- "$2" <<<"$(body "$1")"; }

holder() { kc get lease -n "$NS" "$LEASE" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }
holder_is() { [ "$(holder)" = "$1" ]; }

# wait_until <seconds> command...: polls every 0.2 s; the last try's status.
wait_until() {
    local deadline=$((SECONDS + $1))
    shift
    while [ "$SECONDS" -lt "$deadline" ]; do
        "$@" && return 0
        sleep 0.2
    done
    "$@"
}

dead() { ! kill -0 "$1" 2>/dev/null; }
# The exit status of a child that has ended (wait reaps it).
status_of() {
    local rc=0
    wait "$1" || rc=$?
    echo "$rc"
}
# not_in_file <text> <file>: the text is nowhere in the file; when it is, its first three lines
# go to stderr (the test's log), so a failed check shows what was found.
not_in_file() {
    local found
    found=$(grep -F -m 3 -- "$1" "$2") || return 0
    cut -c1-600 <<<"$found" | sed 's/^/# found: /' >&2
    return 1
}
# Every line of a controller's log is one JSON object.
all_json() { jq -e . "$1" >/dev/null; }
now_ms() { date +%s%3N; }
# log_ms <file> <message> [nth]: the nth log line's time (RFC 3339) with this message, as epoch
# milliseconds; empty (and non-zero) when there is none.
log_ms() {
    local ts
    ts=$(jq -r --arg m "$2" 'select(.message == $m) | .time' "$1" 2>/dev/null | sed -n "${3:-1}p")
    [ -n "$ts" ] && date -d "$ts" +%s%3N
}
