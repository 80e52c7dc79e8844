#!/bin/bash
# Promise 6 (docs/security.md) for server-min: it stays up and holds no more after many
# connections than after a few. A fake sandbox and thousands of client connections
# (relay-soak.py): commands that end and are acknowledged, clients gone before an answer or
# in the middle of a command, attaches, malformed requests, connections closed during the
# handshake or with a wrong token, requests the sandbox never answers, answers and frames nobody asked for, the sandbox gone
# with requests in flight and back. server-min's fds, resident and data size after the
# rounds are within a small bound of what they were after a warm-up. Loopback only.
. "$(dirname "$0")/../lib.sh"
need_root
need_bins server-min
command -v python3 >/dev/null || missing "no python3"
. "$(dirname "$0")/wsfake-lib.sh"
ROUNDS=${PISTIS_SOAK_ROUNDS:-100}
smin_start "[{\"name\": \"s1\", \"token\": \"$GOOD\"}]"
timeout 300 python3 "$(dirname "$0")/relay-soak.py" "$SP" "$GOOD" "$CP" "$CT" "$SM" "$ROUNDS" \
	>"$W/out" 2>&1
sed 's/^/# /' "$W/out"
v() { val "$1" "$W/out"; }
ok "$ROUNDS rounds (about $((ROUNDS * 6)) client connections) in $(v seconds) s" test -n "$(v seconds)"
is "server-min holds no more fds than after the warm-up" "$(v d_fds)" 0
ok "its resident size grew by less than 1 MiB: $(v d_rss_kb) KiB" test "$(v d_rss_kb)" -lt 1024
ok "its data size grew by less than 2 MiB: $(v d_data_kb) KiB" test "$(v d_data_kb)" -lt 2048
is "requests never answered, their clients gone, leave nothing pending (no limit in 5000)" \
	"$(v unanswered_limit)" ""
is "server-min is still running" "$(alive)" yes
done_testing
