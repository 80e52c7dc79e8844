#!/bin/bash
# server-min under valgrind memcheck: requests through a real sandbox, then SIGTERM; what it
# allocated is freed at its exit (a leak there hides real ones from the next look). Its
# per-sandbox tables of requests in flight were lost at every exit: the cleanup freed them
# in a loop over the sandboxes it ran after the config (and the count) was zeroed.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
R=$(root_fresh debian) || { echo "1..1"; echo "not ok 1 no debian test root"; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/pistis-relay-leaks.$$.XXXXXX")
trap 'serve_test_cleanup; rm -rf "$W"' EXIT
if ! command -v valgrind >/dev/null; then
	echo "1..1"
	echo "not ok 1 valgrind is not installed (scripts/bootstrap.sh check installs it)"
	exit 1
fi
in_root "$R" pistisd users ensure-base >/dev/null
in_root "$R" pistisd users ensure leak1 --uid 31060 >/dev/null || echo "# ensure failed"
relay_config "$R" "$W"
valgrind --leak-check=full --show-leak-kinds=all --log-file="$W/vg.log" \
	"$BIN/server-min" --config "$W/pistis.json" >>"$W/smin.log" 2>&1 &
SM=$!
(in_root_exec "$R" pistisd serve --relay "ws://127.0.0.1:$SP" --token-file /etc/pistis/token \
	--name s1 ${ALLOW:+--allow $ALLOW}) >"$W/pd.log" 2>&1 &
PD=$!
up=no
for _ in $(seq 300); do
	"$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && { up=yes; break; }
	sleep 0.1
done
is "the sandbox connected to server-min under valgrind" "$up" yes
is "a command ran through it" "$("$BIN/pistis" exec --agent leak1 -- echo hi 2>&1)" hi
is "a second one" "$("$BIN/pistis" exec --agent leak1 -- echo there 2>&1)" there
kill -TERM "$SM"
wait "$SM"
SM=
sed -n '/HEAP SUMMARY/,$p' "$W/vg.log" | sed 's/^==[0-9]*== */# /'
like "server-min freed what it allocated" "$(cat "$W/vg.log")" 'in use at exit: 0 bytes in 0 blocks'
done_testing
