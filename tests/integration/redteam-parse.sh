#!/bin/bash
# Parser differentials and the bytes of names, end to end (red team): what a sandbox, or an
# agent's file names, say reaches a client or an operator's terminal only escaped, and never
# as a message the relay must drop. server-min, tests/integration/wsfake.py (a fake sandbox
# and client) and a real pistisd serve in a throwaway Debian root, on loopback.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins server-min pistisd pistis
command -v python3 >/dev/null || missing "no python3"
. "$(dirname "$0")/wsfake-lib.sh"
cleanup() { # wsfake-lib.sh's, and serve
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	wait 2>/dev/null
	root_cleanup
}
R=$(root_fresh debian) || missing "no debian test root"
serve_setup "$R"

smin_start "[{\"name\": \"evil\", \"token\": \"$EVIL\"}, {\"name\": \"s1\", \"token\": \"$(cat "$R/etc/pistis/token")\"}]" ||
	missing "server-min did not listen"

# --- the hello's software: OSC 52, a C1 CSI, a bidi override -------------------------------------
# It was kept as sent and shown raw by sandboxes.list and GET /v1/sandboxes (curl on an
# operator's terminal: U+009B is a CSI, OSC 52 sets the clipboard). Then escaped into 64
# bytes: cut there, unmarked (its 38 bytes are 80 escaped: the "end" was lost).
$FAKE sandbox-software "$SP" "$EVIL" "$CP" "$CT" >"$W/sw.out" 2>&1
[ -z "$(val exception "$W/sw.out")" ] || sed 's/^/# /' "$W/sw.out"
is "software: the hello is answered" "$(val hello "$W/sw.out")" ok
is "software: sandboxes.list carries no control or bidi character of it" \
	"$(val software_raw "$W/sw.out")" no
is "software: ... it is C-escaped" "$(val software "$W/sw.out")" \
	"'pistisd \\\\x1b]52;c;aGk=\\\\x07\\\\xc2\\\\x9b2J\\\\xe2\\\\x80\\\\xaeevil\\\\x01\\\\x01\\\\x01\\\\x01\\\\x01\\\\x01\\\\x01end'"
like "software: server-min's log has it escaped once" "$(cat "$W/smin.log")" \
	"Sandbox 'evil' said hello \\(pistisd \\\\x1b]52;c;aGk=\\\\x07\\\\xc2\\\\x9b2J\\\\xe2\\\\x80\\\\xaeevil\\\\x01\\\\x01\\\\x01\\\\x01\\\\x01\\\\x01\\\\x01end\\)"
if command -v curl >/dev/null; then
	curl -s -H "Authorization: Bearer $CT" "http://127.0.0.1:$CP/v1/sandboxes" >"$W/api.out"
	like "software: GET /v1/sandboxes names the sandbox" "$(cat "$W/api.out")" '"name":"evil"'
	is "software: ... with no ESC, BEL, C1 or U+202E byte in its answer" \
		"$(LC_ALL=C grep -c $'\x1b\|\x07\|\xc2\x9b\|\xe2\x80\xae' "$W/api.out")" 0
else
	untested "software: GET /v1/sandboxes names the sandbox" "no curl"
fi

# --- a start-up finding that quotes a name an agent chose ----------------------------------------
# A volume mounted (without nosuid, as docker -v does) in a directory of a tree agents write:
# an agent renames that directory (the mount point itself cannot be renamed, its parent can)
# to bytes that are not UTF-8, and the next serve's start-up check names the mount point in
# nosuid_workspaces. The value went raw into sandbox.status: every answer was invalid UTF-8,
# which server-min drops as malformed (the client waited for ever; 16 cut the sandbox off).
mkdir -p "$R/workspaces"
mount -t tmpfs -o nosuid,nodev ws "$R/workspaces"
bad="sub$(printf '\xff\xc2\x9b')"
mkdir -p "$R/workspaces/p/$bad/nm"
mount -t tmpfs cache "$R/workspaces/p/$bad/nm"
(in_root_exec "$R" pistisd serve --relay "ws://127.0.0.1:$SP" --token-file /etc/pistis/token \
	--name s1 ${ALLOW:+--allow $ALLOW}) >"$W/pd.log" 2>&1 &
PD=$!
export PISTIS_URL=ws://127.0.0.1:$CP PISTIS_TOKEN=$CT PISTIS_SANDBOX=s1
for _ in $(seq 100); do "$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
like "finding: serve's log names the mount point escaped" "$(cat "$W/pd.log")" \
	'nosuid_workspaces: warn \(/workspaces/p/sub\\xff\\xc2\\x9b/nm: a mount beneath it'
st=$(timeout 20 "$BIN/pistis" call sandbox.status 2>&1)
like "finding: sandbox.status is answered" "$st" '"ok":true'
like "... with the value escaped as the log has it" "$st" \
	'"name":"nosuid_workspaces","status":"warn","value":"/workspaces/p/sub\\\\xff\\\\xc2\\\\x9b/nm: '
unlike "... and server-min dropped no message of s1's" "$(cat "$W/smin.log")" "Sandbox 's1' sent"
is "server-min and serve still running" "$(alive) $(kill -0 "$PD" 2>/dev/null && echo yes)" "yes yes"
done_testing
