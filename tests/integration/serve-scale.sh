#!/bin/bash
# pistisd serve under many commands of many agents: the per-agent bound (32 running) and
# the sandbox's (256) hold with an error that says which one was reached and whose
# commands hold it, and serve keeps answering (ping, sandbox.status) at the bound.
# server-min + pistisd serve + pistis as real processes, root, private mount namespace,
# throwaway Debian root, loopback only. Agents' uids 32100-32108: away from 10100 and up,
# where every other run's agents on this kernel start.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
need_python_root
# The clients start() detaches (no jobs of ours) go first, by SIGKILL: a TERM is forwarded
# to their command and waited for, and once the relay is gone they redial for 2 minutes.
# Their subshells end with them.
clients_down() {
	pkill -KILL -f "^$BIN/pistis exec --agent scale-"
	for _ in $(seq 100); do
		pgrep -f "^$BIN/pistis exec --agent scale-" >/dev/null || break
		sleep 0.05
	done
	serve_test_cleanup
}
trap clients_down EXIT
now_ms() { echo $(($(date +%s%N) / 1000000)); }
P() { "$BIN/pistis" "$@"; }
relay_up "$R" "$W"
like "pistisd serve is connected" "$(P ls 2>&1)" '^s1 +connected'
for i in $(seq 0 8); do
	in_root "$R" pistisd users ensure "scale-$i" --uid $((32100 + i)) >/dev/null ||
		echo "# ensure scale-$i failed"
done
running() { # how many commands run, from sandbox.status
	P --json status --sandbox s1 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for c in json.load(sys.stdin).get("commands", []) if c["running"]))'
}
wait_running() { # N
	for _ in $(seq 300); do
		[ "$(running)" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
start() { # AGENT N: N commands that run until killed (their timeout ends them otherwise)
	for _ in $(seq "$2"); do
		(P exec --agent "$1" --timeout 60 -- sleep 120 >/dev/null 2>&1 &)
	done
}

start scale-0 32
ok "agent 0 runs 32 commands" wait_running 32
out=$(P exec --agent scale-0 -- true 2>&1)
is "its 33rd is refused (exit 125)" "$?" 125
like "... saying the agent's own bound was reached" "$out" \
	'limit: too many commands: this agent runs 32, the most one agent may'
for i in $(seq 1 7); do start "scale-$i" 32; done
ok "eight agents run 256 commands" wait_running 256
out=$(P exec --agent scale-8 -- true 2>&1)
is "another agent's first is refused (exit 125)" "$?" 125
# It said "too many commands (0 for this agent)", which read as that agent's own doing.
like "... saying the sandbox's bound was reached, by whose commands" "$out" \
	'limit: too many commands: the sandbox holds 256, the most it may \(256 running, 0 ended .*\); this agent runs 0'
t=$(now_ms)
ok "ping answers at the bound" P call ping
ms=$(($(now_ms) - t))
echo "# ping at 256 commands: $ms ms"
ok "... within 3 s ($ms ms)" test "$ms" -lt 3000
ok "sandbox.status answers at the bound" P status --sandbox s1
done_testing
