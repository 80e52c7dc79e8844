# Helpers for the server-min tests that drive tests/integration/wsfake.py (sourced after
# lib.sh, need_root and need_bins server-min; not run): a scratch directory W, the fake
# (FAKE), the sandboxes' and clients' loopback ports (SP, CP), fresh tokens for two
# sandboxes and the client (EVIL, GOOD, CT), and server-min started (SM) and stopped.
W=$(scratch)
FAKE="python3 $(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/wsfake.py"
SP=$((20000 + RANDOM % 12000)); CP=$((SP + 1))
EVIL=evil-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
GOOD=good-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
CT=client-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
cleanup() {
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	wait 2>/dev/null
	root_cleanup # this trap replaces lib.sh's: the scratch directory goes here
}
trap cleanup EXIT
val() { sed -n "s/^$1=//p" "$2" | head -n 1; }
# smin_start SANDBOXES [SANDBOX-LISTENER]: server-min for the sandboxes array SANDBOXES
# (JSON), listening for them on 127.0.0.1:$SP unless a socket path, for the client on
# 127.0.0.1:$CP; its log in $W/smin.log.
smin_start() {
	cat >"$W/pistis.json" <<J
{"listen": {"sandbox": "${2:-127.0.0.1:$SP}", "client": "127.0.0.1:$CP"}, "client_token": "$CT",
 "sandboxes": $1}
J
	: >"$W/smin.log"
	"$BIN/server-min" --config "$W/pistis.json" 2>"$W/smin.log" &
	SM=$!
	wait_port "$CP"
}
stop() { kill "$SM" 2>/dev/null; wait "$SM" 2>/dev/null; SM=; }
alive() { kill -0 "$SM" 2>/dev/null && echo yes; }
