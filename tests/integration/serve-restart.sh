#!/bin/bash
# A real `pistisd serve` SIGKILLed with a command running, then started again: the command's
# tree (its leader and a setsid'd grandchild, which PR_SET_PDEATHSIG does not reach) is
# killed by the new serve at start-up (cgroup mode: cgroup_reap_orphans; a second round
# without cgroups, PISTIS_NO_CGROUP=1, by audit session; the test says
# which mode ran), the client reading the lost command gets a clear answer (exec.detached,
# pistis exits 125 naming the reason), and the new serve runs commands.
# server-min + pistisd serve + pistis as real processes, root, private mount namespace,
# throwaway Debian root, loopback only.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
R=$(root_fresh debian) || missing "no debian test root"
W=$(mktemp -d "${TMPDIR:-/tmp}/pistis-restart.$$.XXXXXX")
cleanup() {
	local pid
	for pid in $(jobs -p); do kill "$pid" 2>/dev/null; done
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	wait 2>/dev/null
	[ -n "${PISTIS_KEEP_LOG:-}" ] && cat "$W/pd1.log" "$W/pd2.log" >"$PISTIS_KEEP_LOG"
	root_cleanup
	rm -rf "$W"
}
trap cleanup EXIT
# Processes of this test: those whose root is our throwaway root (never by name or uid).
ours() { root_pids "$R"; }
# Pids of ours whose command line matches the extended regex $1.
ours_cmd() {
	local pid
	for pid in $(ours); do
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -Eq -- "$1" && echo "$pid"
	done
}
start_serve() { # log [NAME=VALUE]: the environment of serve (PISTIS_NO_CGROUP=1: no cgroups)
	in_root "$R" env ${2:-} pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1 \
		${ALLOW:+--allow $ALLOW} >"$1" 2>&1 &
	for _ in $(seq 100); do P ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
}

relay_config "$R" "$W"
P() { "$BIN/pistis" "$@"; }
"$BIN/server-min" --config "$W/pistis.json" >>"$W/smin.log" 2>&1 &
SM=$!
# One round: serve (in the environment $1) runs a command for agent $2 whose tree outlives
# its leader, is SIGKILLed, and is started again the same way.
round() {
	local env=$1 agent=$2 SPID EXEC GRAND LEADER MODE rc RUNP KEPT KEPTL said auid HOSTP
	start_serve "$W/pd1.log" "$env"
	like "pistisd serve is connected ($env)" "$(P ls 2>&1)" '^s1 +connected'
	SPID=$(ours_cmd '^pistisd serve' | head -n 1)
	ok "found pistisd serve's pid (${SPID:-?})" test -n "$SPID"

	# A long command whose tree outlives its leader: a setsid'd grandchild in a session of
	# its own (sleep 3171) and the leader (sleep 3172).
	timeout -s KILL 60 "$BIN/pistis" exec --agent "$agent" -- \
		/bin/sh -c '/usr/bin/setsid /bin/sleep 3171 & exec /bin/sleep 3172' >"$W/exec.out" 2>&1 &
	EXEC=$!
	for _ in $(seq 100); do [ -n "$(ours_cmd '^/bin/sleep 3171')" ] && [ -n "$(ours_cmd '^/bin/sleep 3172')" ] && break; sleep 0.1; done
	GRAND=$(ours_cmd '^/bin/sleep 3171'); LEADER=$(ours_cmd '^/bin/sleep 3172')
	ok "the command and its setsid'd grandchild run (${LEADER:-?}, ${GRAND:-?})" test -n "$GRAND" -a -n "$LEADER"
	if grep -Eq '/pistis/pi-agent-[0-9a-f]+/cmd-' "/proc/$GRAND/cgroup" 2>/dev/null; then
		MODE=cgroup
	elif [ "$(cat "/proc/$GRAND/sessionid" 2>/dev/null)" != "$(cat "/proc/$SPID/sessionid")" ] &&
		[ "$(cat "/proc/$GRAND/loginuid" 2>/dev/null)" = "$(stat -c %u "/proc/$GRAND")" ]; then
		MODE=session
	else
		MODE=pgid
	fi
	echo "# tree control ($env): $MODE ($(grep -Eo 'pistis/pi-agent-[0-9a-f]+/cmd-[^/]*$' "/proc/$GRAND/cgroup" 2>/dev/null || echo 'no command cgroup'))"
	case "$env" in PISTIS_NO_CGROUP=1) ok "without cgroups, the tree is an audit session here" \
		test "$MODE" = session ;; esac

	kill -KILL "$SPID"
	for _ in $(seq 50); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
	fails "pistisd serve is gone (SIGKILL)" kill -0 "$SPID"
	sleep 0.3
	ok "the setsid'd grandchild outlived the dead serve (what the restart must clean up)" kill -0 "$GRAND"
	ok "the client still waits for the sandbox to come back" kill -0 "$EXEC"

	# A command of a `pistisd run` that is still running is not the dead serve's: it stays
	# (session mode tells it by its session; a cgroup by the run's lock).
	in_root "$R" env ${env} pistisd run --agent "$agent-run" -- \
		/bin/sh -c '/usr/bin/setsid /bin/sleep 3173 & exec /bin/sleep 3174' >/dev/null 2>&1 &
	RUNP=$!
	for _ in $(seq 100); do [ -n "$(ours_cmd '^/bin/sleep 3173')" ] && [ -n "$(ours_cmd '^/bin/sleep 3174')" ] && break; sleep 0.1; done
	KEPT=$(ours_cmd '^/bin/sleep 3173'); KEPTL=$(ours_cmd '^/bin/sleep 3174')
	# Outside the sandbox's root, a session of the machine's own with the agent's uid as
	# its loginuid (a host user who has that uid and logged in, beside a chroot's sandbox):
	# not the sandbox's to kill.
	HOSTP=
	USERP=
	if [ "$MODE" = session ]; then
		auid=$(stat -c %u "/proc/$GRAND")
		setsid sh -c 'echo "$1" >/proc/self/loginuid && exec sleep 3175' sh "$auid" \
			</dev/null >/dev/null 2>&1 &
		HOSTP=$!
		# And in the sandbox's own root, as that uid, a login session of a user the
		# machine's directory service (sss, ldap) gives the agent's uid: on a plain machine
		# serve's root is the machine's "/", and /etc/passwd does not show that user. It
		# has no seccomp filter, which every command's process has: not the sandbox's.
		setsid chroot "$R" /bin/sh -c 'echo "$1" >/proc/self/loginuid &&
			exec setpriv --reuid="$1" --regid="$1" --clear-groups /bin/sleep 3176' sh "$auid" \
			</dev/null >/dev/null 2>&1 &
		USERP=$!
		sleep 0.3
		[ "$(cat "/proc/$HOSTP/loginuid" 2>/dev/null)" = "$auid" ] || HOSTP=
		[ "$(cat "/proc/$USERP/loginuid" 2>/dev/null)" = "$auid" ] || USERP=
	fi

	start_serve "$W/pd2.log" "$env"
	like "a new pistisd serve connects" "$(P ls 2>&1)" '^s1 +connected'
	case "$MODE" in
	cgroup) said="Killed 1 command tree\(s\) of agent 'pi-agent-[0-9a-f]+' that no pistisd owned" ;;
	session) said="Killed 1 process\(es\) of agents' command sessions that no pistisd owned" ;;
	esac
	if [ "$MODE" != pgid ]; then
		for _ in $(seq 50); do kill -0 "$GRAND" 2>/dev/null || break; sleep 0.1; done
		fails "$MODE mode: the orphaned grandchild is killed by the new serve" kill -0 "$GRAND"
		fails "$MODE mode: the orphaned leader is gone too" kill -0 "$LEADER"
		like "$MODE mode: the new serve says what it killed" "$(cat "$W/pd2.log")" "$said"
	else
		skip "the orphaned grandchild is killed by the new serve" \
			"process-group mode: a dead serve's setsid'd leftovers cannot be found (docs/spawn.md)"
		skip "the orphaned leader is gone too" "process-group mode"
		skip "the new serve says what it killed" "process-group mode"
		kill -KILL "$GRAND" "$LEADER" 2>/dev/null
	fi
	if [ -n "$HOSTP" ]; then
		ok "session mode: a session outside the sandbox's root with the agent's loginuid stays" \
			kill -0 "$HOSTP"
		kill -KILL "$HOSTP" 2>/dev/null
	elif [ "$MODE" = session ]; then
		skip "session mode: a session outside the sandbox's root with the agent's loginuid stays" \
			"cannot set a loginuid here"
	fi
	if [ -n "$USERP" ]; then
		ok "session mode: a login of the agent's uid in the sandbox's root, no filter, stays" \
			kill -0 "$USERP"
		kill -KILL "$USERP" 2>/dev/null
	elif [ "$MODE" = session ]; then
		skip "session mode: a login of the agent's uid in the sandbox's root stays" \
			"cannot set a loginuid here"
	fi
	ok "a running \`pistisd run\`'s command and its setsid'd grandchild stay (${KEPTL:-?}, ${KEPT:-?})" \
		kill -0 "${KEPTL:-0}" "${KEPT:-0}"
	kill -KILL "${KEPTL:-0}" "${KEPT:-0}" 2>/dev/null
	wait "$RUNP" 2>/dev/null
	# The reader of the lost command: exec.detached from server-min (the new serve's hello
	# does not list it), and pistis ends with 125 and the reason.
	for _ in $(seq 100); do kill -0 "$EXEC" 2>/dev/null || break; sleep 0.1; done
	wait "$EXEC"; rc=$?
	is "the client of the lost command exits 125" "$rc" 125
	like "... saying the sandbox no longer has it" "$(cat "$W/exec.out")" 'no longer has'
	is "the new serve runs commands" "$(P exec --agent "$agent" -- echo after 2>&1)" after
	is "... for another agent too" "$(P exec --agent "$agent-b" -- echo b 2>&1)" b
	is "no sleeper of the old command is left" "$(ours_cmd '^/bin/sleep 317[0-5]' | wc -l)" 0
	SPID=$(ours_cmd '^pistisd serve' | head -n 1)
	kill -KILL "$SPID" 2>/dev/null
	for _ in $(seq 50); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
}

round "" restart-a
round PISTIS_NO_CGROUP=1 restart-c
done_testing
