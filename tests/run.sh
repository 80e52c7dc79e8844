#!/bin/sh
# Run TAP test programs and scripts; print each one's TAP and a summary: a line "N skipped",
# then as the last line the plain "N passed, N failed" the CI reads. Exit 1 when anything failed.
# A program that crashes, exits non-zero without a "not ok", prints no plan (or more than
# one), runs another number of tests than it planned, or plans none ("1..0 # SKIP": a
# missing prerequisite is a failure) counts as one more failure: a broken test must never
# look green.
set -u
logdir=${PISTIS_TEST_LOGS:-${PISTIS_BUILD:-build}/test-logs}
mkdir -p "$logdir"
passed=0 failed=0 skipped=0
# A test that hangs must fail, not hold the run until CI's own limit: each program or
# script gets PISTIS_TEST_TIMEOUT seconds (default 900; 0: none), then SIGTERM to its
# process group and SIGKILL 10 s later.
limit=${PISTIS_TEST_TIMEOUT:-900}
case "$limit" in
'' | *[!0-9]*) echo "run.sh: PISTIS_TEST_TIMEOUT must be a number of seconds" >&2; exit 2 ;;
esac
watchdog=""
if [ "$limit" != 0 ] && command -v timeout >/dev/null; then
	watchdog="timeout -k 10 $limit"
fi
failures=""
# Each file runs in a cgroup of its own, F = <our cgroup>/pistis-test-<pid>-<n> on the cgroup2
# mount (unified or pure v2), the file itself in F/test: what it makes beneath its own
# cgroup (pistisd's pistis/<agent>/cmd-s0..3, a test's own cgroups) is inside F, and when
# the file ends whatever it left running there is killed (a failure: a test must stop what
# it started), F emptied and removed depth first: `make check` leaves no cgroup behind.
# F holds no process, so it can pass to F/test's children what controllers it was given
# (v2's no-internal-processes rule); PISTIS_TEST_CGROUP names F for a test that makes
# cgroups with controllers (serve-limits.sh). Where no cgroup2 is mounted, or it is not
# ours to write (not root), files run in our cgroup, as before, and the run says so once.
cg_parent="" cg_n=0 cg=""
if [ "$(id -u)" = 0 ]; then
	cg_own=$(sed -n 's/^0::\(\/.*\)/\1/p' /proc/self/cgroup)
	for m in /sys/fs/cgroup /sys/fs/cgroup/unified; do
		if [ -n "$cg_own" ] && [ "$(stat -f -c %T "$m" 2>/dev/null)" = cgroup2fs ]; then
			cg_parent=$m${cg_own%/}
			break
		fi
	done
fi
# (not a directory: a cgroup2 mounted from another cgroup namespace than ours)
[ -n "$cg_parent" ] && [ -d "$cg_parent" ] ||
	echo "# run.sh: no cgroup2 here that holds our cgroup and that we may write (not root, or none mounted): each file runs in the run's own cgroup, and what it leaves there stays"
# cg_procs DIR: "pid command" of each process in the cgroup tree DIR, one a line.
cg_procs() {
	find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r pid; do
		printf '%s %s\n' "$pid" "$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | cut -c1-120)"
	done
}
# cg_kill DIR: SIGKILL every process of the cgroup tree DIR (cgroup.kill, Linux 5.14; else
# each pid listed, again until none is, as a fork can land one between the reads;
# PISTIS_TEST_NO_CGROUP_KILL=1 takes that way where cgroup.kill exists, to test it), then
# wait until it is empty (at most ~10 s). 1 when some process would not go.
cg_kill() {
	for _ in $(seq 100); do
		grep -qx 'populated 1' "$1/cgroup.events" 2>/dev/null || return 0
		if [ -e "$1/cgroup.kill" ] && [ "${PISTIS_TEST_NO_CGROUP_KILL:-0}" != 1 ]; then
			echo 1 >"$1/cgroup.kill" 2>/dev/null
		else
			find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null
		fi
		sleep 0.1
	done
	return 1
}
# cg_end: what the file left running in F is reported and killed; then F is removed depth
# first (a killed process's cgroup can stay busy a moment while its memory is torn down).
# Prints "not ok" lines for what it finds, as the summary's other checks do.
cg_end() {
	[ -n "$cg" ] || return 0
	if grep -qx 'populated 1' "$cg/cgroup.events" 2>/dev/null; then
		echo "not ok - $name left processes running in its cgroup (killed):"
		cg_procs "$cg" | sed 's/^/#   /'
		cg_kill "$cg" || echo "not ok - processes $name left in $cg would not die"
	fi
	for _ in $(seq 50); do
		find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
		[ -d "$cg" ] || break
		sleep 0.1
	done
	[ -d "$cg" ] && echo "not ok - $name's cgroup $cg could not be removed"
	return 0
}
# An interrupted run (^C) still removes the running file's cgroup.
trap 'cg_end >/dev/null; exit 129' HUP
trap 'cg_end >/dev/null; exit 130' INT
trap 'cg_end >/dev/null; exit 143' TERM
# in_cg CMD [ARG]...: CMD in F/test when there is an F (where it cannot join, in place, said
# in the file's log).
in_cg() {
	if [ -n "$cg" ]; then
		PISTIS_TEST_CGROUP=$cg sh -c '{ echo $$ >"$1/test/cgroup.procs"; } 2>/dev/null ||
			echo "# run.sh: cannot join $1/test: this file runs in the cgroup of run.sh"
			shift && exec "$@"' sh "$cg" "$@"
	else
		"$@"
	fi
}
for t in "$@"; do
	name=$(basename "$t")
	log="$logdir/$name.log"
	echo "# --- $name"
	start=$(date +%s)
	if [ -n "$cg_parent" ]; then
		cg_n=$((cg_n + 1))
		cg=$cg_parent/pistis-test-$$-$cg_n
		# F/test a domain: in a threaded subtree (run.sh's cgroup threaded) no process
		# can join a cgroup made there
		if mkdir "$cg" 2>/dev/null && mkdir "$cg/test" &&
			[ "$(cat "$cg/test/cgroup.type")" = domain ]; then
			# what F was given, for F/test's children (one by one: a refusal is not all)
			for c in $(cat "$cg/cgroup.controllers"); do
				echo "+$c" >"$cg/cgroup.subtree_control" 2>/dev/null
			done
		else
			echo "# run.sh: cannot make cgroups in $cg_parent: each file runs in the run's own cgroup, and what it leaves there stays"
			rmdir "$cg/test" "$cg" 2>/dev/null
			cg="" cg_parent=""
		fi
	fi
	case "$t" in
	*.sh)
		# As root, each script gets a private mount namespace: the roots and mounts it
		# makes vanish with it and never propagate to the host.
		if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
			in_cg $watchdog "$(dirname "$0")/../scripts/in-private-ns" bash "$t" >"$log" 2>&1
		else
			in_cg $watchdog bash "$t" >"$log" 2>&1
		fi
		;;
	*) in_cg $watchdog "$t" >"$log" 2>&1 ;;
	esac
	rc=$?
	if [ -n "$watchdog" ] && { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; }; then
		echo "not ok - $name did not finish in ${limit}s (PISTIS_TEST_TIMEOUT); stopped" >>"$log"
	fi
	cat "$log"
	# Numbered results only (lib.sh and tap.c number theirs): a tested command's own
	# line that starts with "ok " is not one. Any "not ok" line is a failure.
	p=$(grep -c '^ok [0-9]' "$log" | tr -d ' ')
	s=$(grep -c '^ok [0-9].*# SKIP' "$log" | tr -d ' ')
	f=$(grep -c '^not ok ' "$log" | tr -d ' ')
	plans=$(grep -c '^1\.\.[0-9]' "$log" | tr -d ' ')
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$log" | head -n 1)
	p=$((p - s))
	# The plan is what tells a finished file from one that stopped early (a plan printed
	# at the end, by done_testing, is never reached then): none, two, a count other than
	# the tests run, and "1..0" (the whole file skipped: a missing prerequisite is a
	# failure here, never a skip) are each one more failure.
	if [ "$plans" -ne 1 ]; then
		echo "not ok - $name printed $plans plans (1..N lines), not one (rc=$rc)"
		f=$((f + 1))
	elif [ "$plan" -eq 0 ]; then
		echo "not ok - $name ran no test: $(grep -m1 '^1\.\.0' "$log")"
		f=$((f + 1))
	elif [ $((p + s + f)) -ne "$plan" ]; then
		echo "not ok - $name ran $((p + s + f)) of $plan planned tests (rc=$rc)"
		f=$((f + 1))
	elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $name exited $rc without reporting a failure"
		f=$((f + 1))
	fi
	# after the plan checks: these failures are the run's, not numbered results of the file
	ends=$(cg_end)
	cg=""
	if [ -n "$ends" ]; then
		echo "$ends"
		f=$((f + $(echo "$ends" | grep -c '^not ok ')))
	fi
	[ "$f" -gt 0 ] && failures="$failures $name"
	echo "# $name: $p passed, $f failed, $s skipped ($(( $(date +%s) - start ))s)"
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
done
[ -n "$failures" ] && echo "# failed in:$failures"
echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
