#!/bin/bash
# A hostile peer on server-min's listeners before (or without) a token: HTTP framing that
# libwebsockets reads otherwise than RFC 9112 (a proxy in front would see other requests on
# the connection than server-min: request smuggling), keep-alive connections that never
# show a token, keep-alive connections that do show one (they count against the connection
# bounds), upgrades to HTTP/2 (h2c) and CONNECT, wrong tokens against many sandboxes. Nothing but
# server-min on two loopback ports.
. "$(dirname "$0")/../lib.sh"
need_root
need_bins server-min
command -v python3 >/dev/null || missing "no python3"
W=$(scratch)
SP=$((20000 + RANDOM % 12000)); CP=$((SP + 1))
CT=client-token-0123456789
cleanup() {
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	[ -n "${SM2:-}" ] && kill "$SM2" 2>/dev/null
	[ -n "${SM3:-}" ] && kill "$SM3" 2>/dev/null
	[ -n "${SM4:-}" ] && kill "$SM4" 2>/dev/null
	wait 2>/dev/null
	root_cleanup # this trap replaces lib.sh's: the scratch directory goes here
}
trap cleanup EXIT
cat >"$W/pistis.json" <<J
{"listen": {"sandbox": "127.0.0.1:$SP", "client": "127.0.0.1:$CP"},
 "client_token": "$CT", "limits": {"handshakes": 12, "handshakes_per_address": 8},
 "sandboxes": [{"name": "s1", "token": "sandbox-token-0123456789"}]}
J
# A token no client or pistisd can send (a token file refuses spaces, control bytes and more
# than 512 characters; lws copies the header into 640 bytes) matched no connection, every
# one refused as "a wrong token", while --check said ok.
tokcfg() { # FILE CLIENT_TOKEN SANDBOX_TOKEN
	printf '{\n  "client_token": "%s",\n  "sandboxes": [{"name": "a", "token": "%s"}]\n}\n' "$2" "$3" >"$1"
}
long=$(printf 'k%.0s' $(seq 513))
tokcfg "$W/t1.json" "$long" sandbox-token-0123456789
like "config: a client token over 512 characters is refused with its line" \
	"$("$BIN/server-min" --config "$W/t1.json" --check 2>&1)" 't1.json:2: .*client_token.* 16 to 512 printable'
tokcfg "$W/t2.json" "$CT" 'sandbox token 0123456789'
like "config: a sandbox token with a space is refused with its line" \
	"$("$BIN/server-min" --config "$W/t2.json" --check 2>&1)" 't2.json:3: token of sandbox .*a.* 16 to 512 printable'
tokcfg "$W/t3.json" "$CT" 'sandbox-token-0123456789\n'
like "config: a sandbox token with a newline is refused" \
	"$("$BIN/server-min" --config "$W/t3.json" --check 2>&1)" 'token of sandbox .*a.* 16 to 512 printable'
tokcfg "$W/t4.json" "${long:1}" sandbox-token-0123456789
ok "config: a client token of 512 characters validates" "$BIN/server-min" --config "$W/t4.json" --check
# Whoever may write the config chooses the tokens (and the listen addresses): a file
# others may write, or another user's, is refused; a FIFO is refused without waiting.
tokcfg "$W/t5.json" "$CT" sandbox-token-0123456789
for m in 0664 0646; do
	chmod "$m" "$W/t5.json"
	out=$("$BIN/server-min" --config "$W/t5.json" --check 2>&1); rc=$?
	is "config: mode $m (others may write it) is refused" "$rc" 1
	like "... saying who may write it" "$out" "t5.json is owned by 0:0 with mode $m: the config must be root's and writable by no one else \\(whoever may write it chooses the tokens"
done
chmod 0644 "$W/t5.json" && chown 65534 "$W/t5.json"
exits 1 "config: a file of another user's (nobody) is refused" "$BIN/server-min" --config "$W/t5.json" --check
out=$(timeout 10 "$BIN/server-min" --config "$W/t5.json" 2>&1); rc=$?
is "... and server-min does not start from it (111)" "$rc" 111
like "... naming the owner" "$out" "t5.json is owned by 65534:0 with mode 0644"
chown 0 "$W/t5.json"
ok "config: root's, mode 0644: taken" "$BIN/server-min" --config "$W/t5.json" --check
mkfifo "$W/t6.json"
exits 1 "config: a FIFO is refused at once" timeout 5 "$BIN/server-min" --config "$W/t6.json" --check
# ... and so does whoever may write a directory on its way (a rename puts another file in
# its place), or owns a link on it; a sticky directory (/tmp) is believed.
mkdir -m 0777 "$W/open" && cp "$W/t5.json" "$W/open/t7.json"
out=$("$BIN/server-min" --config "$W/open/t7.json" --check 2>&1); rc=$?
is "config: in a directory anyone may write is refused" "$rc" 1
like "... naming the directory, its owner and mode" "$out" \
	"/open is owned by 0:0 with mode 0777: a directory on the way to the config must be root's"
chmod 1777 "$W/open"
ok "config: in a sticky directory: taken" "$BIN/server-min" --config "$W/open/t7.json" --check
ln -s "$W/t5.json" "$W/t8.json" && chown -h 65534 "$W/t8.json"
out=$("$BIN/server-min" --config "$W/t8.json" --check 2>&1); rc=$?
is "config: through a symbolic link of another user's is refused" "$rc" 1
like "... naming the link" "$out" "t8.json is owned by 65534:0 .*a symbolic link on the way to the config must be root's"
ln -s "$W/t5.json" "$W/t9.json"
ok "config: through a root's link: taken" "$BIN/server-min" --config "$W/t9.json" --check
# A token is any printable ASCII, so a generated one may hold "${": ${NAME} was substituted
# inside it, and the error quoted the token into the journal ('bad ${NAME} reference in
# "<the token>"', 'environment variable <the rest of the token> is not set'), or the token
# became another (its "${HOME}" the home's path) without a word. A token is one ${NAME} and
# nothing else, or taken as written (red team).
tokcfg "$W/s1.json" 'cli${Zk4Pq9XwLm2Rt7Vb}3Nc' 'sbx#Tq8${Hy6Jd3Wm5Ks1Fp0'
out=$("$BIN/server-min" --config "$W/s1.json" --check 2>&1); rc=$?
is "config: tokens holding \"\${\" (no variable set) validate" "$rc" 0
unlike "... and no output quotes a piece of either" "$out" 'Zk4Pq9|Hy6Jd3'
SP4=$((SP + 6)); CP4=$((SP + 7))
ct_lit='cli${HOME}Zk4Pq9XwLm2Rt7Vb'
st_lit='sbx#Tq8${Hy6Jd3Wm5Ks1Fp0'
cat >"$W/s2.json" <<J
{"listen": {"sandbox": "127.0.0.1:$SP4", "client": "127.0.0.1:$CP4"},
 "client_token": "$ct_lit", "sandboxes": [{"name": "lit", "token": "$st_lit"}]}
J
"$BIN/server-min" --config "$W/s2.json" 2>"$W/s2.log" &
SM4=$!
wait_port "$CP4" || echo "# the server-min of literal tokens did not listen"
# the sandbox connects with the token as written, and stays while pistis lists it
python3 - "$SP4" "$st_lit" >"$W/s2.out" 2>&1 <<'PY' &
import base64, os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.sendall(("GET /v1/sandbox HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n"
           "Sec-WebSocket-Protocol: pistis.v1\r\nAuthorization: Bearer %s\r\n\r\n"
           % (base64.b64encode(os.urandom(16)).decode(), sys.argv[2])).encode())
print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
time.sleep(4)
PY
SB4=$!
for _ in $(seq 30); do grep -q HTTP "$W/s2.out" && break; sleep 0.1; done
is "a sandbox token holding \"\${\" connects as written" "$(head -n 1 "$W/s2.out")" \
	"HTTP/1.1 101 Switching Protocols"
like "... and a client token holding \"\${HOME}\" lists it, as written" \
	"$(PISTIS_URL=ws://127.0.0.1:$CP4 PISTIS_TOKEN=$ct_lit "$BIN/pistis" ls 2>&1)" '^lit +connected'
exits 111 "... the token with \${HOME} substituted is refused (111, as any wrong token)" \
	env PISTIS_URL=ws://127.0.0.1:$CP4 PISTIS_TOKEN="cli${HOME}Zk4Pq9XwLm2Rt7Vb" "$BIN/pistis" ls
kill "$SM4" "$SB4" 2>/dev/null; wait "$SM4" "$SB4" 2>/dev/null
# A token that is one ${NAME}: still from the environment, the variable named in its errors
# (it is no token), and a name too long says so without quoting the value.
tokcfg "$W/s3.json" "$CT" '${PISTIS_NOPE_UNSET}'
like "config: a sandbox token of one unset \${NAME} names it" \
	"$("$BIN/server-min" --config "$W/s3.json" --check 2>&1)" 's3.json:3: environment variable PISTIS_NOPE_UNSET is not set'
ok "... and is taken from the environment, as it is" \
	env PISTIS_NOPE_UNSET='env${X}-token-0123456789' "$BIN/server-min" --config "$W/s3.json" --check
tokcfg "$W/s4.json" "\${$(printf 'Q%.0s' $(seq 130))}" sandbox-token-0123456789
out=$("$BIN/server-min" --config "$W/s4.json" --check 2>&1)
like "config: a \${NAME} over 127 characters is refused" "$out" 's4.json:2: bad \$\{NAME\} reference'
unlike "... without quoting the value" "$out" 'QQQQ'

"$BIN/server-min" --config "$W/pistis.json" 2>"$W/smin.log" &
SM=$!
wait_port "$CP" || { echo "Bail out! server-min did not listen"; exit 1; }

# framing PORT TOKEN (none when empty): requests whose body framing is ambiguous, each on a connection of its
# own followed by a whole request as its body. Prints NAME=STATUSES (the status of every
# response, comma-separated, then "eof" when server-min closed the connection).
framing() {
	python3 - "$1" "$2" <<'PY'
import base64, os, re, socket, sys
port, token = int(sys.argv[1]), sys.argv[2]
auth = "Authorization: Bearer %s\r\n" % token if token else ""
inner = "GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n%s\r\n" % auth
n = str(len(inner))
upg = ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
       "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Protocol: pistis-client.v1\r\n"
       % base64.b64encode(os.urandom(16)).decode())
cases = [
    ("plain", "GET", ""),
    ("cl-0", "GET", "Content-Length: 0\r\n"),
    ("cl-body", "GET", "Content-Length: %s\r\n" % n),
    ("cl-twice", "GET", "Content-Length: 0\r\nContent-Length: %s\r\n" % n),
    ("cl-list", "GET", "Content-Length: 0, %s\r\n" % n),
    ("cl-hex", "GET", "Content-Length: 0x%x\r\n" % len(inner)),
    ("cl-space", "GET", "Content-Length: %s %s\r\n" % (n[0], n[1:])),
    ("cl-long", "GET", "Content-Length: %s%s\r\n" % ("0" * 40, n)),
    ("te-chunked", "GET", "Transfer-Encoding: chunked\r\n"),
    ("post-cl", "POST", "Content-Length: %s\r\n" % n),
    ("post-none", "POST", ""),
    ("upgrade-cl", "GET", upg + "Content-Length: %s\r\n" % n),
]
for name, method, extra in cases:
    s = socket.create_connection(("127.0.0.1", port), timeout=1)
    s.sendall(("%s /v1/sandboxes HTTP/1.1\r\nHost: x\r\n%s%s\r\n%s"
               % (method, auth, extra, inner)).encode())
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                out += b"\nHTTP/1.1 eof"
                break
            out += d
    except socket.timeout:
        pass
    s.close()
    codes = [c.decode() for c in re.findall(rb"HTTP/1\.[01] (\w+)", out)]
    print("%s=%s" % (name, ",".join(codes)))
PY
}
framing "$CP" "$CT" >"$W/fr.out" 2>&1
val() { sed -n "s/^$1=//p" "$W/fr.out"; }
is "framing: a GET with the token is answered, and so is the one after it" "$(val plain)" 200,200
is "framing: Content-Length: 0 is no body" "$(val cl-0)" 200,200
for c in cl-body cl-twice cl-list cl-hex cl-space cl-long te-chunked post-cl post-none; do
	is "framing: $c is refused with 400 and the connection closed (its body is never a request)" "$(val $c)" 400,eof
done
is "framing: an upgrade with a body is refused, not upgraded" "$(val upgrade-cl)" eof
# --- without the token an answer ends the connection: kept alive, a request every few seconds
# held a place under the handshake bounds for ever (each answer set lws' timeout again) -------
framing "$CP" client-token-wrong-0123 >"$W/fr.out" 2>&1
is "keep-alive: a wrong token is answered 401 and the connection closed" "$(val plain)" 401,eof
framing "$CP" "" >"$W/fr.out" 2>&1
is "keep-alive: no token at all, alike" "$(val plain)" 401,eof
framing "$SP" "sandbox-token-0123456789" >"$W/fr.out" 2>&1
is "keep-alive, sandbox listener: plain HTTP is answered 404 and the connection closed" "$(val plain)" 404,eof
is "framing, sandbox listener: two Content-Lengths are refused with 400" "$(val cl-twice)" 400,eof
is "framing, sandbox listener: Transfer-Encoding is refused with 400" "$(val te-chunked)" 400,eof
# --- with the token, a keep-alive connection still counts against the connection bounds while
# it is open: it counted against none, so one token holder (or a leaked token) held 3000 of
# them from one address (bound 256), each kept by a request every few seconds --------------
python3 - "$CP" "$CT" >"$W/ka.out" 2>&1 <<'PY'
import socket, sys, time
port, token = int(sys.argv[1]), sys.argv[2]
req = ("GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % token).encode()
def ask(src):
    """A keep-alive connection from src that asked once: (socket, status or eof)."""
    s = socket.socket()
    s.settimeout(2)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    try:
        s.sendall(req)
        d = s.recv(4096)
    except OSError:
        d = b""
    return s, d.split(b" ")[1].decode() if d.startswith(b"HTTP/1.1 ") else "eof"
def many(src, n):
    got = [ask(src) for _ in range(n)]
    return [s for s, _ in got], ",".join(sorted(set(st for _, st in got)))
one, st = many("127.0.0.1", 8)
print("per_address_8=" + st)
print("per_address_9th=" + ask("127.0.0.1")[1])
two, st = many("127.0.0.2", 4)
print("total_12=" + st)
print("total_13th=" + ask("127.0.0.3")[1])
one.pop().close()
time.sleep(0.3)
print("after_close=" + ask("127.0.0.1")[1])
for s in one + two:
    s.close()
time.sleep(0.3)  # gone from server-min's count before the next test's connections
PY
val() { sed -n "s/^$1=//p" "$W/ka.out"; }
is "keep-alive with the token: 8 connections from one address are answered" "$(val per_address_8)" 200
is "keep-alive with the token: a 9th from that address is refused (handshakes_per_address 8)" \
	"$(val per_address_9th)" eof
is "keep-alive with the token: 4 from another address are answered" "$(val total_12)" 200
is "keep-alive with the token: a 13th from a third address is refused (handshakes 12)" \
	"$(val total_13th)" eof
is "keep-alive with the token: one closed, its address is answered again" "$(val after_close)" 200
# --- requests that make lws leave HTTP and clear the connection's timeout, without a token:
# "Upgrade: h2c" (the system's libwebsockets has HTTP/2) got 101, CONNECT made a raw socket;
# four of each, silent after that, held this peer's whole handshake bound for ever ---------
python3 - "$CP" "$CT" >"$W/h2.out" 2>&1 <<'PY'
import base64, os, socket, sys, time
port, token = int(sys.argv[1]), sys.argv[2]
reqs = {"h2c": b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
               b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n",
        "connect": b"CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n"}
held = {k: [] for k in reqs}
for k, req in reqs.items():
    for i in range(4):
        s = socket.create_connection(("127.0.0.1", port), timeout=1)
        s.sendall(req)
        try:
            d = s.recv(100)
        except OSError:  # a timeout: held, no answer
            d = b"-"
        if not i:
            print("%s=%s" % (k, d.split(b" ")[1].decode() if d.startswith(b"HTTP/1.1 ") else
                             "eof" if not d else "held"))
        held[k].append(s)
time.sleep(12)  # past lws' 10 s for an unfinished upgrade
for k, conns in held.items():
    n = 0
    for s in conns:
        s.setblocking(False)
        try:
            n += s.recv(1) != b""
        except BlockingIOError:
            n += 1
        except OSError:
            pass
    print("%s_open=%d" % (k, n))
s = socket.create_connection(("127.0.0.1", port), timeout=3)
s.sendall(("GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Protocol: pistis-client.v1\r\nAuthorization: Bearer %s\r\n\r\n"
           % (base64.b64encode(os.urandom(16)).decode(), token)).encode())
try:
    d = s.recv(100)
except OSError:
    d = b""
print("then=" + (d.split(b" ")[1].decode() if d.startswith(b"HTTP/1.1 ") else "refused"))
PY
val() { sed -n "s/^$1=//p" "$W/h2.out"; }
is "h2c: an upgrade to HTTP/2 is refused (no 101)" "$(val h2c)" eof
is "h2c: none of four is open after 12 s" "$(val h2c_open)" 0
is "CONNECT: closed at once" "$(val connect)" eof
is "CONNECT: none of four is open after 12 s" "$(val connect_open)" 0
is "h2c, CONNECT: they do not keep this peer's client out (handshakes_per_address 8)" "$(val then)" 101
# --- the total bound's default is a quarter of RLIMIT_NOFILE, at most 1024: libwebsockets polls
# every connection at every wake-up, and with 4096 idle connections held (the default was up to
# 65536) a relayed round trip took 2.1-2.4 ms instead of 0.12 and ~0.9 ms of server-min's CPU
# instead of 0.02 (docs/server-min.md, "What idle connections cost"). With RLIMIT_NOFILE 8192
# (a quarter: 2048), 256 silent connections from each of five addresses: 1024 are held ---------
SP3=$((SP + 4)); CP3=$((SP + 5))
cat >"$W/cap.json" <<J
{"listen": {"sandbox": "127.0.0.1:$SP3", "client": "127.0.0.1:$CP3"}, "client_token": "$CT",
 "sandboxes": [{"name": "s1", "token": "sandbox-token-0123456789"}]}
J
(ulimit -n 8192 && exec "$BIN/server-min" --config "$W/cap.json" 2>"$W/cap.log") &
SM3=$!
wait_port "$CP3" || echo "# the third server-min did not listen"
python3 - "$SP3" "$CP3" >"$W/cap.out" 2>&1 <<'PY'
import resource, socket, sys, time
sp, cp = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = []
for a in range(5):
    for i in range(256):
        s = socket.socket()
        s.bind(("127.0.0.%d" % (2 + a), 0))
        s.connect(("127.0.0.1", sp if i % 2 else cp))
        held.append(s)
time.sleep(0.5)
n = 0
for s in held:
    s.setblocking(False)
    try:
        n += s.recv(1) != b""
    except BlockingIOError:
        n += 1
    except OSError:
        pass
print("held=%d" % n)
PY
kill "$SM3" 2>/dev/null
wait "$SM3" 2>/dev/null
SM3=
is "total bound: 1024 of 1280 idle connections from five addresses are held (RLIMIT_NOFILE 8192)" \
	"$(sed -n 's/^held=//p' "$W/cap.out")" 1024
# --- wrong sandbox tokens of 600 bytes against 1024 sandboxes: each attempt hashed both
# sides of every comparison (~3 ms of CPU; a peer without a token kept a core busy with ~300
# a second). The token given is hashed once now (~0.1 ms) ----------------------------------
SP2=$((SP + 2)); CP2=$((SP + 3))
python3 - "$SP2" "$CP2" >"$W/many.json" <<'PY'
import json, sys
print(json.dumps({"listen": {"sandbox": "127.0.0.1:" + sys.argv[1], "client": "127.0.0.1:" + sys.argv[2]},
                  "client_token": "client-token-0123456789",
                  "sandboxes": [{"name": "s%d" % i, "token": "sandbox-token-%06d-abcdef" % i}
                                for i in range(1024)]}))
PY
"$BIN/server-min" --config "$W/many.json" 2>"$W/many.log" &
SM2=$!
wait_port "$CP2" || echo "# the second server-min did not listen"
python3 - "$SP2" "$SM2" >"$W/many.out" 2>&1 <<'PY'
import base64, os, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
def cpu():
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
def upgrade(token):
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    s.sendall(("GET /v1/sandbox HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Protocol: pistis.v1\r\nAuthorization: Bearer %s\r\n\r\n"
               % (base64.b64encode(os.urandom(16)).decode(), token)).encode())
    try:
        d = s.recv(100)
    except OSError:
        d = b""
    s.close()
    return d.startswith(b"HTTP/1.1 101 ")
print("last=%s" % upgrade("sandbox-token-001023-abcdef"))
c0, n = cpu(), 300
print("wrong=%d" % sum(upgrade("x" * 600) for _ in range(n)))  # as long as a token may be
print("us_per_attempt=%d" % ((cpu() - c0) / n * 1e6))
PY
kill "$SM2" 2>/dev/null
wait "$SM2" 2>/dev/null
val() { sed -n "s/^$1=//p" "$W/many.out"; }
is "1024 sandboxes: the last one's token upgrades" "$(val last)" True
is "1024 sandboxes: 300 wrong tokens are refused" "$(val wrong)" 0
us=$(val us_per_attempt)
ok "1024 sandboxes: a wrong token costs server-min ${us:-?} us of CPU (< 1000)" test "${us:-99999}" -lt 1000
# --- server-min holds every token: not dumpable, so no other process of its user may
# ptrace it or read its memory or environment (/proc/PID then is root's) ---------------------
ND=$(mktemp -d /tmp/pistis-nd.XXXXXX)
SP3=$((SP + 4)); CP3=$((SP + 5))
printf '{"listen": {"sandbox": "127.0.0.1:%s", "client": "127.0.0.1:%s"}, "client_token": "%s", "sandboxes": [{"name": "a", "token": "sandbox-token-0123456789"}]}\n' \
	"$SP3" "$CP3" "$CT" >"$ND/p.json"
cp "$BIN/server-min" "$ND/" && chmod 0600 "$ND/p.json" && chown -R 65534:65534 "$ND"
asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
setpriv --reuid=65534 --regid=65534 --clear-groups "$ND/server-min" --config "$ND/p.json" 2>"$W/nobody.log" &
SM3=$!
if wait_port "$CP3"; then
	is "server-min as nobody: its /proc/PID/environ is root's" "$(stat -c %u "/proc/$SM3/environ")" 0
	denied "... and nobody cannot read it" asnobody cat "/proc/$SM3/environ"
	denied "... nor its memory map" asnobody cat "/proc/$SM3/maps"
else
	_tap_result 1 "server-min as nobody listens" "$(cat "$W/nobody.log")"
fi
kill "$SM3" 2>/dev/null
wait "$SM3" 2>/dev/null
SM3=
# ... and so does pistis, which holds the client token: against a listener that never
# answers its upgrade, it waits, and meanwhile nobody's other processes cannot read it.
cp "$BIN/pistis" "$ND/" && chown 65534:65534 "$ND/pistis"
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(4); c = s.accept(); time.sleep(30)' "$CP3" &
SL=$!
wait_port "$CP3"
PISTIS_TOKEN=$CT setpriv --reuid=65534 --regid=65534 --clear-groups "$ND/pistis" \
	--url "ws://127.0.0.1:$CP3/v1/ws" ls >/dev/null 2>&1 &
PC=$!
for _ in $(seq 50); do [ "$(readlink "/proc/$PC/exe" 2>/dev/null)" = "$ND/pistis" ] && break; sleep 0.1; done
is "pistis as nobody: its /proc/PID/environ is root's" "$(stat -c %u "/proc/$PC/environ")" 0
denied "... and nobody cannot read its environment (the token)" asnobody cat "/proc/$PC/environ"
kill "$PC" "$SL" 2>/dev/null
wait "$PC" "$SL" 2>/dev/null
rm -rf "$ND"
# --- a unix-socket sandbox listener, bind-mounted into sandboxes: no agent connects to it ----
# Every unix-socket peer is one peer of handshakes_per_address (docs/server-min.md), so one
# process that may connect can hold the bound and keep every sandbox on that socket from
# redialling, and try tokens unseen by any address. An agent is no such process: the
# socket is 0660 and server-min's group (libwebsockets chmods it after bind), whatever
# server-min's umask, so an agent of any uid, in no group of server-min's, is refused by
# the kernel. A member of the group connects (the control). Red team.
UD=$(mktemp -d /tmp/pistis-us.XXXXXX) && chmod 0755 "$UD"
printf '{"listen": {"sandbox": "%s/relay.sock", "client": "127.0.0.1:%s"}, "client_token": "%s", "sandboxes": [{"name": "a", "token": "sandbox-token-0123456789"}]}\n' \
	"$UD" "$((SP + 8))" "$CT" >"$W/us.json"
(umask 000 && exec "$BIN/server-min" --config "$W/us.json" 2>"$W/us.log") &
SM4=$!
for _ in $(seq 100); do [ -S "$UD/relay.sock" ] && break; sleep 0.1; done
is "unix listener under umask 000: the socket is 0660, root's group" \
	"$(stat -c '%a %U:%G' "$UD/relay.sock" 2>&1)" "660 root:root"
unix_dial() { # SETPRIV-ARGS…: connect to the socket as them; "connected" or the errno's name
	setpriv "$@" /usr/bin/python3 -c 'import errno, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("connected")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))' "$UD/relay.sock"
}
is "... an agent (uid 34001, no groups) cannot connect to it" \
	"$(unix_dial --reuid=34001 --regid=34001 --clear-groups)" EACCES
is "... a member of its group can (the control)" \
	"$(unix_dial --reuid=34001 --regid=34001 --groups=0)" connected
kill "$SM4" 2>/dev/null
wait "$SM4" 2>/dev/null
SM4=
rm -rf "$UD"
is "server-min still running" "$(kill -0 "$SM" && echo yes)" yes
done_testing
