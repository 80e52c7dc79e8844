#!/bin/bash
# Parser differentials and the bytes of names, end to end (red team): what a sandbox says
# of itself reaches an operator's terminal only escaped. Nothing but server-min and
# tests/integration/wsfake.py (a fake sandbox and client) on two loopback ports.
. "$(dirname "$0")/../lib.sh"
need_root
need_bins server-min
command -v python3 >/dev/null || { echo "1..0 # SKIP no python3"; exit 0; }
. "$(dirname "$0")/wsfake-lib.sh"

smin_start "[{\"name\": \"evil\", \"token\": \"$EVIL\"}]" ||
	{ echo "1..0 # SKIP server-min did not listen"; exit 0; }

# --- the hello's software: OSC 52, a C1 CSI, a bidi override -------------------------------------
# It was kept as sent and shown raw by sandboxes.list and GET /v1/sandboxes (curl on an
# operator's terminal: U+009B is a CSI, OSC 52 sets the clipboard).
$FAKE sandbox-software "$SP" "$EVIL" "$CP" "$CT" >"$W/sw.out" 2>&1
[ -z "$(val exception "$W/sw.out")" ] || sed 's/^/# /' "$W/sw.out"
is "software: the hello is answered" "$(val hello "$W/sw.out")" ok
is "software: sandboxes.list carries no control or bidi character of it" \
	"$(val software_raw "$W/sw.out")" no
is "software: ... it is C-escaped" "$(val software "$W/sw.out")" \
	"'pistisd \\\\x1b]52;c;aGk=\\\\x07\\\\xc2\\\\x9b2J\\\\xe2\\\\x80\\\\xaeevil'"
like "software: server-min's log has it escaped once" "$(cat "$W/smin.log")" \
	"Sandbox 'evil' said hello \\(pistisd \\\\x1b]52;c;aGk=\\\\x07\\\\xc2\\\\x9b2J\\\\xe2\\\\x80\\\\xaeevil\\)"
if command -v curl >/dev/null; then
	curl -s -H "Authorization: Bearer $CT" "http://127.0.0.1:$CP/v1/sandboxes" >"$W/api.out"
	like "software: GET /v1/sandboxes names the sandbox" "$(cat "$W/api.out")" '"name":"evil"'
	is "software: ... with no ESC, BEL, C1 or U+202E byte in its answer" \
		"$(LC_ALL=C grep -c $'\x1b\|\x07\|\xc2\x9b\|\xe2\x80\xae' "$W/api.out")" 0
else
	skip "software: GET /v1/sandboxes names the sandbox" "no curl"
	skip "software: ... with no ESC, BEL, C1 or U+202E byte in its answer" "no curl"
fi
is "server-min still running" "$(alive)" yes
stop
done_testing
