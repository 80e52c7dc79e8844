#!/bin/bash
# Red team, the sandbox's life cycle: the platform freezes an idle sandbox's whole container
# (docker pause: the cgroup freezer) and thaws it at the next command. A real server-min,
# `pistisd serve` in a cgroup of this test's own (never one of the host's) and `pistis`
# clients, throwaway Debian root, loopback only.
# 1. serve and its commands frozen for 35 s, longer than the WebSocket ping timeouts of both
#    sides (30 s): serve redials by itself, a command's output that spans the freeze comes
#    once and in order with its exit code, and a `--timeout 8` command frozen 2 s after
#    its start is given the rest of its 8 s after the thaw (the freeze is not time it
#    ran), where it was killed at once on the thaw, as timed out, before.
# 2. Only one agent's cgroup frozen (another manager's doing): another agent's commands
#    and the relay's pings go on; the frozen agent's starts fail in ~2 s ("timed out
#    before exec"). Before, the vfork-style start waited for a child born frozen without
#    a bound, and held serve's loop until the relay dropped the sandbox.
# 3. An agent that put a file or FIFO where its TMPDIR is can still run commands.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
CG2=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
OURS=$(sed -n 's/^0:://p' /proc/self/cgroup)
CG=$CG2${OURS%/}/pistis-lifecycle-$$
if [ -z "$CG2" ] || ! mkdir "$CG" 2>/dev/null || [ ! -e "$CG/cgroup.freeze" ]; then
	rmdir "$CG" 2>/dev/null
	missing "no writable cgroup v2 with cgroup.freeze here"
fi
R=$(root_fresh debian) || { rmdir "$CG"; missing "no debian test root"; }
W=$(scratch)
cleanup() {
	local pid
	# thaw before anything else: a frozen process cannot end
	find "$CG" -name cgroup.freeze -exec sh -c 'echo 0 >"$1"' sh {} \; 2>/dev/null
	for pid in $(jobs -p); do kill "$pid" 2>/dev/null; done
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	echo 1 >"$CG/cgroup.kill" 2>/dev/null
	for _ in $(seq 50); do grep -q 'populated 0' "$CG/cgroup.events" && break; sleep 0.1; done
	find "$CG" -depth -type d -exec rmdir {} \; 2>/dev/null
	wait 2>/dev/null
	[ -n "${PISTIS_KEEP_LOG:-}" ] && cat "$W/pd.log" >"$PISTIS_KEEP_LOG"
	root_cleanup
}
trap cleanup EXIT
P() { "$BIN/pistis" "$@"; }
now() { date +%s%N; }
ms_since() { echo $((($(now) - $1) / 1000000)); }
connected() { P ls 2>/dev/null | grep -q "^s1 *connected"; }

# Agents of uids far from 10100: other tests on this machine SIGSTOP or kill processes of
# their own agents' uids machine-wide (redteam-probe stall), which stopped a command of
# ours in the middle of the freeze.
AUID=$((20000 + RANDOM % 30000))
in_root "$R" pistisd users ensure a --uid "$AUID" >/dev/null &&
	in_root "$R" pistisd users ensure b --uid $((AUID + 1)) >/dev/null &&
	in_root "$R" pistisd users ensure t-fifo --uid $((AUID + 2)) >/dev/null &&
	in_root "$R" pistisd users ensure t-file --uid $((AUID + 3)) >/dev/null &&
	in_root "$R" pistisd users ensure t-symlink --uid $((AUID + 4)) >/dev/null ||
	{ echo "Bail out! cannot make the agents"; exit 1; }
# serve (and so every command of it: their cgroups are beneath serve's) in our cgroup
ROOT_WRAP=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG")
if ! relay_up "$R" "$W"; then
	_tap_result 1 "serve connects" "$(tail -n 5 "$W/pd.log")"
	done_testing
	exit 1
fi
is "serve runs in the test's cgroup" "$(P exec --agent a -- sh -c 'sed -n "s/^0:://p" /proc/self/cgroup' 2>&1 |
	grep -c "^${OURS%/}/pistis-lifecycle-$$/pistis/")" 1

# --- 1. the whole sandbox frozen past every timer -------------------------------------
P exec --agent a -- sh -c 'i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo $i; sleep 0.25; done; exit 7' \
	>"$W/c1.out" 2>"$W/c1.err" &
C1=$!
(P exec --agent a --timeout 8 -- sh -c 'echo start; sleep 60; echo end' >"$W/c2.out" 2>"$W/c2.err"
	echo "$? $(now)" >"$W/c2.rc") &
C2=$!
# Both commands running (their first output is there; up to 10 s, as a loaded machine may
# take over the 2 s a fixed sleep gave them to start), then 2 s more before the freeze.
for _ in $(seq 100); do [ -s "$W/c1.out" ] && grep -q start "$W/c2.out" && break; sleep 0.1; done
sleep 2
echo 1 >"$CG/cgroup.freeze"
for _ in $(seq 50); do grep -q 'frozen 1' "$CG/cgroup.events" && break; sleep 0.1; done
like "serve and its commands are frozen" "$(cat "$CG/cgroup.events")" 'frozen 1'
sleep 35
like "server-min marks the frozen sandbox disconnected" "$(P ls 2>&1)" '^s1 +disconnected'
ok "the client of a frozen command still waits" kill -0 "$C1"
echo 0 >"$CG/cgroup.freeze"
T=$(now)
for _ in $(seq 100); do connected && break; sleep 0.1; done
ok "serve redials by itself after the thaw ($(ms_since "$T") ms)" connected
sleep 2
ok "the --timeout 8 command frozen 2 s after its start still runs 2 s after the thaw" \
	kill -0 "$C2"
wait "$C1"
is "the command spanning the freeze exits with its code" "$?" 7
is "... and its output came once and in order" "$(paste -sd' ' "$W/c1.out")" "$(seq 40 | paste -sd' ')"
wait "$C2"
read -r rc2 end2 <"$W/c2.rc"
is "the --timeout 8 command ends by its timeout (143)" "$rc2" 143
E2=$(((end2 - T) / 1000000))
ok "... about 6 s of running time after the thaw (${E2} ms), not at once" \
	test "$E2" -ge 4000 -a "$E2" -lt 9000
D2=$(sed -n 's/.*audit exec cmd=[0-9]* .* end=timeout .*duration_ms=\([0-9]*\) .*sleep 60.*/\1/p' "$W/pd.log")
ok "... its duration leaves the freeze out (${D2:-?} ms)" test "${D2:-99999}" -ge 7000 -a "${D2:-99999}" -lt 15000
is "a new command runs after the thaw" "$(P exec --agent a -- echo after 2>&1)" after

# --- 2. one agent's cgroup frozen by another manager -------------------------------------
P exec --agent b -- true
AU=$(P exec --agent a -- id -u 2>/dev/null)
AD=
for d in "$CG"/pistis/pi-agent-*; do [ "$(stat -c %g "$d")" = "$AU" ] && AD=$d; done
ok "agent a's cgroup is found (${AD:-?})" test -n "$AD"
echo 1 >"$AD/cgroup.freeze"
APIDS=
for i in 1 2 3; do
	(s=$(now); P exec --agent a -- echo a$i >"$W/a$i.out" 2>&1; echo "$? $(ms_since "$s")" >"$W/a$i.rc") &
	APIDS+=" $!"
done
sleep 0.3
worst=0
for i in 1 2 3 4 5; do
	s=$(now)
	o=$(P exec --agent b -- echo b$i 2>&1)
	t=$(ms_since "$s")
	[ "$o" = "b$i" ] || worst=99999
	[ "$t" -gt "$worst" ] && worst=$t
done
ok "another agent's commands run while a's cgroup is frozen (slowest ${worst} ms)" test "$worst" -lt 1500
wait $APIDS
for i in 1 2 3; do
	like "a's start $i into its frozen cgroup fails in ~2 s ($(cut -d' ' -f2 "$W/a$i.rc" 2>/dev/null) ms)" \
		"$(cat "$W/a$i.rc" 2>/dev/null) $(cat "$W/a$i.out")" '^125 [0-9]{4} .*timed out before exec'
done
ok "the sandbox stayed connected" connected
echo 0 >"$AD/cgroup.freeze"
is "after the thaw a's commands run again" "$(P exec --agent a -- echo again 2>&1)" again

# --- 3. what an agent leaves in its home for its next command, or the next boot --------
# Its TMPDIR (~/tmp) replaced by a FIFO or a file: every later ensure failed ("cannot
# make …/tmp: Not a directory"), so every command and file operation of the agent, for
# good (nothing through serve can remove it: each runs as an ensured agent). A symlink
# there was already replaced, never followed.
for kind in fifo file symlink; do
	case $kind in
	fifo) plant='mkfifo ~/tmp' ;;
	file) plant='echo x >~/tmp' ;;
	symlink) plant='ln -s /etc ~/tmp' ;;
	esac
	P exec --agent "t-$kind" -- sh -c "rm -rf ~/tmp && $plant" >/dev/null 2>&1
	is "a $kind the agent put in its TMPDIR's place: its next command runs" \
		"$(P exec --agent "t-$kind" -- sh -c 'test -d "$TMPDIR" && test ! -L "$TMPDIR" && echo ran' 2>&1)" ran
done
is "... and the symlink's target is untouched" "$(stat -c '%U %a' "$R/etc")" "root 755"
done_testing
