#!/bin/bash
# The guest half of tests/integration/cgroup2-vm.sh, run by the VM's init on a host whose
# only cgroup hierarchy is v2, with memory, cpu and pids enabled at its root; not a test of
# its own (outside tests/integration/), and it refuses to run anywhere else. pistisd run in
# the root cgroup: --memory-max kills a command that allocates past it (137, the OOM kill
# counted in its cgroup) and the same command runs without it; --pids-max stops a fork bomb
# at the limit and nothing of it is left; a setsid'd grandchild that outlives its command is
# killed with its cgroup, and so is one that ignores SIGTERM when its command times out.
# Then serve-limits.sh with PISTIS_LIMITS_V2=1 through tests/run.sh: pistisd serve's
# per-agent limits through server-min. Agents' uids from 30000 (the test's range).
. "$(dirname "$0")/../lib.sh"
[ "${PISTIS_IN_VM:-}" = 1 ] || {
	echo "Bail out! runs only in tests/integration/cgroup2-vm.sh's VM (PISTIS_IN_VM=1)"
	exit 1
}
need_root
need_mount_ns "$@"
need_bins pistisd
[ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] && ! grep -q ' cgroup ' /proc/mounts || {
	echo "Bail out! /sys/fs/cgroup is not a pure cgroup v2 hierarchy"
	exit 1
}
R=$(root_fresh debian) || { echo "Bail out! no debian test root"; exit 1; }
P=/usr/local/lib/pistis-tests/probe
CGP=/sys/fs/cgroup/pistis
agent_cg() { echo "$CGP/pi-agent-$(printf %s "$1" | sha256sum | cut -c1-8)"; }
# run AGENT UID ARGS...: pistisd run in the test root, stdout+stderr (the --json line last)
run() {
	local a=$1 u=$2
	shift 2
	in_root "$R" pistisd run --agent "$a" --uid "$u" --json "$@" 2>&1
}
# gone_by_uid UID: no live process has that real uid (zombies aside), within 5 s of the
# clock: 50 looks, each an awk per thread (slow under TCG), outlasted the 60 s sleep of the
# grandchild a no-op cgroup_kill leaves, which then passed as killed.
gone_by_uid() {
	local end=$((SECONDS + 5))
	for (( ; ; )); do
		[ "$(threads_of "$1")" = 0 ] && return 0
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
}
# threads_of UID: how many live threads have that real uid; every status file in one awk
# (each begins with its Name: line), through cat, which reads on past one that is gone
threads_of() {
	cat /proc/[0-9]*/task/[0-9]*/status 2>/dev/null | awk -v u="$1" '
		/^Name:/ {z = 0} /^State:/ && $2 == "Z" {z = 1} /^Uid:/ && !z && $2 == u {n++}
		END {print n + 0}'
}

# --- (1) --memory-max ---------------------------------------------------------------------
ALLOC='$x = "a" x (256 << 20); print "allocated\n"'
out=$(run vm/mem 30001 -- /usr/bin/perl -e "$ALLOC")
is "without --memory-max, a command allocates 256 MiB (exit 0)" "$?" 0
like "... and says so" "$out" '^allocated$'
out=$(run vm/mem 30001 --memory-max 64M -- /usr/bin/perl -e "$ALLOC")
is "--memory-max 64M: the same command is killed by SIGKILL (137)" "$?" 137
unlike "... before its allocation returned" "$out" '^allocated$'
like "... --json: ended by signal 9" "$out" '"end":"signaled".*"signal":9'
like "... --json: the memory limit applied" "$out" '"limits":\{"memory":true,'
C=$(agent_cg vm/mem)/cmd-s0
is "... its cgroup's memory.max: 64 MiB" "$(cat "$C/memory.max")" 67108864
is "... memory.swap.max 0" "$(cat "$C/memory.swap.max")" 0
like "... memory.events counts the OOM kill" "$(cat "$C/memory.events")" '^oom_kill [1-9]'
out=$(run vm/mem 30001 --memory-max 64M -- /usr/bin/perl -e '$x = "a" x (16 << 20); print "small\n"')
is "--memory-max 64M: a command within it succeeds" "$?" 0
like "... and prints" "$out" '^small$'
ok "... nothing of vm/mem is left" gone_by_uid 30001

# --- (2) --pids-max -------------------------------------------------------------------------
out=$(run vm/pids 30002 --pids-max 16 -- $P forkbomb 500)
is "--pids-max 16: a fork bomb ends (exit 0)" "$?" 0
is "... stopped at the limit: 15 children beside itself" "$(probe_field forked <<<"$out")" 15
is "... fork failed with EAGAIN" "$(probe_field fork_error <<<"$out")" EAGAIN
like "... --json: the pids limit applied" "$out" '"pids":true'
C=$(agent_cg vm/pids)/cmd-s0
is "... its cgroup's pids.max: 16" "$(cat "$C/pids.max")" 16
# The fork is refused by NPROC, the same 16 for the agent's uid, which fork checks before
# the cgroup's charge (the cgroup's pids.events says "max 0"): pids.max is set beside it.
ok "... nothing of the bomb is left" gone_by_uid 30002
is "... its cgroup is empty" "$(cat "$C/cgroup.procs")" ""

# --- (4) cgroup.kill of what outlives its command -------------------------------------------
# It sleeps an hour: nothing here waits that long, so gone means killed.
out=$(run vm/kill 30003 -- $P bg-sleep 3600)
is "a command that leaves a setsid'd grandchild behind ends (exit 0)" "$?" 0
BG=$(probe_field bgpid <<<"$out")
like "... having started it" "$BG" '^[0-9]+$'
like "... --json: the tree was its cgroup, the grandchild killed" "$out" \
	'"left_children_killed":true,"tree":"cgroup"'
ok "... which is gone" gone_by_uid 30003
C=$(agent_cg vm/kill)/cmd-s0
is "... its cgroup is empty" "$(cat "$C/cgroup.procs")" ""
like "... and is no longer populated (cgroup.events)" "$(cat "$C/cgroup.events")" \
	'^populated 0$'
# A timeout whose tree ignores SIGTERM (leader and setsid'd grandchild): after the grace
# (2 s) only the SIGKILL of cgroup_kill reaches the grandchild, which left the process group.
out=$(run vm/kill 30003 --timeout 0.5 -- $P bg-sleep 3600 stay noterm)
is "a command that ignores SIGTERM, past its --timeout: killed (137)" "$?" 137
like "... --json: ended by its timeout" "$out" '"end":"timeout"'
like "... having started a setsid'd grandchild that ignores it too" \
	"$(probe_field bgpid <<<"$out")" '^[0-9]+$'
ok "... which is gone" gone_by_uid 30003
is "... its cgroup is empty" "$(cat "$C/cgroup.procs")" ""

# --- a cgroup that holds processes: no controller enabled there ------------------------------
# cpu and pids are threaded controllers, which v2 lets a cgroup with processes enable: it
# turns "domain threaded", and no process may join a cgroup made beneath. pistisd run from
# such a cgroup (a shell's, a service's) runs its command with cgroup.kill, without limits.
SH=/sys/fs/cgroup/vm-shell.$$
mkdir "$SH" && echo "+cpu +pids +memory" >"$SH/cgroup.subtree_control" && mkdir "$SH/sh"
out=$(sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$SH/sh" \
	env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd run --agent vm/shell --uid 30004 --json \
	-- /bin/echo from-a-shell 2>&1)
is "pistisd run from a cgroup with processes (cpu, pids, memory there): exit 0" "$?" 0
like "... the command ran" "$out" '^from-a-shell$'
like "... in a cgroup of its own" "$out" '"tree":"cgroup"'
is "... that cgroup is still a domain" "$(cat "$SH/sh/cgroup.type")" domain
is "... with no controller enabled for its children" "$(cat "$SH/sh/cgroup.subtree_control")" ""
is "... pistis/ beneath it a domain" "$(cat "$SH/sh/pistis/cgroup.type")" domain
out=$(sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$SH/sh" \
	env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd run --agent vm/shell --uid 30004 \
	--memory-max 64M -- /bin/echo from-a-shell 2>&1)
is "... --memory-max there: refused (111)" "$?" 111
like "... saying why" "$out" 'Refusing to run: --memory-max needs the memory controller'
find "$SH" -depth -type d -exec rmdir {} + 2>/dev/null

# --- (3) pistisd serve's per-agent limits: serve-limits.sh's second half ---------------------
# Through tests/run.sh, as `make check` runs it on a pure v2 host: in the cgroup run.sh makes
# for the file, which must pass on the root's controllers (PISTIS_TEST_CGROUP), and is gone
# after it.
PISTIS_LIMITS_V2=1 sh "$(dirname "$0")/../run.sh" "$(dirname "$0")/../integration/serve-limits.sh"
is "serve-limits.sh with PISTIS_LIMITS_V2=1 passes (tests/run.sh)" "$?" 0
is "... and leaves no cgroup of run.sh's" \
	"$(find /sys/fs/cgroup -mindepth 1 -maxdepth 1 -type d -name 'pistis-test-*')" ""
done_testing
