#!/bin/bash
# The relay end to end: server-min + pistisd serve + pistis as real processes, root, in a
# private mount namespace over a throwaway Debian root, on loopback only.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
R=$(root_fresh debian) || missing "no debian test root"
W=$(mktemp -d "${TMPDIR:-/tmp}/pistis-relay.$$.XXXXXX")
# below the ephemeral range (32768+), so a client socket cannot hold our port
cleanup() {
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	[ -n "${PD2:-}" ] && kill "$PD2" 2>/dev/null
	[ -n "${SM2:-}" ] && kill "$SM2" 2>/dev/null
	wait 2>/dev/null
	root_cleanup
	rm -rf "$W"
}
trap cleanup EXIT

# As pistisd-entry leaves a sandbox: the trees agents share nosuid (trusted commands, used
# below, are on only then).
harden_shared "$R"
relay_config "$R" "$W"
start_relay() {
	"$BIN/server-min" --config "$W/pistis.json" >>"$W/smin.log" 2>&1 &
	SM=$!
	for _ in $(seq 50); do "$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && return 0; sleep 0.1; done
	return 1
}
P() { "$BIN/pistis" "$@"; }

# --- configuration --------------------------------------------------------------------
printf '{\n  "client_token": "x",\n  "sandboxes": []\n}\n' >"$W/bad.json"
like "config: errors name the line" "$("$BIN/server-min" --config "$W/bad.json" --check 2>&1)" 'bad.json:2: .*client_token'
printf '{\n  "client_token": "${PISTIS_NOPE_UNSET}",\n  "sandboxes": [{"name":"a","token":"0123456789abcdef"}]\n}\n' >"$W/env.json"
like "config: unset \${ENV} is an error with its line" "$("$BIN/server-min" --config "$W/env.json" --check 2>&1)" 'env.json:2: .*PISTIS_NOPE_UNSET'
ok "config: the test config validates" "$BIN/server-min" --config "$W/pistis.json" --check
# a token is one sandbox's identity: shared with another sandbox, the one that connects is
# taken for the other (its clients' requests, stdin and files go to it); equal to the client
# token, a sandbox holding its own token could connect as a client and reach every sandbox
printf '{\n  "client_token": "client-0123456789",\n  "sandboxes": [{"name":"a","token":"tok-a-0123456789"},\n    {"name":"b","token":"tok-a-0123456789"}]\n}\n' >"$W/dup.json"
out=$("$BIN/server-min" --config "$W/dup.json" --check 2>&1); rc=$?
is "config: two sandboxes with one token are refused" "$rc" 1
like "config: ... naming both, and the line" "$out" 'dup.json:4: .*sandbox .*b.* has the same token as sandbox .*a'
printf '{\n  "client_token": "tok-a-0123456789",\n  "sandboxes": [{"name":"a","token":"tok-a-0123456789"}]\n}\n' >"$W/dupc.json"
out2=$("$BIN/server-min" --config "$W/dupc.json" --check 2>&1); rc=$?
is "config: a sandbox token equal to the client token is refused" "$rc" 1
like "config: ... with its line" "$out2" 'dupc.json:3: .*sandbox .*a.* is the .*client_token'
printf '{\n  "client_token": "client-0123456789",\n  "limits": {"handshakes_per_address": 0},\n  "sandboxes": [{"name":"a","token":"tok-a-0123456789"}]\n}\n' >"$W/lim.json"
like "config: a handshake bound of 0 is refused with its line" "$("$BIN/server-min" --config "$W/lim.json" --check 2>&1)" \
	'lim.json:3: .*handshakes_per_address.* must be a whole number 1..65536'
printf '{\n  "client_token": "client-0123456789",\n  "limits": {"handshakes": 64, "handshakes_per_address": 8},\n  "sandboxes": [{"name":"a","token":"tok-a-0123456789"}]\n}\n' >"$W/lim2.json"
ok "config: handshake bounds validate" "$BIN/server-min" --config "$W/lim2.json" --check
for bad in '127.0.0.1:+7700' '127.0.0.1: 7700' '127.0.0.1:0' '127.0.0.1:77000' '127.0.0.1' ':7700'; do
	printf '{\n  "client_token": "client-0123456789",\n  "listen": {"client": "%s"},\n  "sandboxes": [{"name":"a","token":"tok-a-0123456789"}]\n}\n' "$bad" >"$W/port.json"
	like "config: listen address '$bad' refused by --check, with its line" \
		"$("$BIN/server-min" --config "$W/port.json" --check 2>&1)" "port.json:3: listen address"
done
# an unknown key, at any level, is refused with its line and the keys known there: a
# misspelt "tls" left plain ws:// without a word (a "comment" is free text anywhere)
for case in '3:top level:  "tsl": {"cert": "/c", "key": "/k"},' \
	'3:"limits":  "limits": {"handshake": 8},' \
	'3:"listen":  "listen": {"clients": "127.0.0.1:7701"},' \
	'4:a sandbox:  "sandboxes": [{"name":"a","token":"tok-a-0123456789",\n    "tokn": "x"}],'; do
	line=${case%%:*} rest=${case#*:} where=${rest%%:*} member=${rest#*:}
	printf '{\n  "client_token": "client-0123456789",\n%b\n  "comment": "x"%s\n}\n' "$member" \
		"$(case $where in a\ sandbox) ;; *) printf ',\n  "sandboxes": [{"name":"a","token":"tok-a-0123456789"}]' ;; esac)" >"$W/key.json"
	out=$("$BIN/server-min" --config "$W/key.json" --check 2>&1); rc=$?
	is "config: an unknown key in $where is refused" "$rc" 1
	like "config: ... naming it, its line and the keys known there" "$out" \
		"key.json:$line: unknown key \"[a-z]*\" (at the )?(in )?$where \(known: .*\"comment\"\)"
done
for key in listen tls limits; do
	printf '{\n  "client_token": "client-0123456789",\n  "%s": ["x"],\n  "sandboxes": [{"name":"a","token":"tok-a-0123456789"}]\n}\n' "$key" >"$W/obj.json"
	like "config: \"$key\" that is not an object is refused with its line" \
		"$("$BIN/server-min" --config "$W/obj.json" --check 2>&1)" "obj.json:3: \"$key\" must be an object"
done
printf '{\n  "comment": "c",\n  "client_token": "client-0123456789",\n  "limits": {"comment": "c", "handshakes": 8},\n  "sandboxes": [{"name":"a","token":"tok-a-0123456789","comment":"c"}]\n}\n' >"$W/cmt.json"
ok "config: \"comment\" is taken at every level" "$BIN/server-min" --config "$W/cmt.json" --check
# the file's bytes are shown escaped, once: never a raw ESC, never a quote shown as \"
printf '{\n  "client_token": "client-0123456789",\n  "sandboxes": [{"name":"a\\u001b[2J\\"","token":"tok-a-0123456789"}]\n}\n' >"$W/esc.json"
out=$("$BIN/server-min" --config "$W/esc.json" --check 2>&1)
like "config: a name's bytes escaped once in the error" "$out" 'esc.json:3: sandbox name "a\\x1b\[2J\\"" must be'
like "config: ... the program's own quotes as they are" "$("$BIN/server-min" --config "$W/bad.json" --check 2>&1)" \
	'bad.json:2: "client_token" must be'
is "config: neither message quotes the token" "$(printf '%s\n%s\n' "$out" "$out2" | grep -c 0123456789)" 0

# --- the relay URL (lib/ws-url.c, for serve's --relay and pistis's --url) -----------------
for case in 'http://h/x|must be ws://, wss:// or an absolute unix socket path' \
	'ws://:1/x|has no usable host' 'ws://127.0.0.1:0/x|has a bad port' \
	'wss://127.0.0.1:1x|has a bad port' 'ws://127.0.0.1:70000|has a bad port'; do
	u=${case%%|*} want=${case#*|}
	out=$(in_root "$R" pistisd serve --relay "$u" --token-file /etc/pistis/token 2>&1); rc=$?
	is "serve --relay '$u': a usage error (100)" "$rc" 100
	like "... saying it $want" "$out" "--relay '$u' $want"
done
for u in ftp://h 'ws://' 'ws://h:0' 'wss://h:1x'; do
	exits 100 "pistis --url '$u': a usage error" "$BIN/pistis" --url "$u" ls
done
like "... saying what a URL must be" "$("$BIN/pistis" --url ftp://h ls 2>&1)" \
	'--url must be ws://HOST\[:PORT\]\[/PATH\] or wss://'

# --- the token file ---------------------------------------------------------------------
cp "$R/etc/pistis/token" "$R/etc/pistis/loose"; chmod 644 "$R/etc/pistis/loose"
exits 111 "serve refuses a group/other-readable token file" \
	in_root "$R" pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/loose
# one reader for both token files (lib/token-file.c): a FIFO is refused at once (serve's
# open waited for a writer), a symlink (even to the good file) is refused
mkfifo -m 600 "$R/etc/pistis/fifo"
exits 111 "serve refuses a FIFO token file at once (never waits on it)" \
	timeout 5 env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin chroot "$R" pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/fifo
ln -s /etc/pistis/token "$R/etc/pistis/link"
like "serve refuses a token file linked out of its directory, saying so" \
	"$(in_root "$R" pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/link 2>&1)" \
	"Token file '/etc/pistis/link' is a symbolic link that leaves its directory"
rm -f "$R/etc/pistis/fifo" "$R/etc/pistis/link"

if [ -n "$ALLOW" ]; then
	out=$(in_root "$R" pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token 2>&1)
	is "start-up check: serve refuses to start on a hard failure ($ALLOW)" "$?" 1
	like "start-up check: and says which and how to opt out" "$out" "Refusing to start: hard requirement '${ALLOW%%,*}'.*--allow"
else
	skip "start-up check: refusal" "this host meets every hard requirement"
	skip "start-up check: message"
fi
exits 100 "start-up check: an unknown --allow name is a usage error" \
	in_root "$R" pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --allow nope
for bad in '+80' ' 80' '80x' 0 65536; do
	exits 100 "serve --relay with the port '$bad': a usage error" \
		in_root "$R" pistisd serve --relay "ws://127.0.0.1:$bad/" --token-file /etc/pistis/token
	exits 100 "pistis with the port '$bad' in its URL: a usage error" \
		env PISTIS_URL="ws://127.0.0.1:$bad/v1/ws" "$BIN/pistis" ls
done
# (pistisd serve starts below: start_relay, which waits for it, would wait in vain)
"$BIN/server-min" --config "$W/pistis.json" >>"$W/smin.log" 2>&1 &
SM=$!
ok "server-min starts: it accepts on its client port" wait_port "$CP"
# Started with Docker's soft open-files limit (1024): serve raises it to 8192 (at most the
# hard limit), or 256 commands could not run at once.
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=1048576
prlimit --nofile=1024:"$hard" -- env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root LANG=C TERM=dumb chroot "$R" pistisd serve --relay ws://127.0.0.1:$SP \
	--token-file /etc/pistis/token --name s1 ${ALLOW:+--allow $ALLOW} >"$W/pd.log" 2>&1 &
PD=$!
for _ in $(seq 50); do P ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
like "pistis ls shows the sandbox connected" "$(P ls 2>&1)" '^s1 +connected'
want=$((hard < 8192 ? hard : 8192))
is "serve raised its soft open-files limit from 1024 to $want" \
	"$(awk '/^Max open files/ {print $4}' "/proc/$PD/limits")" "$want"
# the relay token is in pistisd's memory once (to redial), never also in the upgrade request
# lws built: every helper forked later (fs helpers become the agent) wipes only the first
count_in_mem() { # PID STRING: how often STRING is in the process's readable memory
	python3 - "$1" "$2" <<'PY'
import sys
pid, needle, n = sys.argv[1], sys.argv[2].encode(), 0
with open("/proc/%s/mem" % pid, "rb", 0) as mem:
    for line in open("/proc/%s/maps" % pid):
        addr, perm = line.split()[:2]
        if not perm.startswith("rw"):
            continue
        lo, hi = (int(x, 16) for x in addr.split("-"))
        try:
            mem.seek(lo)
            n += mem.read(hi - lo).count(needle)
        except OSError:
            pass
print(n)
PY
}
PDPID=$(pgrep -f "pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1" | head -n 1)
is "token: not left in the upgrade request's buffer in pistisd's memory" \
	"$(count_in_mem "$PDPID" "Bearer $(cat "$R/etc/pistis/token")")" 0
is "token: pistisd holds it once (to redial)" "$(count_in_mem "$PDPID" "$(cat "$R/etc/pistis/token")")" 1
# pistis --token-file: the client token reaches every sandbox, so the file is checked on the
# opened fd like pistisd's own (mode, owner, type) and its bytes must fit in a header line
printf '%s\n' "$PISTIS_TEST_CT" >"$W/ct"; chmod 600 "$W/ct"
like "pistis --token-file: a 0600 file of root's works" "$(PISTIS_TOKEN= P --token-file "$W/ct" ls 2>&1)" '^s1 +connected'
cp "$W/ct" "$W/ct-loose"; chmod 644 "$W/ct-loose"
out=$(PISTIS_TOKEN= P --token-file "$W/ct-loose" ls 2>&1); rc=$?
is "pistis --token-file: a file others can read is refused" "$rc" 111
like "pistis --token-file: ... saying what to do" "$out" "Token file .*ct-loose.* chmod 600 \(found uid 0, mode 0644\)"
cp "$W/ct" "$W/ct-other"; chown 12345 "$W/ct-other"
exits 111 "pistis --token-file: a file another user owns is refused" env PISTIS_TOKEN= "$BIN/pistis" --token-file "$W/ct-other" ls
mkfifo -m 600 "$W/ct-fifo"
ln -s "$W/ct" "$W/ct-link"
out=$(PISTIS_TOKEN= P --token-file "$W/ct-link" ls 2>&1); rc=$?
is "pistis --token-file: a symlink out of its directory (even to a good file) is refused" "$rc" 111
like "pistis --token-file: ... saying so" "$out" "Token file .*ct-link.* is a symbolic link that leaves its directory"
ln -s ct "$W/ct-beside"
ok "pistis --token-file: a link beside the file, in a directory only root writes, is followed" \
	env PISTIS_TOKEN= "$BIN/pistis" --token-file "$W/ct-beside" ls
# a root's link on the way is followed by hand: every directory of its target is judged too
mkdir -m 0777 "$W/open" && mkdir -m 0755 "$W/open/d" && cp -p "$W/ct" "$W/open/d/ct"
ln -s "$W/open/d" "$W/via-open"
out=$(PISTIS_TOKEN= P --token-file "$W/via-open/ct" ls 2>&1); rc=$?
is "pistis --token-file: a root's link into a world-writable directory is refused" "$rc" 111
like "pistis --token-file: ... naming that directory" "$out" \
	"Token file .*via-open/ct.* is in a directory that someone besides root may change \(.*/open\)"
chmod 0755 "$W/open"
like "pistis --token-file: ... and followed once that directory is root's alone" \
	"$(PISTIS_TOKEN= P --token-file "$W/via-open/ct" ls 2>&1)" '^s1 +connected'
ln -s loop-b "$W/loop-a" && ln -s loop-a "$W/loop-b"
out=$(PISTIS_TOKEN= timeout 10 "$BIN/pistis" --token-file "$W/loop-a/ct" ls 2>&1); rc=$?
is "pistis --token-file: a loop of links on the way is refused at once" "$rc" 111
like "pistis --token-file: ... saying so" "$out" "Token file .*loop-a/ct.* is reached through more than 40 symbolic links"
printf 'client\0token\n' >"$W/ct-nul"; chmod 600 "$W/ct-nul"
like "pistis --token-file: a NUL in the file is refused, saying so" \
	"$(PISTIS_TOKEN= P --token-file "$W/ct-nul" ls 2>&1)" "ct-nul.* holds a NUL byte"
exits 111 "pistis --token-file: a FIFO is refused at once (never waited on)" timeout 5 env PISTIS_TOKEN= "$BIN/pistis" --token-file "$W/ct-fifo" ls
printf '%s\r\nX-Injected: 1\n' "$PISTIS_TEST_CT" >"$W/ct-crlf"; chmod 600 "$W/ct-crlf"
out=$(PISTIS_TOKEN= P --token-file "$W/ct-crlf" ls 2>&1); rc=$?
is "pistis --token-file: a CR or LF inside the token is refused (no header injection)" "$rc" 111
exits 100 "pistis: a CR/LF in \$PISTIS_TOKEN is refused, not sent as extra header lines" \
	env PISTIS_TOKEN="$PISTIS_TEST_CT"$'\r\nX-Injected: 1' "$BIN/pistis" ls
exits 100 "pistis: a \$PISTIS_TOKEN longer than 599 characters is refused, not cut" \
	env PISTIS_TOKEN="$PISTIS_TEST_CT$(head -c 700 /dev/zero | tr '\0' a)" "$BIN/pistis" ls
for bad in ' 5' '+5' '-5' 0 2592001 5s; do
	exits 100 "pistis exec --timeout '$bad': a usage error (whole seconds, 1 to 30 days)" \
		"$BIN/pistis" exec --agent a --timeout "$bad" -- true
done
is "pistis --token-file: no message quotes the token" "$(printf '%s\n' "$out" | grep -c -- "$PISTIS_TEST_CT")" 0

st=$(P status --sandbox s1 2>&1)
like "sandbox.status: name, software, uptime" "$st" '"software":[[:space:]]*"pistisd '
like "sandbox.status: the start-up check's verdict" "$st" '"verdict":[[:space:]]*"ok"'
if [ -n "$ALLOW" ]; then
	like "sandbox.status: lists what was allowed" "$st" "\"${ALLOW%%,*}\""
else
	skip "sandbox.status: allowed" "nothing to allow here"
fi
# --- exec -------------------------------------------------------------------------------
is "exec: stdout" "$(P exec --agent alice -- echo hello 2>&1)" hello
exits 3 "exec: the command's exit code" P exec --agent alice -- sh -c 'exit 3'
is "exec: stderr separate" "$(P exec --agent alice -- sh -c 'echo o; echo e >&2' 2>/dev/null)" o
like "exec: runs as the agent's own user" "$(P exec --agent alice -- id 2>&1)" '^uid=101[0-9][0-9]\(pi-agent-[0-9a-f]{8}\) .*pi-sandbox'
exits 127 "exec: unknown program is a clear failure" P exec --agent alice -- /nonexistent/x
# An agent id that cannot be ensured is named in the answer, cut with a mark past 64 bytes.
out=$(P exec --agent "$(printf 'a%.0s' $(seq 99))!" -- true 2>&1)
like "exec: a refused long agent id is named cut, with a mark" "$out" \
	'agent \\"a{64}\\"\[cut: 100 bytes\]: '
is "exec: no token in the environment" "$(P exec --agent alice -- sh -c 'env | grep -c -i token' 2>&1)" 0
like "exec: token file unreadable by the agent" "$(P exec --agent alice -- cat /etc/pistis/token 2>&1)" 'Permission denied'
big=$(P exec --agent alice -- sh -c 'seq 1 200000' | md5sum)
is "exec: 1.2 MB of output complete and in order" "$big" "$(seq 1 200000 | md5sum)"
# a reader 3 s late: pistisd pauses at 8 MiB unacknowledged while the command fills its pipe
# and exits; what is in the pipe then must survive the drain time after exit
n=$(P exec --agent alice -- head -c 8912896 /dev/zero | (sleep 3; wc -c))
is "exec: output still in the pipe when a paused command exits is not lost" "$n" 8912896

# --json: the exit event starts a line of its own, where the command's stdout (or its stderr,
# both on one file) ended mid-line with a forged one (red team: '{forged} {' then the real)
out=$(P --json exec --agent alice -- sh -c 'printf "{\"event\":\"exec.exit\",\"code\":0} "; exit 3' 2>/dev/null)
is "--json exec: the command's stdout without a newline stays its own line" \
	"$(echo "$out" | head -n1)" '{"event":"exec.exit","code":0} '
is "... the exit event starts the next" "$(echo "$out" | sed -n 2p)" '{'
like "... with the command's exit code" "$out" '"code":[[:space:]]*3,'
out=$(P --json exec --agent alice -- sh -c 'printf "{\"event\":\"exec.exit\"} " >&2' 2>&1)
is "--json exec, 2>&1: after stderr without a newline too" "$(echo "$out" | sed -n 2p)" '{'

# --- the command's tree: a cgroup per command where the host delegates one -------------------
out=$(P --json exec --agent alice -- sh -c 'setsid sleep 347 >/dev/null 2>&1 < /dev/null & echo started' 2>&1)
like "exec.exit says how the tree was held" "$out" '"tree":[[:space:]]*"(cgroup|session|pgid)"'
if [ -w /sys/fs/cgroup/unified ] || [ -w /sys/fs/cgroup/cgroup.procs ]; then
	like "exec through the relay: the command ran in its own cgroup" "$out" '"tree":[[:space:]]*"cgroup"'
	like "exec: what it left behind was stopped" "$out" '"left_children_killed":[[:space:]]*true'
	sleep 0.3
	ok "exec: a setsid'ed grandchild does not outlive its command" sh -c '! pgrep -f "^sleep 347$" >/dev/null'
else
	skip "no writable cgroup v2 here: the process group holds the tree" 3
fi
pkill -f "^sleep 347$" 2>/dev/null

# --- finished commands are forgotten once their reader has everything -------------------------
# The reader's last exec.ack comes after exec.exit; server-min once dropped it (the route went
# with the exit), so pistisd kept every finished command 10 minutes and refused the 257th.
finished() { P --json status | python3 -c 'import json,sys; print(sum(1 for c in json.load(sys.stdin).get("commands", []) if not c["running"]))'; }
n0=$(finished)
fails=0
for _ in $(seq 300); do P exec --agent alice -- /bin/true || fails=$((fails + 1)); done
is "300 short commands in a row all run (more than the 256-command table)" "$fails" 0
sleep 0.5
is "pistisd keeps none of them once acknowledged" "$(finished)" "$n0"

# --- 100 concurrent commands across 10 agents ---------------------------------------------
for a in $(seq 0 9); do P exec --agent "agent$a" -- true; done
for i in $(seq 0 99); do
	(P exec --agent "agent$((i % 10))" -- sh -c 'id -un; sleep 0.5; id -un' >"$W/c$i.out" 2>&1; echo $? >"$W/c$i.rc") &
done
wait_cnt=0; while [ "$(ls "$W"/c*.rc 2>/dev/null | wc -l)" -lt 100 ] && [ $wait_cnt -lt 300 ]; do sleep 0.1; wait_cnt=$((wait_cnt + 1)); done
bad=0
for i in $(seq 0 99); do
	want=$(in_root "$R" pistisd users show "agent$((i % 10))" 2>/dev/null | sed -n 's/^name=//p')
	got=$(sort -u "$W/c$i.out")
	[ "$(cat "$W/c$i.rc" 2>/dev/null)" = 0 ] && [ -n "$want" ] && [ "$got" = "$want" ] || bad=$((bad + 1))
done
is "100 concurrent commands, 10 agents, each with its own identity" "$bad" 0

# --- server-min killed and restarted in the middle of a command ----------------------------
P exec --agent alice -- sh -c 'i=0; while [ $i -lt 60 ]; do echo line$i; i=$((i+1)); sleep 0.05; done' >"$W/restart.out" 2>"$W/restart.err" &
EX=$!
sleep 1
kill -9 "$SM"; wait "$SM" 2>/dev/null
sleep 0.5
start_relay
wait "$EX"; rc=$?
is "restart: the command still exits 0" "$rc" 0
is "restart: output complete and in order" "$(md5sum <"$W/restart.out")" \
	"$(for i in $(seq 0 59); do echo line$i; done | md5sum)"

# --- the same with 39 MB into a slow pipe: pistis splices frames into it, so the kill lands
# inside frames partly taken; only whole frames reach the output, each once ----------------
cat >"$W/slow.py" <<'PY'
import hashlib, sys, time
h, f = hashlib.md5(), sys.stdin.buffer
while True:
    b = f.read1(65536)
    if not b:
        break
    h.update(b)
    time.sleep(0.002)
print(h.hexdigest())
PY
( P exec --agent alice -- seq 1 5000000 2>"$W/restart-pipe.err" | python3 "$W/slow.py" >"$W/restart-pipe.md5"
  echo "${PIPESTATUS[0]}" >"$W/restart-pipe.rc" ) &
EX=$!
sleep 0.5
kill -9 "$SM"; wait "$SM" 2>/dev/null
sleep 0.3
start_relay
wait "$EX"
is "restart, output into a slow pipe: the command still exits 0" "$(cat "$W/restart-pipe.rc")" 0
is "restart, output into a slow pipe: complete and in order" "$(cat "$W/restart-pipe.md5")" \
	"$(seq 1 5000000 | md5sum | cut -d' ' -f1)"

# --- the connection cut by the test (ss -K kills the TCP sockets on the sandbox port) -------
wait_connected() { for _ in $(seq 100); do P ls 2>/dev/null | grep -q "s1 *connected" && return 0; sleep 0.1; done; }
if ss -K dst 127.0.0.1 dport = :$SP >/dev/null 2>&1 && sleep 0.5 && wait_connected; then
	P exec --agent alice -- sh -c 'i=0; while [ $i -lt 60 ]; do echo cut$i; i=$((i+1)); sleep 0.05; done' >"$W/cut.out" 2>"$W/cut.err" &
	EX=$!
	sleep 1
	ss -K dst 127.0.0.1 dport = :$SP >/dev/null 2>&1
	sleep 0.3
	ss -K dst 127.0.0.1 dport = :$CP >/dev/null 2>&1
	wait "$EX"; rc=$?
	[ "$rc" = 0 ] || sed 's/^/# cut: /' "$W/cut.err"
	is "cut: the command exits 0" "$rc" 0
	is "cut: output complete and in order" "$(md5sum <"$W/cut.out")" \
		"$(for i in $(seq 0 59); do echo cut$i; done | md5sum)"
else
	skip "cut: connection cut" "ss -K not supported by this kernel (CONFIG_INET_DIAG_DESTROY)"
	skip "cut: output"
fi

# --- pty with stdin and resize ----------------------------------------------------------------
# the test root's minimal /dev has no pty multiplexer: give it a private devpts instance
mkdir -p "$R/dev/pts" && mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$R/dev/pts" &&
	ln -sf pts/ptmx "$R/dev/ptmx"
out=$(printf 'stty size\necho tty-ok $(tty | cut -c1-8)\nexit 4\n' | script -qec "stty rows 30 cols 100; $BIN/pistis exec --tty --agent alice -- sh" /dev/null 2>&1)
like "pty: the command sees a terminal" "$out" 'tty-ok /dev/pts'
like "pty: the client's size reaches the pty" "$out" '30 100'

# --- stdin faster than the command reads it: credit, not holes ------------------------------
# 8 MiB into a command that only starts reading after 2 s: pistis keeps what pistisd has not
# written to the command under exec.started's stdin_window (exec.stdin events); before, the
# frames over pistisd's 1 MiB queue were dropped and the command read a stream with holes.
head -c 8388608 /dev/urandom >"$W/stdin8"
want=$(sha256sum <"$W/stdin8" | cut -d' ' -f1)
/usr/bin/time -f '%U %S' -o "$W/stdin8.time" "$BIN/pistis" exec -i --agent alice -- sh -c 'sleep 2; sha256sum' \
	<"$W/stdin8" >"$W/stdin8.out" 2>"$W/stdin8.err"
is "stdin: 8 MiB to a slow reader arrive whole" "$(cut -d' ' -f1 "$W/stdin8.out")" "$want"
[ "$(cut -d" " -f1 "$W/stdin8.out")" = "$want" ] || { echo "# out: $(head -c 200 "$W/stdin8.out")"; echo "# err: $(head -c 300 "$W/stdin8.err")"; }
is "stdin: no error on the way" "$(cat "$W/stdin8.err")" ""
ok "stdin: pistis waits for credit without spinning ($(cat "$W/stdin8.time") s CPU)" \
	awk '{ exit !($1 + $2 < 1.0) }' "$W/stdin8.time"
# The same 8 MiB taken 4 KiB at a time: the queue (a ring since the red team found it moved
# down whole, up to 1 MiB, after every write) wraps at every offset.
out=$("$BIN/pistis" exec -i --agent alice -- sh -c 'sleep 1; dd bs=4096 2>/dev/null | sha256sum' <"$W/stdin8")
is "stdin: 8 MiB taken 4 KiB at a time arrive whole" "${out%% *}" "$want"

# --- file operations as the agent ---------------------------------------------------------------
home=$(in_root "$R" pistisd users show alice | sed -n 's/^home=//p')
echo "hello file" | P write --agent alice "$home/notes/a.txt"
is "fs.write creates parents; fs.read reads it back" "$(P read --agent alice "$home/notes/a.txt")" "hello file"
ok "fs.edit replaces a unique occurrence" P edit --agent alice "$home/notes/a.txt" --old hello --new goodbye
is "fs.edit result" "$(P read --agent alice "$home/notes/a.txt")" "goodbye file"
like "fs.read of /etc/shadow is denied to the agent" "$(P read --agent alice /etc/shadow 2>&1)" 'denied'
echo secret >"$R/root/secret"; chmod 600 "$R/root/secret"
ln -sf /root/secret "$R/$home/link"
like "fs.write through a symlink is refused" "$(echo x | P write --agent alice "$home/link" 2>&1)" 'denied|Too many levels'
is "the symlink target is untouched" "$(cat "$R/root/secret")" secret
bobhome=$(in_root "$R" pistisd users ensure bob | sed -n 's/^home=//p')
like "alice cannot read bob's home" "$(P read --agent alice "$bobhome/x" 2>&1)" 'denied'
P exec --agent alice -- sh -c 'mkdir -p ~/tree/a/b /tmp/victim && echo x >~/tree/a/b/f && echo y >~/tree/top &&
	echo keep >/tmp/victim/k && ln -s /tmp/victim ~/tree/a/vl && ln -s /tmp/victim/k ~/tree/kl'
like "fs.remove of a full directory without recursive: an error" \
	"$(P call fs.remove "{\"agent\":\"alice\",\"path\":\"$home/tree\"}" 2>&1)" '"ok":false'
like "fs.remove recursive: removes the tree" \
	"$(P call fs.remove "{\"agent\":\"alice\",\"path\":\"$home/tree\",\"recursive\":true}" 2>&1)" '"ok":true.*"removed":7'
ok "fs.remove recursive: the tree is gone" test ! -e "$R$home/tree"
# One audit line per file operation when it ends: who, what, where, and how it ended; an
# agent's path is C-escaped (a newline in it cannot forge a line), once: the text log does
# not escape the escaped fields again.
audit_log() { grep "audit $1 " "$W/pd.log"; }
like "audit line for fs.write" "$(audit_log fs.write)" \
	"audit fs.write result=ok id=[^ ]+ agent=\"alice\" uid=[0-9]+ path=\"$home/notes/a.txt\""
like "audit line for a denied fs.read" "$(audit_log fs.read)" \
	'audit fs.read result=denied id=[^ ]+ agent="alice" uid=[0-9]+ path="/etc/shadow"'
like "audit line for fs.remove, refused then done" "$(audit_log fs.remove | tr '\n' ' ')" \
	"result=exists .*path=\"$home/tree\" .*result=ok .*path=\"$home/tree\""
P call fs.stat "{\"agent\":\"alice\",\"path\":\"$home/x\\ny\\\"z\"}" >/dev/null 2>&1
like "... a newline and a quote in the path are escaped" "$(audit_log fs.stat)" \
	'result=not_found .*path="[^"]*/x\\ny\\"z"$'
P call fs.move "{\"agent\":\"alice\",\"path\":\"$home/notes/a.txt\",\"to\":\"$home/notes/b.txt\"}" >/dev/null 2>&1
like "audit line for fs.move names both paths" "$(audit_log fs.move)" \
	"result=ok .*path=\"$home/notes/a.txt\" to=\"$home/notes/b.txt\""
# A long source cannot push the destination off the line: each path has its own budget.
lsrc=$home/$(printf 'L%.0s' $(seq 250))
P exec --agent alice -- sh -c "mkdir -p '$lsrc/$(printf 'M%.0s' $(seq 250))/$(printf 'N%.0s' $(seq 250))' && touch '$lsrc/$(printf 'M%.0s' $(seq 250))/$(printf 'N%.0s' $(seq 250))/$(printf 'O%.0s' $(seq 250))'"
lpath=$lsrc/$(printf 'M%.0s' $(seq 250))/$(printf 'N%.0s' $(seq 250))/$(printf 'O%.0s' $(seq 250))
P call fs.move "{\"agent\":\"alice\",\"path\":\"$lpath\",\"to\":\"$home/moved-long\"}" >/dev/null 2>&1
like "audit line for fs.move of a 1 KB path: cut with a mark, and the destination named" \
	"$(audit_log fs.move | tail -n 1)" "result=ok .*path=\"[^\"]*\"\[cut: [0-9]+ bytes\] to=\"$home/moved-long\"$"
P call fs.move "{\"agent\":\"alice\",\"path\":\"$home/notes/b.txt\",\"to\":\"$home/notes/a.txt\"}" >/dev/null 2>&1
is "fs.remove recursive: symlinks removed, never followed" "$(cat "$R/tmp/victim/k")" keep
like "fs.remove recursive: bob's home stays bob's" \
	"$(P call fs.remove "{\"agent\":\"alice\",\"path\":\"$bobhome\",\"recursive\":true}" 2>&1)" '"code":"denied"'
ok "fs.remove recursive: bob's home is still there" test -d "$R$bobhome"

# Files larger than one message: pistis read/write go in pieces (offset, eof).
head -c 1500000 /dev/urandom >"$W/big"
P write --agent alice "$home/big" <"$W/big"
is "fs.write of 1.5 MB in pieces: the file is whole" "$(sha256sum <"$R$home/big")" "$(sha256sum <"$W/big")"
is "fs.read of 1.5 MB in pieces: the bytes come back whole" "$(P read --agent alice "$home/big" | sha256sum)" "$(sha256sum <"$W/big")"
echo small | P write --agent alice "$home/big"
is "fs.write without offset replaces the whole file" "$(cat "$R$home/big")" small
like "one fs.read answer is at most one piece" \
	"$(P call fs.read "{\"agent\":\"alice\",\"path\":\"$home/notes/a.txt\",\"limit\":100000000}" 2>&1)" '"ok":true'
# docs/api.md's order: call's options before its OP and fields (they were taken as the OP).
like "pistis call --sandbox S --agent A OP FIELDS: the options before the operands" \
	"$(P call --sandbox s1 --agent alice fs.stat "{\"path\":\"$home/notes/a.txt\"}" 2>&1)" \
	'"ok":true.*"type":"file"'
exits 100 "pistis call with a third operand is a usage error" P call fs.stat '{}' extra
# A directory whose listing does not fit one message comes in pages (truncated, next).
mkdir "$R$home/many" && (cd "$R$home/many" && for i in $(seq 1 4000); do : >"$(printf 'n%0250d' "$i")"; done)
chown -R --reference="$R$home" "$R$home/many"
out=$(timeout 20 "$BIN/pistis" call fs.list "{\"agent\":\"alice\",\"path\":\"$home/many\"}" 2>&1)
like "fs.list of 4000 long names (over 1 MiB): a first page that fits a message" "$out" '"ok":true.*"truncated":true,"next":[0-9]+'
total=0 off=0
for _ in $(seq 1 20); do
	out=$(timeout 20 "$BIN/pistis" call fs.list "{\"agent\":\"alice\",\"path\":\"$home/many\",\"offset\":$off}" 2>&1)
	total=$((total + $(echo "$out" | grep -o '"name"' | wc -l)))
	next=$(echo "$out" | sed -n 's/.*"next":\([0-9]*\).*/\1/p')
	[ -n "$next" ] || break
	off=$next
done
is "fs.list pages with offset/next cover every entry once" "$total" 4000
rm -rf "$R$home/many"
# JSON carries UTF-8 only: a file name that is not comes C-escaped, and a request that is not
# UTF-8 is refused before it leaves the client.
: >"$R$home/$(printf 'bad\377\376name')" && chown --reference="$R$home" "$R$home/$(printf 'bad\377\376name')"
like "fs.list: a name that is not UTF-8 comes C-escaped, marked escaped" \
	"$(P call fs.list "{\"agent\":\"alice\",\"path\":\"$home\"}" 2>&1)" '"name":"bad.{1,2}xff.{1,2}xfename","escaped":true,"type":"file"'
rm -f "$R$home/$(printf 'bad\377\376name')"
like "a request whose strings are not UTF-8 is refused" \
	"$(P call fs.stat "$(printf '{"agent":"alice","path":"/tmp/\377"}')" 2>&1)" 'invalid UTF-8'
# FIFOs, sockets and devices are refused, never opened (a FIFO with a writer would block,
# some devices act on open).
mkfifo "$R$home/fifo" && chown --reference="$R$home" "$R$home/fifo"
like "fs.read of a FIFO is refused" "$(timeout 10 "$BIN/pistis" read --agent alice "$home/fifo" 2>&1)" 'invalid|Invalid'
like "fs.write to a FIFO is refused" "$(echo x | timeout 10 "$BIN/pistis" write --agent alice "$home/fifo" 2>&1)" 'invalid|Invalid'
like "fs.read of a device is refused" "$(timeout 10 "$BIN/pistis" read --agent alice /dev/null 2>&1)" 'invalid|Invalid'
like "fs.edit of a device is refused" "$(timeout 10 "$BIN/pistis" edit --agent alice /dev/null --old a --new b 2>&1)" 'invalid|Invalid'
# The fs helper is a fork of pistisd turned agent: its own /proc/PID/{mem,environ} are a copy
# of the daemon's memory (today root-owned 0400/0600 because the helper is non-dumpable, so
# DAC refuses them; the procfs refusal does not depend on that). No fs.* looks inside a procfs.
like "fs.read of a procfs file is denied" "$(P read --agent alice /proc/loadavg 2>&1)" 'denied'
like "fs.list of /proc is denied" "$(P call fs.list '{"agent":"alice","path":"/proc"}' 2>&1)" '"code":"denied"'
like "fs.stat beneath /proc is denied" "$(P call fs.stat '{"agent":"alice","path":"/proc/self"}' 2>&1)" '"code":"denied"'

# One agent cannot take every file-operation slot: its helpers run as its uid, so it can
# SIGSTOP them and hold each slot until the 30 s timeout. Here strace holds them instead:
# every getdents64 (fs.list's; the daemon itself makes none) waits 4 s.
SD=$(pgrep -n -f "pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1")
strace -qq -f -p "$SD" -o /dev/null -e trace=getdents64 -e inject=getdents64:delay_enter=4000000 &
ST=$!
sleep 0.5
HANG=()
for _ in 1 2 3 4; do
	P call fs.list "{\"agent\":\"alice\",\"path\":\"$home\"}" >/dev/null 2>&1 &
	HANG+=($!)
done
sleep 1
like "a fifth file operation of an agent holding four is refused" \
	"$(P call fs.stat "{\"agent\":\"alice\",\"path\":\"$home\"}" 2>&1)" 'too many file operations of this agent'
like "another agent's file operation still runs" \
	"$(P call fs.stat "{\"agent\":\"bob\",\"path\":\"$bobhome\"}" 2>&1)" '"ok":true'
wait "${HANG[@]}" 2>/dev/null
kill "$ST" 2>/dev/null; wait "$ST" 2>/dev/null
like "the agent's slots come back when its operations end" \
	"$(P call fs.stat "{\"agent\":\"alice\",\"path\":\"$home\"}" 2>&1)" '"ok":true'

# --- exec.start's cwd: the same roots as `pistisd run --cwd` ---------------------------------
mkdir -p "$R/workspaces/proj" && chmod 0777 "$R/workspaces/proj"
is "exec --cwd beneath /workspaces" "$(P exec --agent alice --cwd /workspaces/proj -- /bin/pwd 2>&1)" /workspaces/proj
is "exec: the default cwd is the agent's home" "$(P exec --agent alice -- /bin/pwd 2>&1)" "$home"
out=$(P exec --agent alice --cwd /etc -- /bin/pwd 2>&1); rc=$?
ok "exec --cwd /etc is refused, not run (rc=$rc)" test "$rc" -ne 0 -a "$out" != /etc
like "exec --cwd /etc: a bad_request naming the roots" "$out" 'cwd must be /workspaces, /workspace or /data'
# The seed image's WORKDIR /workspace, where the server puts the repository (/workspace/repo)
mkdir -p "$R/workspace/repo" && chmod 0777 "$R/workspace/repo"
is "exec --cwd beneath /workspace (the seed image's WORKDIR)" \
	"$(P exec --agent alice --cwd /workspace/repo -- /bin/pwd 2>&1)" /workspace/repo
ok "exec --cwd /workspace/../etc does not reach /etc" \
	test "$(P exec --agent alice --cwd /workspace/../etc -- /bin/pwd 2>&1)" != /etc
ln -sfn /etc "$R/workspace/evil"
like "exec --cwd through a symlink beneath /workspace is refused" \
	"$(P exec --agent alice --cwd /workspace/evil -- /bin/pwd 2>&1)" 'cannot start|Too many levels|Symbolic link'
like "exec --cwd /workspacex (no root of that name) is refused" \
	"$(P exec --agent alice --cwd /workspacex -- /bin/pwd 2>&1)" 'cwd must be'
rm -r "$R/workspace"
out=$(P exec --agent alice --cwd /workspaces/../etc -- /bin/pwd 2>&1)
ok "exec --cwd /workspaces/../etc does not reach /etc" test "$out" != /etc
ln -sfn /etc "$R/workspaces/evil"
like "exec --cwd through a symlink beneath /workspaces is refused" \
	"$(P exec --agent alice --cwd /workspaces/evil -- /bin/pwd 2>&1)" 'cannot start|Too many levels|Symbolic link'

# --- users.ensure with the uid the server keeps (the rebuild story without a /data volume) ------
like "users.ensure {uid}: the agent gets the uid the server dictates" \
	"$(P call users.ensure '{"agent":"kept/a","uid":30540}' 2>&1)" '"ok":true.*"uid":30540'
is "... and its commands run as it" "$(P exec --agent kept/a -- id -u 2>&1)" 30540
like "... the same uid again: ok" "$(P call users.ensure '{"agent":"kept/a","uid":30540}' 2>&1)" \
	'"ok":true.*"uid":30540'
like "... another uid for that agent is refused" \
	"$(P call users.ensure '{"agent":"kept/a","uid":30541}' 2>&1)" '"ok":false'
like "... its uid for another agent is refused" \
	"$(P call users.ensure '{"agent":"kept/b","uid":30540}' 2>&1)" '"ok":false'
for u in 0 1000 10002 10010 4294967295 4294967296 -1 30540.5 '"30542"'; do
	like "... uid $u: a bad_request" "$(P call users.ensure "{\"agent\":\"kept/c\",\"uid\":$u}" 2>&1)" \
		'bad_request'
done
kc=pi-agent-$(printf %s kept/c | sha256sum | cut -c1-8)
fails "... and no user was made for those ($kc)" in_root "$R" id -u "$kc"

# --- policy.* and trusted.* (a root helper; events streamed, one answer) ----------------------
mkdir -p "$R/data/proj" && echo data >"$R/data/proj/f" && chmod 0777 "$R/data/proj" && chmod 0666 "$R/data/proj/f"
RULES='[{"path":"/data/proj","access":"read"}]'
out=$(P call policy.plan "{\"rules\":$RULES}" 2>&1)
like "policy.plan: streams the change events" "$out" '"event":"policy.event".*"kind":"change".*"path":"/data/proj'
like "policy.plan: one answer with the walk's stats" "$out" '"ok":true.*"mode":"plan".*"complete":true'
is "policy.plan: changes nothing" "$(stat -c %a "$R/data/proj/f")" 666
mkdir -p "$R/data/wproj" && echo key >"$R/data/wproj/key" && chmod 0600 "$R/data/wproj/key"
out=$(P call policy.plan '{"rules":[{"path":"/data/wproj","access":"write"}]}' 2>&1)
like "policy.plan: root's private file under write is left, kind private" "$out" \
	'"kind":"private","path":"/data/wproj/key".*"changes":\["owner","mode"\]'
rm -rf "$R/data/wproj"
# A path longer than an event takes escaped (16 KiB): cut before a whole escape, with a mark
# no name can forge (a bare quote: a name's own come out \"), never a shallower, whole path.
(mkdir -p "$R/data/deep" && cd "$R/data/deep" && for i in $(seq 17); do
	n=$(head -c 255 /dev/zero | tr '\0' '\377') && mkdir "$n" && cd "$n" || exit 1
done && : >f && chmod 0666 f)
out=$(P call policy.plan '{"rules":[{"path":"/data/deep","access":"read"}]}' 2>&1)
like "policy.plan: a path too long for its event ends with the cut mark" "$out" \
	'"path":"/data/deep(/(\\\\xff)+)+\\"\[cut: 4364 bytes\]"'
is "... once: the file is the one node to change past the bound" \
	"$(printf '%s\n' "$out" | grep -c '\\"\[cut: 4[0-9]* bytes\]"')" 1
rm -rf "$R/data/deep"
out=$(P call policy.check "{\"rules\":$RULES}" 2>&1)
like "policy.check: not conforming before the apply" "$out" '"conforming":false'
out=$(P call policy.plan '{"rules":"[{\"path\":\"/data/proj\",\n \"access\":\"bogus\"}]"}' 2>&1)
is "policy.plan: invalid rules exit 1" "$?" 1
like "policy.plan: invalid rules are a structured error with the line" "$out" '"ok":false.*"code":"bad_request".*"line":[12]'
# a command that holds the tree open: the tightening apply stops it first
P exec --agent alice -- sleep 60 >/dev/null 2>&1 &
SL=$!
for _ in $(seq 50); do P status 2>/dev/null | grep -q '"running":[[:space:]]*true' && break; sleep 0.1; done
t0=$(date +%s)
out=$(P call policy.apply "{\"rules\":$RULES}" 2>&1)
like "policy.apply: complete, rules saved" "$out" '"ok":true.*"mode":"apply".*"complete":true.*"saved":true'
wait "$SL"; rc=$?
is "policy.apply: before_tighten stopped the running command (SIGTERM)" "$rc" 143
ok "policy.apply: and did not wait for it to finish" test $(($(date +%s) - t0)) -lt 30
like "policy.apply: audit line for the stop" "$(cat "$W/pd.log")" 'tightening; stopping 1 running'
is "policy.apply: the file is no longer world-writable" "$(($(stat -c 0%a "$R/data/proj/f") & 2))" 0
ok "policy.apply: the rules file was written" test -s "$R/data/pistis/rules.json"
out=$(P call policy.check 2>&1)
like "policy.check: the saved rules conform after the apply" "$out" '"conforming":true'
out=$(P call policy.explain '{"path":"/data/proj/f","agent":"alice"}' 2>&1)
like "policy.explain: names the rule and the agent's access" "$out" '"rule":\{"path":"/data/proj","access":"read".*"agent":\{.*"can_write":false'
is "exec works again after the apply" "$(P exec --agent alice -- echo back 2>&1)" back
# The answer is the walk's last record: starts go on from there, not only once the helper has
# exited (strace holds every exit of serve's children 1.5 s; exec.start was "unavailable").
SPD0=$(pgrep -n -f "pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1")
echo x >"$R/data/proj/g" && chmod 0666 "$R/data/proj/g"
strace -q -f -p "$SPD0" -e trace=exit_group -e inject=exit_group:delay_enter=1500000 -o /dev/null &
ST=$!
sleep 0.5
out=$(P call policy.apply "{\"rules\":$RULES}" 2>&1)
like "policy.apply (tightening a new file): complete" "$out" '"ok":true.*"mode":"apply".*"complete":true'
is "... exec right after its answer, its helper not yet gone: runs" \
	"$(P exec --agent alice -- echo now 2>&1)" now
kill "$ST" 2>/dev/null; wait "$ST" 2>/dev/null
# An administrative helper's exit makes both its record pipe and its control socket
# readable; when both land in one epoll batch, the first handler frees the helper's state,
# watches included, and the second event must not touch it (serve once crashed here in
# cb_epoll). strace delays every epoll_wait by 0.3 s so that both are always in one batch.
SPD=$(pgrep -n -f "pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1")
strace -q -p "$SPD" -e trace=epoll_wait -e inject=epoll_wait:delay_enter=300000 -o /dev/null &
ST=$!
sleep 0.5
n=0
for _ in 1 2 3 4 5; do
	P call policy.explain '{"path":"/workspaces","agent":"alice"}' 2>&1 | grep -q '"ok":true' && n=$((n + 1))
done
kill "$ST" 2>/dev/null; wait "$ST" 2>/dev/null
is "admin helpers whose two fds close in one epoll batch: every answer arrives" "$n" 5
ok "... and serve is still running" kill -0 "$SPD"
out=$(P call trusted.list 2>&1)
like "trusted.list: an answer with no commands" "$out" '"ok":true.*"commands":\[\]'
out=$(P call trusted.add "{\"name\":\"hello\",\"data\":\"$(printf '#!/bin/sh\necho trusted-hi\n' | base64 -w0)\"}" 2>&1)
like "trusted.add: added with its digest, drop-in installed" "$out" '"ok":true.*"digest":"[0-9a-f]{64}".*"install":\{"ok":true'
like "trusted.list: lists it" "$(P call trusted.list 2>&1)" '"name":"hello","digest":"[0-9a-f]{64}"'
ok "trusted.add: the script, the wrapper and the sudoers rule are in place" \
	grep -q 'trusted/hello' "$R/etc/sudoers.d/pistis-trusted" "$R/data/bin/hello"
like "trusted: the agent runs it through exec (as pi-tools, via sudo)" \
	"$(P exec --agent alice -- /data/bin/hello 2>&1)" 'trusted-hi'
out=$(P call trusted.add "{\"name\":\"ownint\",\"data\":\"$(printf '#!/workspaces/x/sh\necho hi\n' | base64 -w0)\"}" 2>&1)
like "trusted.add: an interpreter that is not root's alone is a bad_request with the reason" "$out" '"code":"bad_request".*interpreter'
ok "... and nothing was added" test ! -e "$R/data/trusted/ownint"
like "trusted.add: a bad name is a structured error" "$(P call trusted.add '{"name":"../x","data":""}' 2>&1)" '"code":"bad_request"'
like "trusted.remove: removed" "$(P call trusted.remove '{"name":"hello"}' 2>&1)" '"ok":true.*"name":"hello"'
like "trusted.remove: again is not_found" "$(P call trusted.remove '{"name":"hello"}' 2>&1)" '"code":"not_found"'

# --- wss://: server-min with a certificate from a CA made here; --ca and --pin ------------------
T=$W/tls; mkdir -p "$T"
SP2=$((SP + 2)); CP2=$((SP + 3))
if (cd "$T" &&
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=pistis-test-ca &&
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout other.key -out other.pem -days 1 -subj /CN=pistis-other-ca &&
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 &&
	printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >ext &&
	openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 1 -extfile ext &&
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout srv2.key -out srv2.csr -subj /CN=127.0.0.2 &&
	printf 'subjectAltName=IP:127.0.0.2\nbasicConstraints=CA:FALSE\n' >ext2 &&
	openssl x509 -req -in srv2.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv2.pem -days 1 -extfile ext2) >"$T/openssl.log" 2>&1; then
	cp "$T/ca.pem" "$R/etc/pistis/ca.pem"; cp "$T/other.pem" "$R/etc/pistis/other.pem"
	PIN=$(openssl x509 -in "$T/srv.pem" -outform DER | sha256sum | cut -d' ' -f1)
	BADPIN=$(printf '%064d' 0)
	sed -e "s/127.0.0.1:$SP\"/127.0.0.1:$SP2\"/" -e "s/127.0.0.1:$CP\"/127.0.0.1:$CP2\"/" \
		-e "s|\"client_token\"|\"tls\": {\"cert\": \"$T/srv.pem\", \"key\": \"$T/srv.key\"},\n  \"client_token\"|" \
		"$W/pistis.json" >"$W/tls.json"
	ok "wss: the TLS config validates" "$BIN/server-min" --config "$W/tls.json" --check
	"$BIN/server-min" --config "$W/tls.json" >>"$W/smin-tls.log" 2>&1 &
	SM2=$!
	P2() { PISTIS_URL=ws://127.0.0.1:$CP2 "$BIN/pistis" "$@"; }
	tls_try() { # ARGS…: start serve against the TLS relay, wait for a connection; 0 when connected
		# exec: $! must be pistisd itself, so that killing it ends the connection
		(exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin chroot "$R" pistisd serve \
			--relay wss://127.0.0.1:$SP2 --token-file /etc/pistis/token --name s1 \
			${ALLOW:+--allow $ALLOW} "$@" >"$W/pd-tls.log" 2>&1) &
		PD2=$!
		local rc=1
		for _ in $(seq 30); do P2 ls 2>/dev/null | grep -q "s1 *connected" && { rc=0; break; }; sleep 0.1; done
		[ $rc = 0 ] && [ "$(P2 exec --agent alice -- echo over-tls 2>&1)" = over-tls ] || rc=1
		# and a few MiB through the TLS records in one piece
		[ $rc = 0 ] && [ "$(P2 exec --agent alice -- head -c 3000000 /dev/zero | wc -c)" = 3000000 ] || rc=1
		# refused: give pistisd time to get through its handshake and log why (a loaded
		# machine and the generic P-256 code can take longer than the 3 s above)
		if [ $rc != 0 ]; then
			for _ in $(seq 100); do
				grep -qiE 'pin|certificate|verify|tls|ssl' "$W/pd-tls.log" 2>/dev/null && break
				sleep 0.1
			done
		fi
		kill "$PD2" 2>/dev/null; wait "$PD2" 2>/dev/null
		for _ in $(seq 30); do P2 ls 2>/dev/null | grep -q "s1 *disconnected" && break; sleep 0.1; done
		return $rc
	}
	ok "wss: --ca with the right CA connects and runs a command" tls_try --ca /etc/pistis/ca.pem
	! tls_try --ca /etc/pistis/other.pem
	ok "wss: a certificate from another CA is refused" test $? = 0
	ok "wss: --pin with the certificate's SHA-256 connects" tls_try --ca /etc/pistis/ca.pem --pin "$PIN"
	! tls_try --ca /etc/pistis/ca.pem --pin "$BADPIN"
	ok "wss: a wrong --pin is refused" test $? = 0
	like "wss: and the log says why" "$(cat "$W/pd-tls.log")" 'does not match --pin'
	# without --ca: the root's bundle file (mbedtls has no default store; the whole Debian
	# bundle must parse, or the context fails). The test root has none: the host's, copied.
	if [ ! -e "$R/etc/ssl/certs/ca-certificates.crt" ] && [ -s /etc/ssl/certs/ca-certificates.crt ]; then
		mkdir -p "$R/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/certs/"
	fi
	if [ -s "$R/etc/ssl/certs/ca-certificates.crt" ]; then
		! tls_try
		ok "wss: without --ca the system's bundle is used: the test CA is not in it" test $? = 0
		cat "$T/ca.pem" >>"$R/etc/ssl/certs/ca-certificates.crt"
		ok "wss: without --ca the system's bundle is used: with the test CA appended" tls_try
	else
		untested "wss: system bundle" "no /etc/ssl/certs/ca-certificates.crt here"
	fi
	# A CA bundle a local user could write, or one reached through a directory or a link's
	# directory a local user could write, is refused before anything is dialled: an agent
	# could add its own CA and serve the token to a relay of its own.
	ca_refused() { # FILE: serve exits 111 at once, naming what is wrong; the output in $out
		out=$(timeout 20 env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			chroot "$R" pistisd serve --relay wss://127.0.0.1:$SP2 --token-file /etc/pistis/token \
			--name s1 ${ALLOW:+--allow $ALLOW} --ca "$1" 2>&1)
		[ $? = 111 ] && [[ $out == *"Refusing the CA bundle"* ]]
	}
	chmod 0666 "$R/etc/pistis/ca.pem"
	ca_refused /etc/pistis/ca.pem
	ok "wss: a CA bundle anyone may write: refused" test $? = 0
	like "... naming it, its owner and mode" "$out" '/etc/pistis/ca.pem is owned by 0:0 with mode 0666'
	chmod 0644 "$R/etc/pistis/ca.pem"
	chown 10100 "$R/etc/pistis/ca.pem"
	ok "wss: a CA bundle an agent's uid owns: refused" ca_refused /etc/pistis/ca.pem
	chown 0 "$R/etc/pistis/ca.pem"
	mkdir -m 1777 "$R/etc/pistis/pub" && cp "$T/ca.pem" "$R/etc/pistis/pub/ca.pem"
	ca_refused /etc/pistis/pub/ca.pem
	ok "wss: a CA bundle in a sticky world-writable directory: refused" test $? = 0
	like "... naming the directory" "$out" '/etc/pistis/pub is owned by 0:0 with mode 1777'
	ln -s /etc/pistis/ca.pem "$R/etc/pistis/pub/link.pem"
	ok "wss: a link to a good bundle, in a directory anyone may write: refused" \
		ca_refused /etc/pistis/pub/link.pem
	ln -s loop-b.pem "$R/etc/pistis/loop-a.pem" && ln -s loop-a.pem "$R/etc/pistis/loop-b.pem"
	ca_refused /etc/pistis/loop-a.pem
	ok "wss: a loop of links: refused" test $? = 0
	like "... saying so" "$out" 'more than 40 symbolic links on the way'
	ln -s ../pistis/ca.pem "$R/etc/pistis/ca-link.pem"
	ok "wss: a link in a root-only directory to a good bundle: connects" tls_try --ca /etc/pistis/ca-link.pem
	rm -rf "$R/etc/pistis/pub" "$R/etc/pistis/ca-link.pem" "$R"/etc/pistis/loop-?.pem
	kill "$SM2" 2>/dev/null; wait "$SM2" 2>/dev/null

	# The client through a TLS terminator in front of server-min's plain client listener
	# (docs/server-min.md): pistis --ca (or $PISTIS_CA) trusts the operator's CA.
	PX=$((SP + 5))
	python3 "$(cd "$(dirname "$0")" && pwd)/tlscapture.py" "$PX" "$T/srv.pem" "$T/srv.key" "$W/px.ready" 120 "$CP" &
	PXPID=$!
	for _ in $(seq 50); do [ -s "$W/px.ready" ] && break; sleep 0.1; done
	PW() { PISTIS_URL=wss://127.0.0.1:$PX/v1/ws "$BIN/pistis" "$@"; }
	is "pistis --ca over wss:// runs a command" "$(PW --ca "$T/ca.pem" exec --agent alice -- echo over-wss 2>&1)" over-wss
	is "... and \$PISTIS_CA does the same" "$(PISTIS_CA=$T/ca.pem PW exec --agent alice -- echo env-ca 2>&1)" env-ca
	is "... a few MiB through it in one piece" \
		"$(PW --ca "$T/ca.pem" exec --agent alice -- head -c 3000000 /dev/zero | wc -c)" 3000000
	out=$(PW --ca "$T/other.pem" ls 2>&1); rc=$?
	is "pistis --ca of another CA: refused (exit 111)" "$rc" 111
	like "... saying why" "$out" 'Connection to the server failed: .+'
	if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
		out=$(PW ls 2>&1); rc=$?
		is "pistis without --ca: the system's bundle, which lacks the test CA (exit 111)" "$rc" 111
	else
		untested "pistis without --ca" "no /etc/ssl/certs/ca-certificates.crt here"
	fi
	cp "$T/ca.pem" "$W/ca-open.pem" && chmod 0666 "$W/ca-open.pem"
	out=$(PW --ca "$W/ca-open.pem" ls 2>&1); rc=$?
	is "pistis --ca of a bundle others may write: refused before dialling (exit 111)" "$rc" 111
	like "... naming it, its owner and mode" "$out" "Refusing --ca '.*ca-open.pem': .*ca-open.pem is owned by 0:0 with mode 0666: the CA bundle must be root's"
	# Every directory on the way is judged too, a link's target's included (lib/trust-path.c):
	# whoever may write one could swap in a bundle of their own after the check.
	mkdir -m 0777 "$W/open-dir" && cp "$T/ca.pem" "$W/open-dir/ca.pem"
	out=$(PW --ca "$W/open-dir/ca.pem" ls 2>&1); rc=$?
	is "pistis --ca in a directory anyone may write (not sticky): refused before dialling (exit 111)" "$rc" 111
	like "... naming the directory, its owner and mode" "$out" \
		"Refusing --ca '.*open-dir/ca.pem': .*open-dir is owned by 0:0 with mode 0777: a directory on the way to the CA bundle must be root's and writable by no one else \(unless sticky or on a read-only mount\)"
	ln -s "$W/open-dir/ca.pem" "$W/ca-via-open.pem"
	out=$(PW --ca "$W/ca-via-open.pem" ls 2>&1); rc=$?
	is "pistis --ca through a root's link into that directory: refused (exit 111)" "$rc" 111
	like "... naming the directory" "$out" ".*open-dir is owned by 0:0 with mode 0777"
	ln -s "$T/ca.pem" "$W/ca-link.pem"
	is "pistis --ca through a root's link in a root-only directory: runs" \
		"$(PW --ca "$W/ca-link.pem" exec --agent alice -- echo via-link 2>&1)" via-link
	kill "$PXPID" 2>/dev/null; wait "$PXPID" 2>/dev/null

	# What reaches a relay that fails a check: a bare TLS listener (tlscapture.py) records
	# every byte pistisd sends after the handshake. The token must not reach it when the pin
	# or the certificate's address is wrong; with the right pin it does (the control).
	TOKEN=$(cat "$R/etc/pistis/token")
	cap_try() { # CERT KEY ARGS…: serve against the listener; what it received in $W/cap.out
		local cert=$1 key=$2 port=$((SP + 4)) cap pd
		shift 2
		: >"$W/cap.out"
		python3 "$(cd "$(dirname "$0")" && pwd)/tlscapture.py" "$port" "$cert" "$key" "$W/cap.out" 20 &
		cap=$!
		for _ in $(seq 50); do grep -q listening "$W/cap.out" && break; sleep 0.1; done
		(exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin chroot "$R" pistisd serve \
			--relay wss://127.0.0.1:$port --token-file /etc/pistis/token --name s1 \
			${ALLOW:+--allow $ALLOW} "$@" >"$W/pd-cap.log" 2>&1) &
		pd=$!
		for _ in $(seq 150); do
			grep -qF "$TOKEN" "$W/cap.out" && break
			grep -qiE 'pin|certificate|verify|tls|ssl' "$W/pd-cap.log" && break
			sleep 0.1
		done
		sleep 0.3 # anything pistisd would send after its log line
		kill "$pd" "$cap" 2>/dev/null; wait "$pd" "$cap" 2>/dev/null
	}
	cap_try "$T/srv.pem" "$T/srv.key" --ca /etc/pistis/ca.pem --pin "$PIN"
	like "wss: the listener sees the token with the right --pin (the control)" "$(cat "$W/cap.out")" "Bearer $TOKEN"
	cap_try "$T/srv.pem" "$T/srv.key" --ca /etc/pistis/ca.pem --pin "$BADPIN"
	like "wss: a wrong --pin: the TLS handshake completed" "$(cat "$W/cap.out")" '^handshake$'
	unlike "wss: a wrong --pin: the token never reached the server" "$(cat "$W/cap.out")" "$TOKEN"
	unlike "wss: a wrong --pin: nor did the upgrade request" "$(cat "$W/cap.out")" 'GET '
	like "wss: a wrong --pin: the log says why" "$(cat "$W/pd-cap.log")" 'does not match --pin'
	cap_try "$T/srv2.pem" "$T/srv2.key" --ca /etc/pistis/ca.pem
	like "wss: a certificate for another address: the TLS handshake completed" "$(cat "$W/cap.out")" '^handshake$'
	unlike "wss: a certificate for another address: the token never reached the server" "$(cat "$W/cap.out")" "$TOKEN"
	cap_try "$T/srv.pem" "$T/srv.key" --ca /etc/pistis/other.pem
	unlike "wss: a certificate from another CA: the token never reached the server" "$(cat "$W/cap.out")" "$TOKEN"
	exits 100 "wss: --pin with ws:// is a usage error" \
		in_root "$R" pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --pin "$PIN"
else
	sed 's/^/# /' "$T/openssl.log"
	untested "wss" "openssl could not make the test certificates"
fi

# --- hostile input: the daemons keep running ----------------------------------------------------
exits 125 "an empty agent through the relay is a structured error" \
	"$BIN/pistis" exec --agent '' -- true
is "pistisd still running" "$(kill -0 "$PD" && echo yes)" yes
is "server-min still running" "$(kill -0 "$SM" && echo yes)" yes

grep -q 'audit exec cmd=' "$W/pd.log"
ok "pistisd logs an audit record per command" grep -q 'audit exec cmd=.*agent=.*code=.*argv=' "$W/pd.log"
# The line has a bound: a long argv is cut at its end, never the end and code before it.
long=$(head -c 3000 /dev/zero | tr '\0' y)
P exec --agent alice -- sh -c 'exit 7' "$long" >/dev/null 2>&1
like "audit: a 3000-byte argument leaves end and code in the line" \
	"$(grep 'audit exec .*yyyyyyyy' "$W/pd.log" | tail -n 1)" 'end=exited code=7 '
# A death by a signal is never code=0 (a log reader checking code alone read it as a
# success): code is what `pistis exec` exits with, 128+N, beside signal=N.
exits 143 "a command killed by SIGTERM exits 128+15" \
	"$BIN/pistis" exec --agent alice -- sh -c 'kill -TERM $$; sleep 5' audit-signal-death
like "audit: a death by signal 15 says code=143 signal=15" \
	"$(grep 'audit exec .*audit-signal-death' "$W/pd.log" | tail -n 1)" 'end=signaled code=143 signal=15 '
# ... and is cut with a mark outside its quotes, beside the size and digest of the whole argv
# (escaped once: the text log does not escape its escaped fields again).
line=$(grep 'audit exec .*yyyyyyyy' "$W/pd.log" | tail -n 1)
like "audit: the cut argument says so, with its length" "$line" '"y+"\[cut: 3000 bytes\]\]'
want=$(printf 'sh\0-c\0exit 7\0%s\0' "$long" | sha256sum | cut -d' ' -f1)
like "audit: argc, argv_bytes and argv_sha256 name the whole argv" "$line" \
	"argc=4 argv_bytes=3014 argv_sha256=$want argv="
# Padding before a payload cannot hide it: the argument is cut visibly, and the digest is of
# the whole (the payload runs; the line says it was longer than shown).
pad=$(printf '%*s' 300 '' | tr ' ' '#')
P exec --agent alice -- sh -c ": $pad
echo hidden-payload" >/dev/null 2>&1
line=$(grep 'audit exec .*####' "$W/pd.log" | tail -n 1)
like "audit: padding before a payload ends in a visible cut" "$line" '"\[cut: 322 bytes\]\]'
want=$(printf 'sh\0-c\0: %s\necho hidden-payload\0' "$pad" | sha256sum | cut -d' ' -f1)
like "... and the digest is the whole argv's" "$line" "argv_sha256=$want"
# A long working directory comes last, cut with a mark: argv stays in the line.
deep=$(P exec --agent alice -- sh -c 'd=$HOME; for i in 1 2 3 4 5 6 7; do d=$d/$(printf "%0200d" $i); done; mkdir -p "$d" && echo "$d"')
P exec --agent alice --cwd "$deep" -- sh -c 'exit 4' >/dev/null 2>&1
line=$(grep 'audit exec .*code=4 ' "$W/pd.log" | tail -n 1)
like "audit: a 1.4 KB cwd leaves argv in the line" "$line" 'argv=\["sh","-c","exit 4"\] cwd='
like "... and is cut last, with a mark" "$line" '0+"\[cut: [0-9]+ bytes\]$'


# --- the bound on unacknowledged output of all commands together (--max-buffered) -----------
# Three commands write 3 MiB each to readers that do not read: pistisd stops reading them
# once 1 MiB is waiting for acks, not at 3 x 8 MiB.
exits 100 "--max-buffered 0 is a usage error" \
	in_root "$R" pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --max-buffered 0
SD=$(pgrep -n -f "pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1")
kill "$SD" 2>/dev/null
for _ in $(seq 50); do kill -0 "$SD" 2>/dev/null || break; sleep 0.1; done
# exec: $! is pistisd itself
(exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin chroot "$R" pistisd serve \
	--relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1 --max-buffered 1 \
	${ALLOW:+--allow $ALLOW} >"$W/pd3.log" 2>&1) &
PD=$!
for _ in $(seq 50); do timeout 5 "$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
SLOW=()
for i in 1 2 3; do
	(timeout 30 "$BIN/pistis" exec --agent alice -- head -c 3145728 /dev/zero | sleep 20) >/dev/null 2>&1 &
	SLOW+=($!)
done
paused=0 st=
for _ in $(seq 50); do
	st=$(timeout 5 "$BIN/pistis" --json status 2>/dev/null)
	paused=$(echo "$st" | grep -c '"paused":[[:space:]]*true')
	[ "$paused" -ge 3 ] && break
	sleep 0.2
done
buf=$(echo "$st" | python3 -c 'import json,sys; print(json.load(sys.stdin)["buffered"])' 2>/dev/null)
is "--max-buffered: all three commands wait (paused)" "$paused" 3
ok "--max-buffered: at most 1 MiB + a frame per command waits for acks (${buf:-?} bytes)" \
	test "${buf:-0}" -gt 0 -a "${buf:-0}" -le $((1048576 + 3 * 262144))
pkill -f "head -c 3145728 /dev/zero" 2>/dev/null
# each job is a subshell around a pipeline: its timeout and sleep are its children, which
# a kill of the subshell leaves running
for p in "${SLOW[@]}"; do pkill -P "$p" 2>/dev/null; done
kill "${SLOW[@]}" 2>/dev/null; wait "${SLOW[@]}" 2>/dev/null

# --- one reader that never acknowledges: a quarter of the bound, not all of it -------------
# A client reads three commands' 3 MiB each and acknowledges nothing, under --max-buffered 8:
# its commands pause once it holds 2 MiB, so another client's command runs (before: all
# 8 MiB were its, and every other command paused at its first output). docs/protocol.md.
kill "$PD" 2>/dev/null; wait "$PD" 2>/dev/null
(exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin chroot "$R" pistisd serve \
	--relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1 --max-buffered 8 \
	${ALLOW:+--allow $ALLOW} >"$W/pd5.log" 2>&1) &
PD=$!
for _ in $(seq 50); do timeout 5 "$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
python3 "$(cd "$(dirname "$0")" && pwd)/wsfake.py" noack-reader "$CP" "$PISTIS_TEST_CT" s1 "$BIN/pistis" 3 3145728 \
	>"$W/na.out" 2>&1
nb=$(sed -n 's/^buffered_kib=//p' "$W/na.out")
ok "one reader: its commands pause at its quarter, 2 MiB + a read per command (${nb:-?} KiB)" \
	test "${nb:-0}" -ge 2048 -a "${nb:-99999}" -le $((2048 + 3 * 256))
like "one reader: its three commands have one reader, its connection as the relay names it (not the one it sent)" \
	"$(sed -n 's/^readers=//p' "$W/na.out")" '^[0-9a-f]+\.[0-9]+$'
is "one reader: ... which holds what all its commands hold" "$(sed -n 's/^reader_kib=//p' "$W/na.out")" "${nb:-?}"
is "one reader: another client's command runs to its end meanwhile" \
	"$(sed -n 's/^other_output=//p' "$W/na.out")" ok
om=$(sed -n 's/^other_ms=//p' "$W/na.out")
ok "one reader: ... at once (${om:-?} ms < 5000)" test "${om:-99999}" -lt 5000
is "one reader: acknowledging, it then gets all 3 x 3 MiB" "$(sed -n 's/^noack_output=//p' "$W/na.out")" ok
grep -q '^noack_output=ok' "$W/na.out" || sed 's/^/# /' "$W/na.out"

# --- file operations without openat2 (PISTIS_NO_OPENAT2: the per-component fallback) ----------
# A component made only of dots ("...") is a name like any other, never the end of the path.
kill "$PD" 2>/dev/null; wait "$PD" 2>/dev/null
(exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PISTIS_NO_OPENAT2=1 \
	chroot "$R" pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1 \
	${ALLOW:+--allow $ALLOW} >"$W/pd4.log" 2>&1) &
PD=$!
for _ in $(seq 50); do timeout 5 "$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
echo "three dots" >"$R$home/..."
mkdir -p "$R$home/d/..."
echo "inner" >"$R$home/d/.../f"
chown -R --reference="$R$home" "$R$home/..." "$R$home/d"
is "fallback: fs.read of a file named ... reads that file" "$(P read --agent alice "$home/..." 2>&1)" "three dots"
is "fallback: fs.read through a directory named ..." "$(P read --agent alice "$home/d/.../f" 2>&1)" "inner"
echo "written" | P write --agent alice "$home/d/.../g"
is "fallback: fs.write through a directory named ... lands inside it" "$(cat "$R$home/d/.../g" 2>&1)" "written"
like "fallback: fs.list of a/.. is refused, not a listing of a" \
	"$(P call fs.list "{\"agent\":\"alice\",\"path\":\"$home/d/..\"}" 2>&1)" '"ok":false'
is "fallback: fs.read of the home itself through a trailing /. is not a file" \
	"$(P read --agent alice "$home/d/./." >/dev/null 2>&1; echo $?)" 1
done_testing
