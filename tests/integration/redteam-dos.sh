#!/bin/bash
# Red team: one agent exhausting what `pistisd serve` shares between agents, while another
# agent's commands must still start and finish within a bound (docs/protocol.md, "Limits";
# docs/spawn.md, "What one agent can take from the others").
# 1. Output nobody acknowledges: agent A's commands, each read by a client of its own that
#    never reads, must not take the bound on all commands' unacknowledged output. Before,
#    ten of them filled the 64 MiB (each reader may hold a quarter, each command 8 MiB) and
#    agent B's `echo` waited until A's commands ended: ~29 s here, for ever without a timeout.
#    Three of them (24 MiB) must not hold back A's own next command either.
# 2. A with hundreds of processes, most of them zombies it never reaps.
# 3. A command that ignores SIGTERM ends by SIGKILL at its timeout plus the 2 s grace.
# server-min + pistisd serve + pistis as real processes, root, private mount namespace,
# throwaway Debian root, loopback only.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
need_python_root
cleanup() {
	serve_test_cleanup
	[ -z "${PISTIS_KEEP_LOG:-}" ] || cp "$W/pd.log" "$PISTIS_KEEP_LOG"
}
trap cleanup EXIT
now_ms() { echo $(($(date +%s%N) / 1000000)); }
P() { "$BIN/pistis" "$@"; }
relay_up "$R" "$W"
like "pistisd serve is connected" "$(P ls 2>&1)" '^s1 +connected'
is "agent A runs a command" "$(P exec --agent dos-a -- echo a 2>&1)" a
is "agent B runs a command" "$(P exec --agent dos-b -- echo b 2>&1)" b
auid=$(in_root "$R" pistisd users show dos-a | sed -n 's/^uid=//p')
echo "# A's uid: $auid"

# B's command: its output, and how long it took (ms), as "OUT MS"
b_echo() {
	local t out
	t=$(now_ms)
	out=$(timeout -s KILL 30 "$BIN/pistis" exec --agent dos-b -- echo "$1" 2>&1)
	echo "$out $(($(now_ms) - t))"
}
# from sandbox.status: A's commands, how many paused, A's unacknowledged bytes, the total
a_output() {
	P --json status --sandbox s1 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
a = [c for c in d.get("commands", []) if c["agent"] == "dos-a" and c["running"]]
print(len(a), sum(1 for c in a if c.get("paused")), sum(c["buffered"] for c in a), d.get("buffered", 0))'
}

# --- 1. output nobody acknowledges ------------------------------------------------------
pids=""
stalled() { # N: N more commands of A's whose clients never read
	for _ in $(seq "$1"); do
		(timeout -s KILL 40 "$BIN/pistis" exec --agent dos-a --timeout 25 -- cat /dev/zero |
			sleep 30) >/dev/null 2>&1 &
		pids="$pids $!"
	done
}
paused_a() { # N: wait until N commands of A's are paused
	for _ in $(seq 100); do
		read -r n paused abuf total <<<"$(a_output)"
		[ "${paused:-0}" -ge "$1" ] && break
		sleep 0.1
	done
}
# three of them hold 24 MiB (8 MiB each), under half the bound: A's next command, read by a
# client that reads, is not held back by them
stalled 3
paused_a 3
echo "# A: $n commands, $paused paused, $abuf bytes unacknowledged; all commands: $total"
t=$(now_ms)
out=$(timeout -s KILL 30 "$BIN/pistis" exec --agent dos-a -- head -c 1000000 /dev/zero | wc -c)
ms=$(($(now_ms) - t))
is "A's next command prints its 1 MB while three of A's readers stall" "$out" 1000000
ok "... within 3 s (${ms} ms)" test "$ms" -lt 3000
# ten of them: A stops at half the bound, and the other half is B's
stalled 7
paused_a 10
echo "# A: $n commands, $paused paused, $abuf bytes unacknowledged; all commands: $total"
is "A's ten commands are all paused" "${paused:-0}" 10
ok "A holds at most half the bound on all output (32 MiB + a frame each: $abuf)" \
	test "${abuf:-0}" -le $((32 * 1048576 + 10 * 262144))
ok "... so the bound on all output is not reached ($total < 64 MiB)" \
	test "${total:-0}" -lt $((64 * 1048576))
read -r out ms <<<"$(b_echo flood)"
is "B's command prints while A's output is unread" "$out" flood
ok "... within 3 s (${ms} ms; before, until A's commands ended)" test "${ms:-99999}" -lt 3000
ok "sandbox.status answers" P status --sandbox s1
kill $pids 2>/dev/null
for pid in $pids; do wait "$pid" 2>/dev/null; done
# A's commands end at their timeout; wait for them so the sections below start clean
for _ in $(seq 300); do
	read -r n _ <<<"$(a_output)"
	[ "${n:-1}" = 0 ] && break
	sleep 0.1
done
is "A's paused commands ended at their timeout" "${n:-?}" 0

# --- 2. A with hundreds of processes, most of them zombies it never reaps -------------
# Counted in our root only: the test machine's other roots may have agents of the same uid,
# whose processes count against the same NPROC (docs/security.md, "Agent uids are the
# host's"). What is left is counted without zombies: an orphan of A's that dies is
# reparented to the test machine's PID 1, which may not reap; in a sandbox pistisd-entry does.
tasks() { root_pids "$R" "$auid" | wc -l; }
alive() {
	local pid n=0 st
	for pid in $(root_pids "$R" "$auid"); do
		read -r _ _ st _ <"/proc/$pid/stat" 2>/dev/null && [ "$st" != Z ] && n=$((n + 1))
	done
	echo "$n"
}
timeout -s KILL 40 "$BIN/pistis" exec --agent dos-a --timeout 12 -- perl -e \
	'for (1..300) { fork or exit } for (1..150) { fork or do { sleep 60; exit } } sleep 60' \
	>/dev/null 2>&1 &
bomb=$!
n=0
sleep 1.5
for _ in $(seq 10); do # each look walks /proc in bash: ~0.2 s
	n=$(tasks)
	[ "$n" -ge 150 ] && break
	sleep 0.3
done
zomb=0 # zombies have no root to find them by: the children of A's processes
for pid in $(root_pids "$R" "$auid"); do
	zomb=$((zomb + $(ps --ppid "$pid" -o stat= | grep -c '^Z')))
done
ok "A holds a hundred processes and more ($n)" test "$n" -ge 140
ok "... most of them zombies it does not reap ($zomb)" test "$zomb" -ge 200
slow=0 bad=0 max=0
for i in 1 2 3 4 5; do
	read -r out ms <<<"$(b_echo "many$i")"
	[ "$out" = "many$i" ] || bad=$((bad + 1))
	[ "$ms" -gt "$max" ] && max=$ms
	[ "$ms" -ge 2000 ] && slow=$((slow + 1))
done
is "B's five commands ran meanwhile" "$bad" 0
is "... none took 2 s or more (slowest ${max} ms)" "$slow" 0
wait "$bomb"
left=0
for _ in $(seq 50); do
	left=$(alive)
	[ "$left" = 0 ] && break
	sleep 0.1
done
is "A's processes are gone with its command" "$left" 0

# --- 3. SIGTERM ignored at the timeout ----------------------------------------------------
t=$(now_ms)
timeout -s KILL 20 "$BIN/pistis" exec --agent dos-a --timeout 1 -- sh -c \
	'trap "" TERM; (trap "" TERM; exec sleep 60) & while :; do sleep 1; done' >/dev/null 2>&1
rc=$?
ms=$(($(now_ms) - t))
is "a command ignoring SIGTERM is killed at its timeout (exit 137)" "$rc" 137
ok "... 1 s + the 2 s grace (${ms} ms)" test "$ms" -ge 2900 -a "$ms" -lt 5000
left=$(alive)
is "... with what it started" "$left" 0

like "serve logged nothing alarming" "$(grep -ciE 'assert|abort|sanitizer' "$W/pd.log")" '^0$'
ok "pistisd serve is still running" kill -0 "$PD"
done_testing
