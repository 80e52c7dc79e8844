#!/bin/bash
# How a command's end reads, to the client and in serve's audit trail (red team):
# - a program that is there but that execve refuses (no x bit, a directory, no #! line, a
#   bad ELF header, a #! interpreter that is missing) is `cannot_exec` and 126, and the
#   missing interpreter is named as such; only a program that is not there is `not_found`
#   and 127 (before: `internal` and 125, "a relay or protocol failure", and a script with a
#   bad interpreter read "not found", 127). `pistisd run` says the same.
# - a stop signal to `pistisd serve` gives the running commands SIGTERM and a grace, sends
#   their exec.exit (the client exits with the command's own code) and writes their audit
#   lines (a command on a pseudo-terminal too); a second signal ends the grace at once (before: every command was SIGKILLed at
#   once, no exec.exit, no audit line, and the client waited for an end that never came).
# - a pistisd started by a parent that ignores SIGCHLD reports its commands' ends (before:
#   `run` exited 111, serve sent no exec.exit), and a command of run or serve started by a
#   parent that blocks and ignores signals has none blocked or ignored.
# Runs as root in a private mount namespace over a throwaway Debian root; agent uid 32012.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
need_python_root
trap serve_test_cleanup EXIT

in_root "$R" pistisd users ensure-base >/dev/null || exit 1
in_root "$R" pistisd users ensure a --uid 32012 >/dev/null || exit 1
T=$R/workspaces/t
mkdir -p "$T"
printf '#!/nonexistent/interp\necho hi\n' >"$T/badint"
printf 'echo no-shebang\n' >"$T/nosb"
printf '\177ELF garbage' >"$T/badelf"
printf '#!/bin/sh\necho ok\n' >"$T/noexec"
chmod 755 "$T/badint" "$T/nosb" "$T/badelf"
chmod 644 "$T/noexec"
mkdir -p "$T/dir"
# A devpts instance of the root's own, as a container has, for the commands on a pty.
mkdir -p "$R/dev/pts" && mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$R/dev/pts" &&
	ln -sf pts/ptmx "$R/dev/ptmx" || echo "# cannot mount devpts in the root"

# --- exec failures through `pistisd run` ----------------------------------------------
run() { in_root "$R" pistisd run --agent a -- "$@"; }
rc=0; out=$(run /workspaces/t/badint 2>&1) || rc=$?
is "run: a missing #! interpreter is 126" "$rc" 126
like "run: ... and is named as the interpreter, not the file" "$out" 'the file is there; the interpreter'
rc=0; run /workspaces/t/nope >/dev/null 2>&1 || rc=$?
is "run: a program that is not there is 127" "$rc" 127

# --- a stopped command with a SIGTERM trap: continued, so the trap runs ----------------
t0=$(date +%s%N)
rc=0; out=$(in_root "$R" pistisd run --agent a --timeout 0.5 --json -- /bin/sh -c \
	'trap "echo got-term; exit 5" TERM; kill -STOP $$; echo resumed' 2>&1) || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
is "run: a stopped command's SIGTERM trap ran at the timeout ($ms ms)" "$rc" 5
like "... its output came" "$out" 'got-term'
like "... --json gives its code beside end=timeout" "$out" '"end":"timeout","exit_code":5,"signal":0'

# --- exec failures through serve and the client --------------------------------------
relay_up "$R" "$W" || { echo "Bail out! pistisd serve did not connect: $(tail -n 3 "$W/pd.log")"; exit 1; }
X() { timeout 25 "$BIN/pistis" exec --sandbox s1 --agent a -- "$@" >"$W/o" 2>"$W/e"; }
for f in badint nosb badelf noexec dir; do
	rc=0; X "/workspaces/t/$f" || rc=$?
	is "exec $f: 126, the program cannot run" "$rc" 126
	like "exec $f: the error is cannot_exec" "$(cat "$W/e")" '^pistis: cannot_exec: cannot start: execve'
done
like "exec badint: the interpreter is named" "$(X /workspaces/t/badint; cat "$W/e")" 'interpreter its #! line'
rc=0; X /workspaces/t/nope || rc=$?
is "exec of a program that is not there: 127" "$rc" 127
like "... not_found" "$(cat "$W/e")" '^pistis: not_found: cannot start: execve: No such file'
rc=0; X nope-on-path || rc=$?
is "exec of a name on no PATH directory: 127" "$rc" 127
rc=0; timeout 25 "$BIN/pistis" --json exec --sandbox s1 --agent a -- /bin/sh -c 'kill -SEGV $$' \
	>"$W/o" 2>&1 || rc=$?
is "a death by SIGSEGV: 139" "$rc" 139
like "... exec.exit says signal 11 and whether it dumped core" "$(tr -d ' \t\n' <"$W/o")" \
	'"end":"signaled","signal":11,"core":false'
is "every failure is on record, not started" "$(grep -c 'audit exec .* end=not-started' "$W/pd.log")" 8

# --- refused requests are on record, escaped, and a flood of them is bounded ------------
# 3000 exec.start requests as fast as a client can send them, each refused before it
# runs: an agent that does not exist, a cwd outside the rules, an argv and an agent name
# with a newline and ESC that would forge a line of their own.
before=$(wc -l <"$W/pd.log")
python3 - "$CP" "$PISTIS_TOKEN" "$(dirname "$0")" >"$W/flood" 2>&1 <<'PY' || true
import json, sys, time
sys.path.insert(0, sys.argv[3])
from wsfake import WS
ws = WS(int(sys.argv[1]), "/v1/ws", "pistis-client.v1", sys.argv[2])
forged = "x\npistisd: audit exec cmd=1 agent=\"root\" end=exited\x1b[2J"
reqs = [{"op": "exec.start", "sandbox": "s1", "agent": "a", "cwd": "/etc",
         "argv": ["/bin/echo", forged]},
        {"op": "exec.start", "sandbox": "s1", "agent": "zz" + forged, "argv": ["/bin/true"]},
        {"op": "fs.read", "sandbox": "s1", "agent": "yy" + forged, "path": "/w/" + forged}]
t0 = time.time()
for i in range(3000):
    r = dict(reqs[i % 3], id="f%d" % i)
    ws.send(json.dumps(r))
got = 0
while got < 3000:
    b, d = ws.recv()
    if not b and b'"ok":false' in d:
        got += 1
print("answers=%d seconds=%.1f" % (got, time.time() - t0))
PY
like "every flood request was answered" "$(cat "$W/flood")" '^answers=3000'
secs=$(sed -n 's/.*seconds=\([0-9]*\).*/\1/p' "$W/flood")
# The count of what was left out comes once a second is over (a timer of serve's when the
# flood fitted in one second): waited for, up to 10 s, not a fixed 1.2 s that a loaded
# machine may not give serve's loop. The refusals themselves are logged as they are
# answered, so all of them are in the log by now.
for _ in $(seq 100); do
	grep -Eq 'audit refused: [0-9]+ more refused request' "$W/pd.log" && break
	sleep 0.1
done
n=$(grep -c '^pistisd: audit refused op=\(exec.start\|fs.read\)' "$W/pd.log")
ok "refusals are logged, at most 20 a second ($n lines in ${secs}+1 s)" \
	[ "$n" -ge 10 -a "$n" -le $((20 * (secs + 2))) ]
all=$(($(wc -l <"$W/pd.log") - before))
ok "the flood wrote at most 40 lines a second of any kind ($all)" [ "$all" -le $((40 * (secs + 2))) ]
like "... the rest counted" "$(cat "$W/pd.log")" 'audit refused: [0-9]+ more refused request\(s\) in that second not logged'
like "a refusal names the agent, the code, why, and the argv escaped" "$(cat "$W/pd.log")" \
	'audit refused op=exec.start id="[^"]*f[0-9]+" code=bad_request agent="a" message="cwd must be[^"]*" argc=2 argv_bytes=[0-9]+ argv_sha256=[0-9a-f]{64} argv=\["/bin/echo","x\\npistisd: audit exec cmd=1 agent=\\"root\\" end=exited\\x1b\[2J"\] cwd="/etc"'
like "an unknown agent's name is escaped too" "$(cat "$W/pd.log")" 'code=bad_request agent="zzx\\npistisd'
like "a refused file operation is on record, its agent and path escaped" "$(cat "$W/pd.log")" \
	'audit refused op=fs.read id="[^"]*f[0-9]+" code=bad_request agent="yyx\\npistisd.*" message="agent: invalid agent id[^"]*" path="/w/x\\npistisd'
is "no forged line, no raw control byte in serve's log" \
	"$(grep -c '^pistisd: audit exec cmd=1 agent="root"' "$W/pd.log")/$(LC_ALL=C grep -c $'[\x01-\x09\x0b-\x1f\x7f]' "$W/pd.log")" 0/0

# --- input that arrives as a command ends ---------------------------------------------
# The client's terminal may send keys or its ^D after the command exited (pistis exec --tty
# under script(1) printed "pistis: internal: stdin: Broken pipe" over the output): dropped,
# as ssh drops them. A frame for a command started without stdin is a bad_request.
python3 - "$CP" "$PISTIS_TOKEN" "$(dirname "$0")" >"$W/late" 2>&1 <<'PY' || true
import json, struct, sys, time
sys.path.insert(0, sys.argv[3])
from wsfake import WS, frame
ws = WS(int(sys.argv[1]), "/v1/ws", "pistis-client.v1", sys.argv[2])
def start(i, argv, **kw):
    ws.send(json.dumps(dict(id="late%d" % i, op="exec.start", sandbox="s1", agent="a", argv=argv, **kw)))
    a = ws.recv_json("late%d" % i)
    if "cmd" not in a:
        print("start: %s" % json.dumps(a)); sys.exit(1)
    return a["cmd"]
def drain(secs):
    end = time.time() + secs
    while time.time() < end:
        try:
            ws.recv_json(timeout=0.2)
        except Exception:
            pass
# Still running, but its terminal is gone (every fd of it closed: the output's end), as
# between a command's last output and its exit: keys typed then, and the ^D.
pty = start(0, ["/bin/sh", "-c", "exec </dev/null >/dev/null 2>&1; sleep 2"], pty=True)
pipe = start(1, ["/bin/sh", "-c", "sleep 2"], stdin="pipe")
none = start(2, ["/bin/sh", "-c", "sleep 2"])
drain(1.0)
for cmd in (pty, pipe):
    if cmd == pipe:  # the EOF first: what comes after it has no stdin to go to
        ws.send(frame(0, 1, cmd, 1, b""), binary=True)
    ws.send(frame(0, 0, cmd, 2 if cmd == pipe else 1, b"typed late"), binary=True)
ws.send(frame(0, 1, pty, 2, b"\x04"), binary=True)
ws.send(frame(0, 0, none, 1, b"to nobody"), binary=True)
drain(1.5)
end = time.time() + 10  # all three over before the stop below counts what runs
while time.time() < end and len({o.get("cmd") for o in ws.seen if o.get("event") == "exec.exit"} & {pty, pipe, none}) < 3:
    drain(0.2)
errs = ["%s:%s" % ((o.get("error") or {}).get("code"), (o.get("error") or {}).get("message"))
        for o in ws.seen if o.get("ok") is False]
print("errors=%d" % len(errs))
for e in errs:
    print(e)
PY
is "stdin for a command whose stdin is gone is dropped, no error" "$(sed -n 1p "$W/late")" errors=1
like "... one for a command without stdin is told so" "$(sed -n 2p "$W/late")" \
	'^bad_request:stdin: command [0-9]+ was started without stdin'

# --- a stop signal to serve while commands run -----------------------------------------
# A command that ends on SIGTERM with its own code, and prints on the way out.
timeout 25 "$BIN/pistis" exec --sandbox s1 --agent a -- /bin/sh -c \
	'trap "echo got-term; exit 3" TERM; echo started; /bin/sleep 300 & wait' >"$W/c1" 2>&1 &
C1=$!
# One that ignores it: SIGKILL after the grace.
timeout 25 "$BIN/pistis" exec --sandbox s1 --agent a -- /bin/sh -c \
	'trap "" TERM; echo started; while :; do /bin/sleep 1; done' >"$W/c2" 2>&1 &
C2=$!
# One on a pseudo-terminal: the stop reaches it through the same grace.
timeout 25 "$BIN/pistis" exec --tty --sandbox s1 --agent a -- /bin/sh -c \
	'trap "echo got-term-on-tty; exit 4" TERM; tty; echo started; /bin/sleep 300 & wait' </dev/null >"$W/c4" 2>&1 &
C4=$!
for _ in $(seq 100); do grep -q started "$W/c1" && grep -q started "$W/c2" && grep -q started "$W/c4" && break; sleep 0.1; done
ok "the three commands run" grep -q started "$W/c2"
like "... one of them on a pseudo-terminal" "$(cat "$W/c4")" '/dev/pts/[0-9]+'

t0=$(date +%s%N)
kill -TERM "$PD"
rc=0; wait "$PD" || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
PD=
is "serve exits 0 on SIGTERM" "$rc" 0
ok "serve waited for the grace, and no longer ($ms ms)" [ "$ms" -ge 1500 -a "$ms" -lt 6000 ]
rc=0; wait "$C1" || rc=$?
is "the client of the command that ended on SIGTERM exits with its code" "$rc" 3
like "its last output arrived" "$(cat "$W/c1")" 'got-term'
rc=0; wait "$C2" || rc=$?
is "the client of the command that ignored SIGTERM exits 137 (SIGKILL)" "$rc" 137
rc=0; wait "$C4" || rc=$?
is "the client of the command on a pseudo-terminal exits with its code" "$rc" 4
like "its last output arrived" "$(cat "$W/c4")" 'got-term-on-tty'
like "serve said what it was doing" "$(cat "$W/pd.log")" 'Signal 15: stopping; 3 running command'
is "the three ends are on record" "$(grep -c 'audit exec .* end=cancelled' "$W/pd.log")" 3
is "no process of the agent is left" "$(root_pids "$R" 32012 | wc -l)" 0
is "... and no pseudo-terminal" "$(ptys_in_use "$R/dev/pts")" 0

# A second signal does not wait for the grace. (This serve also raises the agents' limit
# of processes and threads, which was 512 with no way to change it under serve.)
is "a command may have 512 processes and threads by default" \
	"$(in_root "$R" pistisd run --agent a -- /bin/sh -c 'grep "^Max processes" /proc/self/limits' 2>&1 | awk '{print $3}')" 512
exits 100 "serve --pids-max 0 is a usage error" in_root "$R" pistisd serve --relay "ws://127.0.0.1:$SP" \
	--token-file /etc/pistis/token --pids-max 0
(in_root_exec "$R" pistisd serve --relay "ws://127.0.0.1:$SP" --token-file /etc/pistis/token \
	--name s1 --pids-max 2048 ${ALLOW:+--allow $ALLOW}) >>"$W/pd.log" 2>&1 &
PD=$!
ok "serve started again is connected" sandbox_connected s1
is "serve --pids-max 2048: a command may have 2048" \
	"$("$BIN/pistis" exec --sandbox s1 --agent a -- /bin/sh -c 'grep "^Max processes" /proc/self/limits' 2>&1 | awk '{print $3}')" 2048
timeout 25 "$BIN/pistis" exec --sandbox s1 --agent a -- /bin/sh -c \
	'trap "" TERM; echo started; while :; do /bin/sleep 1; done' >"$W/c3" 2>&1 &
C3=$!
for _ in $(seq 100); do grep -q started "$W/c3" && break; sleep 0.1; done
t0=$(date +%s%N)
kill -TERM "$PD"; sleep 0.2; kill -INT "$PD"
rc=0; wait "$PD" || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
PD=
ok "a second signal stops serve at once ($ms ms)" [ "$ms" -lt 1500 ]
like "... saying so" "$(cat "$W/pd.log")" 'Signal 2 again: stopping now'
like "... and the command killed then is on record" "$(cat "$W/pd.log")" 'end=killed reason="pistisd serve exited"'
wait "$C3" 2>/dev/null
is "no process of the agent is left" "$(root_pids "$R" 32012 | wc -l)" 0

# --- pistisd started with SIGCHLD ignored, and what its commands get of its signals ----
# An ignored SIGCHLD survives execve, and with it the kernel reaps the children itself:
# every wait fails with ECHILD. `pistisd run` exited 111 ("Failed while supervising 'sh':
# No child process") whatever its command's code, and serve never reported a command's
# end: the client waited for ever. Started so by a parent that ignores SIGCHLD (a
# supervisor, a script sparing itself zombies); pistisd-entry resets it for its child.
# The parent below also ignores SIGPIPE, SIGINT, SIGHUP (and SIGXFSZ: python's) and blocks
# SIGTERM, SIGUSR2 and SIGALRM, none of which an agent's command may inherit: each starts
# with no signal blocked or ignored (pinned here; serve itself ignores SIGPIPE, SIGXFSZ).
SIG_WRAP=(python3 -c 'import os, signal as s, sys
s.pthread_sigmask(s.SIG_BLOCK, {s.SIGTERM, s.SIGUSR2, s.SIGALRM})
for n in (s.SIGCHLD, s.SIGPIPE, s.SIGINT, s.SIGHUP): s.signal(n, s.SIG_IGN)
os.execvp(sys.argv[1], sys.argv[1:])')
sigs() { grep -E '^Sig(Blk|Ign):' "$1" | tr -d ' \t' | paste -sd' '; }
"${SIG_WRAP[@]}" cp /proc/self/status "$W/wrap-status"
# At least those: what started this test may have left others ignored too (CI's run had
# 32 and 33, glibc's own), which pistisd's commands must not get either.
wblk=$(sed -n 's/^SigBlk:[[:space:]]*//p' "$W/wrap-status")
wign=$(sed -n 's/^SigIgn:[[:space:]]*//p' "$W/wrap-status")
ok "the parent below passes its signals on blocked and ignored (SigBlk $wblk SigIgn $wign)" \
	test $(((0x$wblk & 0x6800) == 0x6800 && (0x$wign & 0x1011003) == 0x1011003)) = 1
CLEAN="SigBlk:0000000000000000 SigIgn:0000000000000000"
rc=0; out=$("${SIG_WRAP[@]}" chroot "$R" /usr/bin/env -i PATH=/usr/bin:/bin /usr/local/bin/pistisd \
	run --agent a -- /bin/sh -c 'setsid /bin/sleep 300 & echo ran; exit 3' 2>&1) || rc=$?
is "run with SIGCHLD ignored: its command's code (3), not 111" "$rc" 3
is "... its output, and nothing about supervising" "$out" ran
is "... the command's leftover is killed" "$(root_pids "$R" 32012 | wc -l)" 0
"${SIG_WRAP[@]}" chroot "$R" /usr/bin/env -i PATH=/usr/bin:/bin /usr/local/bin/pistisd run --agent a \
	-- /bin/cat /proc/self/status >"$W/run-status" 2>&1
is "... its command starts with no signal blocked or ignored" "$(sigs "$W/run-status")" "$CLEAN"
ROOT_WRAP=("${SIG_WRAP[@]}")
(in_root_exec "$R" pistisd serve --relay "ws://127.0.0.1:$SP" --token-file /etc/pistis/token \
	--name s1 ${ALLOW:+--allow $ALLOW}) >>"$W/pd.log" 2>&1 &
PD=$!
ROOT_WRAP=()
ok "serve started with SIGCHLD ignored is connected" sandbox_connected s1
rc=0; out=$(timeout 20 "$BIN/pistis" exec --sandbox s1 --agent a -- /bin/sh -c 'echo ran; exit 3' 2>&1) || rc=$?
is "... a command's end reaches the client: its code (3); it waited for ever" "$rc" 3
rc=0; timeout 20 "$BIN/pistis" exec --sandbox s1 --agent a --timeout 1 -- /bin/sleep 300 >/dev/null 2>&1 || rc=$?
is "... a command ended by its timeout too (143)" "$rc" 143
rc=0; out=$(echo written | timeout 20 "$BIN/pistis" write --sandbox s1 --agent a /tmp/chld-w 2>&1) || rc=$?
is "... a file operation (its helper waited for) answers ok" "$rc:$out" 0:
timeout 20 "$BIN/pistis" exec --sandbox s1 --agent a -- /bin/cat /proc/self/status >"$W/serve-status" 2>&1
is "... a command starts with no signal blocked or ignored" "$(sigs "$W/serve-status")" "$CLEAN"
kill -TERM "$PD"; wait "$PD" 2>/dev/null; PD=
is "no process of the agent is left" "$(root_pids "$R" 32012 | wc -l)" 0
done_testing
