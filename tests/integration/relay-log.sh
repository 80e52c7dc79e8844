#!/bin/bash
# libwebsockets' own log lines in server-min's log: a peer's bytes that it quotes are
# escaped like every other line, a line never runs into the next record (--log-format json
# stays one JSON object a line), and a flood of them is held to LWS_LOG_BURST a second
# (lib/lws-log.c). Nothing but server-min on two loopback ports; no token needed to make
# libwebsockets complain, so anyone who reaches a listener can.
. "$(dirname "$0")/../lib.sh"
need_root
need_bins server-min pistis
command -v python3 >/dev/null || missing "no python3"
W=$(scratch)
SP=$((20000 + RANDOM % 12000)); CP=$((SP + 1))
cleanup() {
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	wait 2>/dev/null
	root_cleanup # this trap replaces lib.sh's: the scratch directory goes here
}
trap cleanup EXIT

start() { # extra server-min options
	cat >"$W/pistis.json" <<J
{"listen": {"sandbox": "127.0.0.1:$SP", "client": "127.0.0.1:$CP"},
 "client_token": "client-token-0123456789",
 "sandboxes": [{"name": "s1", "token": "sandbox-token-0123456789"}]}
J
	: >"$W/smin.log"
	"$BIN/server-min" --config "$W/pistis.json" "$@" 2>"$W/smin.log" &
	SM=$!
	wait_port "$CP"
}
stop() { kill "$SM" 2>/dev/null; wait "$SM" 2>/dev/null; SM=; }
# handshake PORT N PROTOCOL-as-python-bytes [TOKEN [together]]: N upgrade requests naming
# PROTOCOL, one after another, or with "together" all sent before any answer is read (so
# they reach server-min within one of its rate windows however slow this machine is)
handshake() {
	python3 - "$1" "$2" "$3" "${4:-x}" "${5:-}" <<'PY'
import base64, os, socket, sys
port, n, proto, token = int(sys.argv[1]), int(sys.argv[2]), eval(sys.argv[3]), sys.argv[4].encode()
together = sys.argv[5] == "together"
def send():
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    s.sendall(b"GET /v1/ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Key: " + base64.b64encode(os.urandom(16)) +
              b"\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: " + proto +
              b"\r\nAuthorization: Bearer " + token + b"\r\n\r\n")
    return s
def finish(s):
    try:
        s.recv(300)
    except OSError:
        pass
    s.close()
if together:
    for s in [send() for _ in range(n)]:
        finish(s)
else:
    for _ in range(n):
        finish(send())
PY
}
# Bytes a terminal or a log reader would act on: C0 controls but \n, DEL, and anything
# outside ASCII (C1 controls, U+202E, invalid UTF-8).
raw_controls() { LC_ALL=C grep -c $'[\x01-\x09\x0b-\x1f\x7f-\xff]' "$1"; }

# --- JSON: a malformed protocol list 40 times on each listener, then a wrong token ---------
start --log-format json || missing "server-min did not listen"
EVIL='b"a\x1b[2J\x1b]0;owned\x07\xc2\x9b2J\xe2\x80\xaeb"'
t0=$(date +%s%N)
handshake "$CP" 40 "$EVIL"
handshake "$SP" 40 "$EVIL"
sleep 1.1 # the next second's first libwebsockets line says how many were left out
handshake "$CP" 1 "$EVIL"
handshake "$SP" 1 'b"pistis.v1"' wrong-token-0123456789
sleep 1.1 # a window of its own for the last burst: more than its share, all at once
handshake "$CP" 15 "$EVIL" x together
t1=$(date +%s%N)
sleep 0.3
stop
nonjson=$(python3 -c '
import json, sys
bad = 0
for l in open(sys.argv[1], "rb"):
    try:
        json.loads(l)
    except ValueError:
        bad += 1
print(bad)' "$W/smin.log")
is "json: every line of the log is one JSON object" "$nonjson" 0
like "json: libwebsockets' complaint is logged" "$(cat "$W/smin.log")" '"libwebsockets: [^"]*protocol'
like "json: the wrong token is its own record after them" "$(cat "$W/smin.log")" \
	'^\{"ts":[0-9.]+,"level":"warning","prog":"server-min","msg":"Refused a sandbox connection from 127\.0\.0\.1 with a wrong token"'
is "json: no raw control or non-ASCII byte in the log" "$(raw_controls "$W/smin.log")" 0
n=$(grep -c '"libwebsockets: ' "$W/smin.log")
secs=$(( (t1 - t0) / 1000000000 + 2 ))
ok "json: 96 complaints in $(( (t1 - t0) / 1000000 )) ms gave ${n} lines (<= 10 a second and the count at exit: $((secs * 10 + 1)))" \
	test "$n" -ge 1 -a "$n" -le $((secs * 10 + 1))
like "json: the line after a held-back stretch counts what was left out" "$(cat "$W/smin.log")" \
	'earlier lines not logged'
like "json: what is still held back at exit is counted in a line of its own" \
	"$(tail -n 3 "$W/smin.log")" '"libwebsockets: [0-9]+ more lines not logged \(at most 10 a second\)"'

# --- text, -v: libwebsockets' notice quotes the protocol the peer named -------------------
start -v || { echo "# server-min did not listen again"; exit 1; }
handshake "$CP" 1 'b"a\x1bb"'
handshake "$SP" 1 'b"\xc2\x9b2J\x08\x7f\xe2\x80\xaegnirts"'
sleep 0.3
stop
like "-v: libwebsockets' lines carry the program's prefix" "$(cat "$W/smin.log")" '^server-min: libwebsockets: '
is "-v: no raw control or non-ASCII byte in the log" "$(raw_controls "$W/smin.log")" 0
like "-v: the peer's bytes are there, escaped (ESC)" "$(cat "$W/smin.log")" 'protocol \\"a\\x1bb\\"'
like "-v: ... (C1 CSI, BS, DEL, U+202E)" "$(cat "$W/smin.log")" \
	'protocol \\"\\xc2\\x9b2J\\x08\\x7f\\xe2\\x80\\xaegnirts\\"'

# --- a wrong token: the line names the peer's address and never the token; the client's upgrade
# is answered 401, and pistis says its token was refused and where it came from (it said "read
# failed": server-min closed without an answer) -------------------------------------------------
# wrong_from ADDR PORT PROTOCOL TOKEN: one upgrade from ADDR (a loopback address of its own, so
# the line must name this peer); prints the answer's status line, or "closed"
wrong_from() {
	python3 - "$@" <<'PY'
import base64, os, socket, sys
addr, port, proto, token = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.create_connection(("127.0.0.1", port), timeout=3, source_address=(addr, 0))
s.sendall(("GET /v1/ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Protocol: %s\r\nAuthorization: Bearer %s\r\n\r\n"
           % (base64.b64encode(os.urandom(16)).decode(), proto, token)).encode())
d = b""
try:
    while b"\r\n" not in d:
        c = s.recv(300)
        if not c:
            break
        d += c
except OSError:
    pass
print(d.split(b"\r\n")[0].decode() if d else "closed")
PY
}
start || { echo "# server-min did not listen again"; exit 1; }
CWRONG=client-wrong-4bq7Zx91 SWRONG=sandbox-wrong-8kd2Lm55
like "wrong client token: the upgrade is answered 401" \
	"$(wrong_from 127.0.0.7 "$CP" pistis-client.v1 "$CWRONG")" '^HTTP/1\.[01] 401 Unauthorized$'
is "wrong sandbox token: no upgrade (unchanged: closed)" \
	"$(wrong_from 127.0.0.8 "$SP" pistis.v1 "$SWRONG")" closed
out=$(PISTIS_URL=ws://127.0.0.1:$CP PISTIS_TOKEN=$CWRONG timeout 20 "$BIN/pistis" ls 2>&1)
rc=$?
is "pistis, wrong \$PISTIS_TOKEN: exit 111" "$rc" 111
like "... saying the server refused its token, from \$PISTIS_TOKEN" "$out" \
	'^pistis: Connection to the server failed: the server refused the client token from \$PISTIS_TOKEN \(HTTP 401\)'
printf '%s\n' "$CWRONG" >"$W/ct" && chmod 600 "$W/ct"
out=$(PISTIS_URL=ws://127.0.0.1:$CP PISTIS_TOKEN= timeout 20 "$BIN/pistis" --token-file "$W/ct" ls 2>&1)
like "pistis --token-file with a wrong token: ... from that file" "$out" \
	"the server refused the client token from --token-file $W/ct \\(HTTP 401\\)"
t0=$(date +%s%N)
out2=$(PISTIS_URL=ws://127.0.0.1:$CP PISTIS_TOKEN=$CWRONG timeout 20 "$BIN/pistis" exec --agent a -- true 2>&1)
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
is "pistis exec, wrong token: exit 125 (a connection that failed)" "$rc" 125
ok "... at once, not redialling the same token ($ms ms < 5000)" test "$ms" -lt 5000
like "... saying why" "$out2" 'the server refused the client token from \$PISTIS_TOKEN'
is "pistis: no message quotes the token" "$(printf '%s\n%s\n' "$out" "$out2" | grep -c -- "$CWRONG")" 0
stop
like "log: the client's wrong token names the peer's address" "$(cat "$W/smin.log")" \
	'^server-min: Refused a client connection from 127\.0\.0\.7 with a wrong token$'
like "log: the sandbox's wrong token names the peer's address" "$(cat "$W/smin.log")" \
	'^server-min: Refused a sandbox connection from 127\.0\.0\.8 with a wrong token$'
is "log: neither token is in it" "$(grep -c -e "$CWRONG" -e "$SWRONG" "$W/smin.log")" 0
done_testing
