#!/bin/bash
# One SIGTERM stops server-min at once, whatever its peers hold open: silent connections,
# requests and upgrades cut in their headers, idle sandbox and client WebSockets, WebSockets
# cut inside a frame, idle keep-alive HTTP with the token, and a client that does not read
# with server-min's answers waiting for it. (Once, with h2c connections held, server-min
# stayed in poll after one SIGTERM and a second one stopped it.) Nothing but server-min and
# python peers on loopback; docs/server-min.md, "Stopping". A SIGHUP stops nothing: it is logged
# and server-min relays on (docs/server-min.md, "SIGHUP").
. "$(dirname "$0")/../lib.sh"
need_root
need_bins server-min
command -v python3 >/dev/null || missing "no python3"
W=$(scratch)
SP=$((20000 + RANDOM % 12000)); CP=$((SP + 1))
CT=client-token-0123456789
ST=sandbox-token-0123456789
cleanup() {
	[ -n "${SM:-}" ] && kill -9 "$SM" 2>/dev/null
	[ -n "${HP:-}" ] && kill "$HP" 2>/dev/null
	exec 7>&- 2>/dev/null
	wait 2>/dev/null
	root_cleanup # this trap replaces lib.sh's: the scratch directory goes here
}
trap cleanup EXIT
cat >"$W/pistis.json" <<J
{"listen": {"sandbox": "127.0.0.1:$SP", "client": "127.0.0.1:$CP"}, "client_token": "$CT",
 "sandboxes": [{"name": "s1", "token": "$ST"}]}
J
cat >"$W/hold.py" <<'PY'
# hold.py SPORT CPORT CTOKEN STOKEN N: N connections of each kind, held until stdin closes
import json, os, socket, sys
sys.path.insert(0, os.environ["WSFAKE_DIR"])
from wsfake import WS, client, fake_sandbox
sp, cp, ct, st, n = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
held, kinds, k = [], {}, 0
def conn(port, rcvbuf=0):
    global k
    k += 1
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind(("127.0.0.%d" % (2 + k % 8), 0))  # 8 peers, each under the per-peer bound
    s.connect(("127.0.0.1", port))
    return s
def hold(kind, s):
    held.append(s)
    kinds[kind] = kinds.get(kind, 0) + 1
for i in range(n):
    for port in (sp, cp):
        hold("silent", conn(port))
        s = conn(port)
        s.sendall(b"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nX-Half: ")
        hold("half_header", s)
    s = conn(cp)
    s.sendall(("GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
               % ct).encode())
    if s.recv(4096).startswith(b"HTTP/1.1 200"):
        hold("keepalive", s)
    c = client(cp, ct)
    hold("ws_idle", c.s)
    c = client(cp, ct)
    c.s.sendall(c.encode("x" * 4096)[:100])  # a 4 KiB frame, 100 bytes of it
    hold("ws_half_frame", c.s)
sb = fake_sandbox(sp, st, "s1")
hold("sandbox_idle", sb.s)
sb = WS(sp, "/v1/sandbox", "pistis.v1", st)  # takes over: the first one is closed
sb.send(json.dumps({"id": "hello", "op": "hello", "version": 1, "sandbox": "s1"}))
sb.recv_json("hello")
sb.s.sendall(sb.encode("y" * 4096)[:100])
hold("sandbox_half_frame", sb.s)
# a client that does not read: server-min's answers fill its socket and wait in lws
c = client(cp, ct)
c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
req = b"".join(c.encode(json.dumps({"id": "l%d" % i, "op": "sandboxes.list"}))
               for i in range(20000))
c.s.settimeout(5)
try:
    c.s.sendall(req)
    hold("client_not_reading", c.s)
except OSError:
    pass
print("ready " + " ".join("%s=%d" % kv for kv in sorted(kinds.items())), flush=True)
sys.stdin.read()
PY
export WSFAKE_DIR
WSFAKE_DIR=$(cd "$(dirname "$0")" && pwd)

# stop_round N: server-min, N of each kind held, one SIGTERM; prints "MS RC HELD"
stop_round() {
	"$BIN/server-min" --config "$W/pistis.json" 2>"$W/smin.log" &
	SM=$!
	wait_port "$CP" || { echo "- - server-min-did-not-listen"; return; }
	rm -f "$W/fifo" && mkfifo "$W/fifo"
	python3 "$W/hold.py" "$SP" "$CP" "$CT" "$ST" "$1" <"$W/fifo" >"$W/hold.out" 2>&1 &
	HP=$!
	exec 7>"$W/fifo"
	for _ in $(seq 300); do grep -q '^ready' "$W/hold.out" && break; sleep 0.1; done
	sleep 0.3 # server-min has read what each connection sent
	t0=$(date +%s%N)
	kill -TERM "$SM"
	while kill -0 "$SM" 2>/dev/null; do
		t1=$(date +%s%N)
		[ $((t1 - t0)) -lt 3000000000 ] || break
		sleep 0.005
	done
	t1=$(date +%s%N)
	if kill -0 "$SM" 2>/dev/null; then
		kill -9 "$SM"
		rc=running
	fi
	wait "$SM"
	rc=${rc:-$?}
	SM=
	exec 7>&-
	wait "$HP"
	HP=
	echo "$(((t1 - t0) / 1000000)) $rc $(sed -n 's/^ready //p' "$W/hold.out" | tr ' ' ,)"
}
for round in 1 2 3; do
	set -- $(stop_round 40)
	like "round $round: every kind of connection is held" "${3:-}" \
		'client_not_reading=1,half_header=80,keepalive=40,sandbox_half_frame=1,sandbox_idle=1,silent=80,ws_half_frame=40,ws_idle=40'
	is "round $round: one SIGTERM, server-min exits 0" "${2:-}" 0
	ok "round $round: ... within 1 s (${1:-?} ms)" test "${1:-9999}" -lt 1000
	rc=
done

# A second SIGTERM while the context is torn down waits, blocked, instead of running a
# handler that wakes the context being freed. A shim around libwebsockets (server-min links
# it dynamically) sends the second signal right after lws_context_destroy and fails the
# run if anything then calls lws_cancel_service: without the blocking, the handler did,
# with the freed context.
if command -v cc >/dev/null; then
	cat >"$W/twice.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>
static volatile sig_atomic_t destroyed;
void lws_context_destroy(void *ctx)
{
	void (*real)(void *) = (void (*)(void *))dlsym(RTLD_NEXT, "lws_context_destroy");
	static const char msg[] = "shim: second SIGTERM after lws_context_destroy\n";

	real(ctx);
	destroyed = 1;
	(void)!write(2, msg, sizeof(msg) - 1);
	raise(SIGTERM);
}
void lws_cancel_service(void *ctx)
{
	void (*real)(void *) = (void (*)(void *))dlsym(RTLD_NEXT, "lws_cancel_service");
	static const char msg[] = "lws_cancel_service after lws_context_destroy\n";

	if (destroyed) {
		(void)!write(2, msg, sizeof(msg) - 1);
		_exit(99);
	}
	real(ctx);
}
C
	cc -shared -fPIC -o "$W/twice.so" "$W/twice.c" -ldl
fi
ok "the second-SIGTERM shim is built" test -f "$W/twice.so"
LD_PRELOAD=$W/twice.so "$BIN/server-min" --config "$W/pistis.json" 2>"$W/twice.log" &
SM=$!
ok "server-min listens (second-SIGTERM shim)" wait_port "$CP"
kill -TERM "$SM"
wait "$SM"
is "a SIGTERM during the teardown waits: server-min exits 0" "$?" 0
SM=
like "... the shim sent the second SIGTERM (server-min's lws_context_destroy is the shim's)" \
	"$(cat "$W/twice.log")" '^shim: second SIGTERM after lws_context_destroy$'
unlike "... and nothing wakes the destroyed context" "$(cat "$W/twice.log")" \
	'lws_cancel_service after lws_context_destroy'

# --- SIGHUP: its default action ended server-min, cutting every sandbox and client. Now it is
# logged, nothing is reloaded (docs/server-min.md, "SIGHUP"), and the same connections relay on.
cat >"$W/hup.py" <<'PY'
# hup.py SPORT CPORT CTOKEN STOKEN: a client's ping relayed to the sandbox s1 and answered,
# before and after stdin closes (the test sends SIGHUP in between), on the same connections
import json, os, sys
sys.path.insert(0, os.environ["WSFAKE_DIR"])
from wsfake import client, fake_sandbox
sp, cp, ct, st = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
sb = fake_sandbox(sp, st, "s1")
c = client(cp, ct)
def relay(tag):
    try:
        c.send(json.dumps({"id": tag, "op": "ping", "sandbox": "s1"}))
        fwd = sb.recv_json(timeout=5)
        sb.send(json.dumps({"id": fwd["id"], "ok": True}))
        o = c.recv_json(tag, timeout=5)
        return "ok" if o.get("ok") else json.dumps(o)
    except Exception as e:
        return "error %r" % e
print("before=" + relay("b"), flush=True)
sys.stdin.read()
print("after=" + relay("a"), flush=True)
PY
"$BIN/server-min" --config "$W/pistis.json" 2>"$W/hup.log" &
SM=$!
ok "server-min listens (SIGHUP)" wait_port "$CP"
rm -f "$W/fifo" && mkfifo "$W/fifo"
python3 "$W/hup.py" "$SP" "$CP" "$CT" "$ST" <"$W/fifo" >"$W/hup.out" 2>&1 &
HP=$!
exec 7>"$W/fifo"
for _ in $(seq 100); do grep -q '^before=' "$W/hup.out" && break; sleep 0.1; done
kill -HUP "$SM"
sleep 0.5
is "SIGHUP: server-min is still running" "$(kill -0 "$SM" 2>/dev/null && echo yes || echo no)" yes
exec 7>&-
wait "$HP"
HP=
is "... a client's request was relayed to the sandbox before it" "$(sed -n 's/^before=//p' "$W/hup.out")" ok
is "... and is after it, on the same connections" "$(sed -n 's/^after=//p' "$W/hup.out")" ok
like "... and it logged that nothing was reloaded, naming the configuration" "$(cat "$W/hup.log")" \
	"SIGHUP: nothing to reload; restart server-min to change its configuration \\($W/pistis.json\\)"
kill -TERM "$SM"
wait "$SM"
is "... and a SIGTERM after it still stops it (exit 0)" "$?" 0
SM=
done_testing
