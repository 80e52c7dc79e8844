#!/bin/bash
# What idle connections cost server-min (docs/server-min.md, "What idle connections cost"):
# a server-min of its own on loopback with its connection bounds out of the way, a fake
# sandbox that answers pings (tests/integration/wsfake.py), and one client that times 400
# relayed `ping`s and 400 `sandboxes.list` one after another while N silent connections are
# held (250 per 127.0.x.y address, half on each listener), for each N in IDLE_NS; server-min's
# CPU per ping from /proc. Run as root from the tree: PISTIS_BUILD=build bash bench/relay-idle.sh
. "$(dirname "$0")/../tests/lib.sh"
need_bins server-min
IDLE_NS=${IDLE_NS:-0 256 1024 0 2048 4096 0 8192 0}
W=$(scratch)
SP=$((20000 + RANDOM % 12000)); CP=$((SP + 1))
cleanup() {
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
cat >"$W/pistis.json" <<J
{"listen": {"sandbox": "127.0.0.1:$SP", "client": "127.0.0.1:$CP"},
 "client_token": "client-token-0123456789", "limits": {"handshakes": 65536},
 "sandboxes": [{"name": "evil", "token": "sandbox-token-0123456789"}]}
J
ulimit -n "$(ulimit -Hn)"
"$BIN/server-min" --config "$W/pistis.json" 2>"$W/smin.log" &
SM=$!
wait_port "$CP" || { echo "server-min did not listen" >&2; exit 1; }
echo "# load: $(cut -d' ' -f1-3 /proc/loadavg)"
WSFAKE_DIR=$(cd "$(dirname "$0")/../tests/integration" && pwd) python3 - "$SP" "$CP" "$SM" $IDLE_NS <<'PY'
import json, os, resource, socket, statistics, sys, threading, time
sys.path.insert(0, os.environ["WSFAKE_DIR"])
from wsfake import client, fake_sandbox
sport, cport, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
def cpu():
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
sb = fake_sandbox(sport, "sandbox-token-0123456789", "evil")
def answer():
    while True:
        try:
            o = sb.recv_json(timeout=1e9)
        except Exception:
            return
        sb.send(json.dumps({"id": o["id"], "ok": True}))
threading.Thread(target=answer, daemon=True).start()
c = client(cport, "client-token-0123456789")
def rt(op, k=400):
    ts = []
    for i in range(k):
        m = {"id": "r%d" % i, "op": op}
        if op == "ping":
            m["sandbox"] = "evil"
        t0 = time.perf_counter()
        c.send(json.dumps(m))
        c.recv_json("r%d" % i)
        ts.append((time.perf_counter() - t0) * 1e6)
    ts.sort()
    return statistics.median(ts), ts[int(len(ts) * 0.99)]
for n in map(int, sys.argv[4:]):
    held = []
    for i in range(n):
        s = socket.socket()
        s.bind(("127.%d.%d.%d" % (1 + i // 250 // 250 // 250, 1 + i // 250 // 250 % 250, 2 + i // 250 % 250), 0))
        s.connect(("127.0.0.1", sport if i % 2 else cport))
        held.append(s)
    time.sleep(0.3)  # all accepted; lws closes them after 10 s
    fds = len(os.listdir("/proc/%d/fd" % pid))
    c0 = cpu()
    pm, p99 = rt("ping")
    c1 = cpu()
    lm, l99 = rt("sandboxes.list")
    print("idle=%-5d server-min fds=%-5d ping median %5.0f us p99 %5.0f us, server-min CPU %4.0f us "
          "per ping; sandboxes.list median %5.0f us p99 %5.0f us"
          % (n, fds, pm, p99, (c1 - c0) / 400 * 1e6, lm, l99), flush=True)
    for s in held:
        s.close()
    time.sleep(1)
PY
