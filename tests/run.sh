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
for t in "$@"; do
	name=$(basename "$t")
	log="$logdir/$name.log"
	echo "# --- $name"
	start=$(date +%s)
	case "$t" in
	*.sh)
		# As root, each script gets a private mount namespace: the roots and mounts it
		# makes vanish with it and never propagate to the host.
		if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
			$watchdog "$(dirname "$0")/../scripts/in-private-ns" bash "$t" >"$log" 2>&1
		else
			$watchdog bash "$t" >"$log" 2>&1
		fi
		;;
	*) $watchdog "$t" >"$log" 2>&1 ;;
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
	[ "$f" -gt 0 ] && failures="$failures $name"
	echo "# $name: $p passed, $f failed, $s skipped ($(( $(date +%s) - start ))s)"
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
done
[ -n "$failures" ] && echo "# failed in:$failures"
echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
