#!/bin/sh
# Test exec credential plugin. KP_PLUGIN_MODE picks the behaviour; KP_PLUGIN_COUNT (a file)
# gets one line per run so tests can see caching.
[ -n "$KP_PLUGIN_COUNT" ] && echo run >> "$KP_PLUGIN_COUNT"
case "$KP_PLUGIN_MODE" in
token)
    case "$KUBERNETES_EXEC_INFO" in
    *'"kind":"ExecCredential"'*) ;;
    *) echo "no KUBERNETES_EXEC_INFO" >&2; exit 3 ;;
    esac
    printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
    printf '"status":{"token":"plugin-token-%s","expirationTimestamp":"%s"}}\n' \
        "$KP_PLUGIN_SUFFIX" "${KP_PLUGIN_EXP:-2099-01-01T00:00:00Z}"
    ;;
info)
    printf '%s' "$KUBERNETES_EXEC_INFO" >&2
    exit 1
    ;;
fail)
    echo "line one of the failure" >&2
    echo "credentials expired: please log in" >&2
    exit 2
    ;;
sleep)
    exec sleep 30
    ;;
*)
    echo "unknown mode" >&2
    exit 9
    ;;
esac
