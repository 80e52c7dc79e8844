#!/bin/bash
# One agent stalling its own spawn children must not stall `pistisd serve` for the others.
# From setresuid to execve a spawn child is a process of the agent's uid, so the agent can
# SIGSTOP it (redteam-probe stall). pistisd serve is one event loop for every agent: when it
# waited for the exec in place, each stalled start held that loop for the whole exec deadline
# (2 s), and an agent starting commands in a loop froze every other agent's commands, output,
# acks and pings. Now the exec is awaited by the loop (docs/spawn.md): agent B's commands run
# at their normal speed while agent A keeps starting stalled ones, A's fail with "timed out
# before exec", and serve is left with no extra fd or zombie.
# server-min + pistisd serve + pistis as real processes, root, private mount namespace,
# throwaway Debian root, loopback only.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
[ -x "$TESTBIN/redteam-probe" ] || missing "redteam-probe not built"
RT=/usr/local/lib/pistis-tests/redteam-probe
R=$(root_fresh debian) || missing "no debian test root"
W=$(mktemp -d "${TMPDIR:-/tmp}/pistis-stall.$$.XXXXXX")
cleanup() {
	local pid
	for pid in $(jobs -p); do kill "$pid" 2>/dev/null; done
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	# what the stall probe stopped must not outlive the test
	for pid in $(ours); do kill -CONT "$pid" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${PISTIS_KEEP_LOG:-}" ] && cp "$W/pd.log" "$PISTIS_KEEP_LOG"
	root_cleanup
	rm -rf "$W"
}
trap cleanup EXIT
# Processes of this test: those whose root is our throwaway root (never by name or uid).
ours() { root_pids "$R"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

relay_up "$R" "$W"
P() { "$BIN/pistis" "$@"; }
like "pistisd serve is connected" "$(P ls 2>&1)" '^s1 +connected'
SPID=$(for pid in $(ours); do
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q '^pistisd serve' && echo "$pid"
done | head -n 1)
ok "found pistisd serve's pid (${SPID:-?})" test -n "$SPID"

is "agent A runs a command" "$(P exec --agent stall-a -- echo a 2>&1)" a
is "agent B runs a command" "$(P exec --agent stall-b -- echo b 2>&1)" b
# as many commands at once as below, so that serve's pool of command cgroups (one fd each)
# is as large now as it will be after them
warm=""
for _ in $(seq 8); do P exec --agent stall-a -- sleep 0.5 & warm="$warm $!"; done
for _ in 1 2; do P exec --agent stall-b -- sleep 0.5 & warm="$warm $!"; done
wait $warm
fds0=$(fds_of "$SPID")

# A: a command that SIGSTOPs every spawn child of A's uid still running pistisd's code
# (between its uid change and its execve) for 9 s, and four loops starting A's commands
# all that time.
timeout -s KILL 30 "$BIN/pistis" exec --agent stall-a -- "$RT" stall 9 >"$W/stall.out" 2>&1 &
STALL=$!
sleep 0.5
end=$(($(now_ms) + 8000))
loops=""
for l in 1 2 3 4; do
	(
		i=0
		while [ "$(now_ms)" -lt "$end" ]; do
			i=$((i + 1))
			t=$(now_ms)
			timeout -s KILL 20 "$BIN/pistis" exec --agent stall-a -- /bin/true >"$W/a$l.$i.out" 2>&1
			echo "$? $(($(now_ms) - t))" >"$W/a$l.$i.rc"
		done
	) &
	loops="$loops $!"
done
sleep 1.5

# B: 10 short commands, one after the other, while A keeps stalling its starts. Each used to
# wait behind whichever stalled A start held the loop (up to 2 s).
max=0 total=0 bad=0 slow=0
for i in $(seq 10); do
	t=$(now_ms)
	out=$(timeout -s KILL 20 "$BIN/pistis" exec --agent stall-b -- echo "b$i" 2>&1)
	ms=$(($(now_ms) - t))
	total=$((total + ms))
	[ "$ms" -gt "$max" ] && max=$ms
	[ "$ms" -ge 1000 ] && slow=$((slow + 1))
	[ "$out" = "b$i" ] || { bad=$((bad + 1)); echo "# B command $i: $out"; }
done
wait_a=$(($(now_ms) < end))
# The children A stopped (agent uid, still pistisd's code, state T) hold only stdio, the
# error pipe and the cwd root: serve's pipes, sockets and pidfds were closed before the uid
# change (docs/spawn.md step 4b), so none of them waits on a stopped child.
auid=$(in_root "$R" pistisd users show stall-a | sed -n 's/^uid=//p')
nstopped=0 maxfds=0
for _ in $(seq 20); do
	for pid in $(ours); do
		state="" uid="" comm=""
		while read -r k v _; do
			case $k in State:) state=$v ;; Uid:) uid=$v ;; esac
		done <"/proc/$pid/status" 2>/dev/null
		[ "$state $uid" = "T $auid" ] || continue
		read -r comm <"/proc/$pid/comm" 2>/dev/null
		[ "$comm" = pistisd ] || continue # still pistisd's code: not exec'd yet
		fds=(/proc/"$pid"/fd/*)
		n=${#fds[@]}
		nstopped=$((nstopped + 1))
		[ "$n" -gt "$maxfds" ] && maxfds=$n
	done
	[ "$nstopped" -ge 3 ] && break
	sleep 0.1
done
is "B's 10 commands all ran and printed their output" "$bad" 0
is "no B command took 1 s or more while A stalled its starts (slowest ${max} ms)" "$slow" 0
ok "B's 10 commands took under 3 s together (${total} ms)" test "$total" -lt 3000
is "... and A was still starting stalled commands all that time" "$wait_a" 1
ok "found spawn children A stopped before their exec ($nstopped)" test "$nstopped" -gt 0
ok "each holds at most 6 fds: stdio, the error pipe, the cwd root and, in step 12, the cwd (most: $maxfds)" test "$maxfds" -le 6
# a ping answered promptly too (status goes through the same loop)
t=$(now_ms)
P status --sandbox s1 >/dev/null 2>&1
ms=$(($(now_ms) - t))
ok "sandbox.status answered under 1 s while A stalls (${ms} ms)" test "$ms" -lt 1000
# A's stalled starts are listed as starting (exec.attach cannot take them yet, and they may
# still vanish): status and exec.list say so, and only of starting commands of A
nst=0 nstb=0
for _ in $(seq 20); do
	st=$(P --json status --sandbox s1 2>/dev/null | python3 -c '
import json, sys
c = json.load(sys.stdin).get("commands", [])
print(sum(1 for x in c if x.get("starting") is True and x["agent"] == "stall-a" and x["running"]),
      sum(1 for x in c if "starting" in x and (x["agent"] != "stall-a" or x["starting"] is not True)))')
	read -r a b <<<"$st"
	[ "${a:-0}" -gt "$nst" ] && nst=$a
	nstb=$((nstb + ${b:-1}))
	[ "$nst" -gt 0 ] && break
	sleep 0.1
done
ok "sandbox.status marks A's stalled starts \"starting\" ($nst)" test "$nst" -gt 0
is "... and no other command" "$nstb" 0

wait "$STALL" $loops
caught=$(sed -n 's/^caught=//p' "$W/stall.out" | tr -d '\r')
ok "the stall probe caught A's spawn children before execve (${caught:-?})" test "${caught:-0}" -gt 0
timedout=$(grep -l "cannot start: timed out before exec" "$W"/a*.out 2>/dev/null | wc -l)
ok "A's stalled starts failed with \"timed out before exec\" ($timedout)" test "$timedout" -gt 0
fast=0 n=0 wrong=0
for f in "$W"/a*.rc; do
	[ -e "$f" ] || continue
	read -r rc ms <"$f"
	n=$((n + 1))
	o=${f%.rc}.out
	if grep -q "timed out before exec" "$o"; then
		# 2 s after the clone, not before, and not much later (the loop's timer)
		[ "$rc" -ne 0 ] && [ "$ms" -ge 1900 ] && [ "$ms" -lt 4000 ] || wrong=$((wrong + 1))
	elif [ "$rc" = 0 ]; then
		fast=$((fast + 1))
	else
		wrong=$((wrong + 1)) && echo "# unexpected A result (rc $rc, $ms ms): $(cat "$o")"
	fi
done
is "every A start either ran or timed out before exec after ~2 s ($n starts, $fast ran)" "$wrong" 0
like "serve logged nothing alarming" "$(grep -ciE 'assert|abort|sanitizer' "$W/pd.log")" '^0$'

# serve is left as it was: no fd of a stalled start, no zombie, no command still listed
sleep 0.5
running=$(P --json status --sandbox s1 2>/dev/null |
	python3 -c 'import json,sys; print(sum(1 for c in json.load(sys.stdin).get("commands", []) if c["running"]))')
is "no command of A or B is still running in serve" "$running" 0
fds1=$(fds_of "$SPID")
ok "serve holds no more fds than before A's stalls ($fds1, before $fds0)" test "$fds1" -le "$fds0"
zombies=$(zombies_of "$SPID")
is "serve has no zombie children" "$zombies" 0
is "B still runs commands afterwards" "$(P exec --agent stall-b -- echo after 2>&1)" after

done_testing
