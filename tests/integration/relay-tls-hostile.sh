#!/bin/bash
# Peers without a token on server-min's TLS sandbox listener ("tls" in pistis.json): a
# connection that never sends its ClientHello, one that sends it a byte a second, one that
# finishes the TLS handshake and then says nothing or sends its upgrade a byte a second, a
# wrong token over TLS. Each is closed by libwebsockets' timeouts (about 10 s before the
# handshake is done, 5 s after: measured), never held for the minute it tries; each counts
# against handshakes_per_address from the moment it is accepted, before any TLS, so one
# address cannot hold more than its share of fds; and while they are held, a sandbox from
# another address connects over TLS with its token. The plain listeners' counterparts are in
# relay-hostile.sh ("upgrade requests that never end", "conn flood"); until this file no test
# put a hostile peer on the TLS listener (red team). Nothing but server-min and python peers
# on loopback; docs/server-min.md, "Connection floods".
. "$(dirname "$0")/../lib.sh"
need_root
need_bins server-min
command -v python3 >/dev/null || missing "no python3"
command -v openssl >/dev/null || missing "no openssl"
W=$(scratch)
SP=$((20000 + RANDOM % 12000)); CP=$((SP + 1))
CT=client-token-0123456789
ST=sandbox-token-0123456789
cleanup() {
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	wait 2>/dev/null
	root_cleanup # this trap replaces lib.sh's: the scratch directory goes here
}
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
	-keyout "$W/key.pem" -out "$W/cert.pem" -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1 ||
	{ echo "Bail out! openssl could not make a certificate"; exit 1; }
chmod 0600 "$W/key.pem"
cat >"$W/pistis.json" <<J
{"listen": {"sandbox": "127.0.0.1:$SP", "client": "127.0.0.1:$CP"}, "client_token": "$CT",
 "tls": {"cert": "$W/cert.pem", "key": "$W/key.pem"},
 "limits": {"handshakes": 12, "handshakes_per_address": 4},
 "sandboxes": [{"name": "s1", "token": "$ST"}]}
J
"$BIN/server-min" --config "$W/pistis.json" 2>"$W/smin.log" &
SM=$!
wait_port "$SP" || { echo "Bail out! server-min did not listen"; exit 1; }

# Prints NAME=WHAT for every peer: "closed S" (server-min closed it after S seconds),
# "held" (still open after 40 s), or the refusal seen.
python3 - "$SP" "$ST" >"$W/tls.out" 2>&1 <<'PY'
import base64, os, socket, ssl, sys, threading, time
port, token = int(sys.argv[1]), sys.argv[2]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
# a real ClientHello, to drip: what the handshake would send first
o = ctx.wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname="127.0.0.1")
try:
    o.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = out.read()
def upgrade(tok):
    return ("GET /v1/sandbox HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n"
            "Sec-WebSocket-Protocol: pistis.v1\r\nAuthorization: Bearer %s\r\n\r\n"
            % (base64.b64encode(os.urandom(16)).decode(), tok)).encode()
res, lock = {}, threading.Lock()
def put(k, v):
    with lock:
        res[k] = v
def dial(src):
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s
def held(name, src, kind):
    """kind: idle (TCP only), hello (the ClientHello a byte a second), tls-idle (the
    handshake done, then nothing), tls-drip (then the upgrade a byte a second)"""
    t0 = time.time()
    try:
        s = dial(src)
        if kind.startswith("tls"):
            s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
        data = hello if kind == "hello" else upgrade("x" * 24) if kind == "tls-drip" else b""
        s.settimeout(1)
        k = 0
        while time.time() - t0 < 40:
            if k < len(data):
                s.send(data[k:k + 1])
                k += 1
            try:
                if not s.recv(1):
                    break
            except (socket.timeout, TimeoutError):
                pass
        else:
            return put(name, "held")
        put(name, "closed %d" % round(time.time() - t0))
    except (OSError, ssl.SSLError) as e:
        put(name, "closed %d" % round(time.time() - t0) if time.time() - t0 > 1
            else "error " + type(e).__name__)
def refused(src):
    """A connection past the bound: closed before a byte of TLS is answered."""
    try:
        s = dial(src)
        s.settimeout(3)
        s.sendall(hello)
        d = s.recv(1)
        return "closed at once" if not d else "answered"
    except OSError as e:
        return "closed at once" if isinstance(e, ConnectionResetError) else type(e).__name__
def sandbox(tok):
    """A sandbox's upgrade over TLS: the status line server-min answers, or how it ended."""
    try:
        s = ctx.wrap_socket(dial("127.0.0.1"), server_hostname="127.0.0.1")
        s.sendall(upgrade(tok))
        d = s.recv(4096)
        return d.split(b"\r\n")[0].decode() if d else "closed"
    except (OSError, ssl.SSLError) as e:
        return type(e).__name__
kinds = [("idle", "127.0.0.2", "idle"), ("idle2", "127.0.0.2", "idle"),
         ("hello", "127.0.0.2", "hello"), ("hello2", "127.0.0.2", "hello"),
         ("tls_idle", "127.0.0.3", "tls-idle"), ("tls_drip", "127.0.0.3", "tls-drip")]
ts = [threading.Thread(target=held, args=k) for k in kinds]
for t in ts:
    t.start()
    time.sleep(0.1)
time.sleep(1)
print("fifth=" + refused("127.0.0.2"), flush=True)
print("sandbox=" + sandbox(token), flush=True)
print("wrong=" + sandbox("wrong-token-0123456789"), flush=True)
for t in ts:
    t.join()
for k, _, _ in kinds:
    print("%s=%s" % (k, res.get(k)))
print("after=" + refused("127.0.0.2"))
PY
val() { sed -n "s/^$1=//p" "$W/tls.out" | head -n 1; }
[ -n "$(val after)" ] || sed 's/^/# /' "$W/tls.out"
# lws' timeouts, with room for a slow machine: never the 40 s the peer waits
closed_in() { [[ $1 =~ ^closed\ ([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 3 ] && [ "${BASH_REMATCH[1]}" -le 20 ]; }
ok "TLS: a connection that never sends its ClientHello is closed by the timeout ($(val idle))" \
	closed_in "$(val idle)"
ok "TLS: a ClientHello sent a byte a second is closed by the timeout, not held ($(val hello))" \
	closed_in "$(val hello)"
ok "TLS: the handshake done, then nothing: closed by the timeout ($(val tls_idle))" \
	closed_in "$(val tls_idle)"
ok "TLS: the handshake done, then the upgrade a byte a second: closed ($(val tls_drip))" \
	closed_in "$(val tls_drip)"
is "TLS: a fifth connection from an address holding 4 (handshakes_per_address) is closed before any TLS" \
	"$(val fifth)" "closed at once"
is "... while they are held, a sandbox from another address connects over TLS with its token" \
	"$(val sandbox)" "HTTP/1.1 101 Switching Protocols"
is "... and a wrong token over TLS is refused (the connection closed, no 101)" "$(val wrong)" closed
is "... once they are closed, the address connects again" "$(val after)" answered
like "the refusals are logged" "$(cat "$W/smin.log")" \
	"Refused a connection from 127.0.0.2: 4 of its connections are plain HTTP or unfinished upgrades"
ok "server-min still running" kill -0 "$SM"

done_testing
