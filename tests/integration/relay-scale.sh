#!/bin/bash
# server-min with its most sandboxes (1024) connected, started under the open-files limit a
# container gets by default (soft 1024): every sandbox connects, a client lists them all,
# and sandboxes.list answers. Before, server-min kept the soft limit, and from the ~1017th
# sandbox on every upgrade (a sandbox's or a client's) hung unanswered. Fake sandboxes
# (tests/integration/wsfake.py, standard library) on loopback; no root needed.
. "$(dirname "$0")/../lib.sh"
need_bins server-min pistis
command -v python3 >/dev/null || missing "no python3"
W=$(scratch)
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt 4096 ]; then
	missing "hard open-files limit $hard: cannot test above the soft 1024 (raise it: ulimit -Hn 4096)"
fi
trap 'rm -rf "$W"' EXIT
out=$(BIN=$BIN WSFAKE_DIR="$(cd "$(dirname "$0")" && pwd)" timeout -s KILL 120 python3 - "$W" <<'PY'
import json, os, random, resource, secrets, subprocess, sys, time
sys.path.insert(0, os.environ["WSFAKE_DIR"])
import wsfake
B, w, N = os.environ["BIN"], sys.argv[1], 1024
sp = 20000 + random.randrange(12000); cp = sp + 1
toks = [secrets.token_hex(16) for _ in range(N)]
ct = "ct-" + secrets.token_hex(12)
json.dump({"listen": {"sandbox": "127.0.0.1:%d" % sp, "client": "127.0.0.1:%d" % cp},
           "client_token": ct,
           "sandboxes": [{"name": "sb%d" % i, "token": toks[i]} for i in range(N)]},
          open(w + "/p.json", "w"))
# This process holds the sandboxes' sockets: room for them here; server-min gets 1024.
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
def soft_1024():
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
sm = subprocess.Popen([B + "/server-min", "--config", w + "/p.json"], preexec_fn=soft_1024,
                      stdout=open(w + "/sm.log", "w"), stderr=subprocess.STDOUT)
env = dict(os.environ, PISTIS_URL="ws://127.0.0.1:%d" % cp, PISTIS_TOKEN=ct)
try:
    for _ in range(100):
        if subprocess.run([B + "/pistis", "ls"], env=env, capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    sbs, t = [], time.time()
    for i in range(N):
        try:
            sbs.append(wsfake.fake_sandbox(sp, toks[i], "sb%d" % i, timeout=3))
        except Exception as e:
            print("failed_at=%d" % i)
            break
    print("connected=%d" % len(sbs))
    print("connect_ms=%d" % ((time.time() - t) * 1000))
    r = subprocess.run([B + "/pistis", "ls"], env=env, capture_output=True, text=True, timeout=10)
    print("ls_connected=%d" % sum(1 for l in r.stdout.splitlines() if l.split()[1:2] == ["connected"]))
    c = wsfake.client(cp, ct)
    c.send(json.dumps({"id": "l1", "op": "sandboxes.list"}))
    m = c.recv_json("l1")
    print("list_n=%d" % len(m.get("sandboxes", [])))
finally:
    sm.kill()
PY
)
val() { printf '%s\n' "$out" | sed -n "s/^$1=//p" | head -n 1; }
echo "# $(val connected) sandboxes connected in $(val connect_ms) ms${out:+ }$(val failed_at | sed "s/^/(the first that failed: #/; s/$/)/")"
is "all 1024 sandboxes connect under a soft limit of 1024" "$(val connected)" 1024
is "a client then lists them all connected" "$(val ls_connected)" 1024
is "sandboxes.list names all of them" "$(val list_n)" 1024
done_testing
