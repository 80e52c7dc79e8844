#!/bin/bash
# pistisd serve --memory-max, --cpu-weight and --pids-max: each agent's limits, on its cgroup above its
# command cgroups. A limit asked for holds or serve refuses to start (exit 111, one line
# saying which controller and why); bad values are usage errors (100). Where this host's
# cgroup v2 can delegate memory and cpu to a cgroup of the test's own, a real serve runs
# in it: agent A (64 MiB) allocates beyond its limit and only its command is killed (the
# client sees SIGKILL, 137), while agent B's command, running at the same time, succeeds;
# the values are on the agents' cgroups, and serve moved itself into pistis-self to enable
# them: that part runs only with PISTIS_LIMITS_V2=1, on a host whose cgroup v2 has the
# memory, cpu and pids controllers (this project's CI machines keep them in v1: hybrid
# hosts; `make check` runs it in tests/integration/cgroup2-vm.sh's pure-v2 VM), and fails
# there, never skips, where they cannot be given. Real binaries as root, private mount namespace, throwaway Debian root, loopback
# only; serve always runs in a cgroup the test made (never one of the host's).
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
R=$(root_fresh debian) || { echo "Bail out! no debian test root"; exit 1; }
W=$(scratch)
CG=""
cleanup() {
	serve_test_cleanup
	# depth first: command cgroups, agents', pistis/, pistis-self, the test's two; a
	# killed command leaves its cgroup only once its memory is torn down
	[ -n "$CG" ] || return 0
	for _ in $(seq 50); do
		[ -d "$CG" ] || break
		find "$CG" -depth -type d -exec rmdir {} + 2>/dev/null
		sleep 0.1
	done
	[ -d "$CG" ] && echo "# left behind: $CG" >&2
	return 0
}
trap cleanup EXIT

# The cgroup2 mount and the test's own cgroup; P made beneath it, without memory and cpu
# for its children (removed where the host had them on), T = P/serve for pistisd serve.
MNT=""
for m in /sys/fs/cgroup /sys/fs/cgroup/unified; do
	[ "$(stat -f -c %T "$m" 2>/dev/null)" = cgroup2fs ] && MNT=$m && break
done
OWN=$(sed -n 's/^0:://p' /proc/self/cgroup)
ok "a cgroup2 mount ($MNT) and our cgroup (${OWN:-?})" test -n "$MNT" -a -n "$OWN"
# Under tests/run.sh, in the cgroup it made for this file (PISTIS_TEST_CGROUP): that one
# holds no process, so it can give controllers to P, which ours (holding this script) cannot.
CG=${PISTIS_TEST_CGROUP:-$MNT${OWN%/}}/pistis-limits.$$
mkdir "$CG" && mkdir "$CG/serve"
ok "the test's cgroups made ($CG)" test -d "$CG/serve"
for c in memory cpu; do echo "-$c" >"$CG/cgroup.subtree_control" 2>/dev/null; done
unlike "the test's serve cgroup has no memory or cpu controller" \
	"$(cat "$CG/serve/cgroup.controllers")" '(^| )(memory|cpu)( |$)'

serve_setup "$R"
mkdir -p "$R/cg"
# serve_in ARGS...: pistisd serve ARGS... in the test's serve cgroup, in the foreground
# (exits before it dials when refused), at most 20 s; its exit code.
serve_in() {
	timeout -s KILL 20 sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG/serve" \
		env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd serve --relay ws://127.0.0.1:1 \
		--token-file /etc/pistis/token --name s1 ${ALLOW:+--allow $ALLOW} "$@" 2>&1
}

# --- usage: bad values never reach the kernel -------------------------------------------
for bad in 0 512 1023K 1025T 64MB 1.5G -1 ""; do
	out=$(serve_in --memory-max "$bad")
	is "--memory-max '$bad' is a usage error (100)" "$?" 100
	like "... saying the range" "$out" "--memory-max must be from 1M to 1024T"
done
for bad in 0 10001 50k -5; do
	out=$(serve_in --cpu-weight "$bad")
	is "--cpu-weight '$bad' is a usage error (100)" "$?" 100
	like "... saying the range" "$out" "--cpu-weight must be 1..10000"
done

# --- refused where the controller is not delegated ----------------------------------------
out=$(serve_in --memory-max 64M)
is "--memory-max without the memory controller: serve refuses to start (111)" "$?" 111
like "... in one line naming the option, the controller and why" "$out" \
	"Refusing to start: --memory-max needs the memory controller, which pistisd's cgroup was not given"
out=$(serve_in --cpu-weight 50)
is "--cpu-weight without the cpu controller: refused (111)" "$?" 111
like "... naming it" "$out" "Refusing to start: --cpu-weight needs the cpu controller"
out=$(serve_in --cpu-weight 50 --memory-max 1G)
is "both: refused (111)" "$?" 111
like "... naming both" "$out" \
	"Refusing to start: --memory-max and --cpu-weight need the memory and cpu controllers"
unlike "... and nothing was dialled" "$out" "pistisd serve .*: sandbox 's1'"
is "... and no process was moved for nothing" "$(ls "$CG/serve" | grep -c pistis-self)" 0

# --- per agent, where the host can delegate memory and cpu to the test's cgroup -----------
# Only with PISTIS_LIMITS_V2=1, on a host whose cgroup v2 has memory, cpu and pids: this
# project's machines are hybrid hosts that keep them in v1, so this part runs in
# tests/integration/cgroup2-vm.sh's VM.
[ "${PISTIS_LIMITS_V2:-0}" = 1 ] || { done_testing; exit 0; }
if ! echo "+memory +cpu +pids" >"$CG/cgroup.subtree_control" 2>/dev/null; then
	echo "Bail out! the cgroup2 here cannot give memory, cpu and pids to a cgroup of the test's (available: $(cat "${CG%/*}/cgroup.controllers"); a hybrid host keeps them in v1)"
	exit 1
fi
relay_config "$R" "$W"
"$BIN/server-min" --config "$W/pistis.json" >>"$W/smin.log" 2>&1 &
SM=$!
(exec sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG/serve" \
	env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd serve --relay "ws://127.0.0.1:$SP" \
	--token-file /etc/pistis/token --name s1 ${ALLOW:+--allow $ALLOW} \
	--memory-max 64M --cpu-weight 50 --pids-max 200) >"$W/pd.log" 2>&1 &
PD=$!
for _ in $(seq 100); do "$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
like "pistisd serve with --memory-max 64M --cpu-weight 50 --pids-max 200 is connected" "$("$BIN/pistis" ls 2>&1)" \
	'^s1 +connected'
like "... having moved itself beside pistis/ to enable the controllers" "$(cat "$W/pd.log")" \
	"Moved 1 process\\(es\\) of pistisd's cgroup into its 'pistis-self'"
is "... where it runs now" "$(cat "$CG/serve/pistis-self/cgroup.procs")" "$PD"

# B: a command that runs while A's is killed, and ends well after it.
"$BIN/pistis" exec --agent lim/b -- /bin/sh -c 'sleep 3; echo b-done' >"$W/b.out" 2>&1 &
BEXEC=$!
sleep 0.5
"$BIN/pistis" exec --agent lim/a -- /usr/bin/perl -e '$x = "a" x (256 << 20); print "a-survived\n"' \
	>"$W/a.out" 2>&1
is "A's command that allocates 256 MiB under 64 MiB ends by SIGKILL (137)" "$?" 137
unlike "... and never got past the allocation" "$(cat "$W/a.out")" a-survived
wait "$BEXEC"
is "B's command, running meanwhile, succeeds" "$?" 0
like "... and printed its line" "$(cat "$W/b.out")" '^b-done$'
out=$("$BIN/pistis" exec --agent lim/a -- /bin/echo a-again 2>&1)
is "A's next command runs" "$?" 0
like "... and prints" "$out" '^a-again$'

AG=$CG/serve/pistis/pi-agent-$(printf %s lim/a | sha256sum | cut -c1-8)
is "A's cgroup memory.max: 64 MiB, all its commands together" "$(cat "$AG/memory.max")" 67108864
is "... cpu.weight 50" "$(cat "$AG/cpu.weight")" 50
is "... pids.max 200" "$(cat "$AG/pids.max")" 200
is "... its command cgroup's memory.oom.group: 1 (the whole command goes)" \
	"$(cat "$AG/cmd-s0/memory.oom.group")" 1
[ -e "$AG/memory.swap.max" ] && is "... no swap" "$(cat "$AG/memory.swap.max")" 0
like "... its memory.events counts the OOM kill" "$(cat "$AG/memory.events")" '^oom_kill [1-9]'
is "... owned by root, not writable by the agent" "$(stat -c '%u %a' "$AG/memory.max")" "0 644"
done_testing
