#!/bin/bash
# Fuzz smoke: run each libFuzzer target for SECONDS over a scratch copy of its committed
# seeds, print TAP, and end with the plain "N passed, N failed" line.
#
#   tests/fuzz-smoke.sh SECONDS TARGET...      (make fuzz-smoke FUZZ_SECONDS=30)
#
# Targets are $PISTIS_BUILD/fuzz/bin/TARGET; seeds are tests/fuzz/corpus/TARGET/ (the
# corpus a run grows is thrown away, only seeds are committed). A crash, leak, timeout or
# sanitizer report is "not ok" with the reproducer kept under
# ${PISTIS_FUZZ_ARTIFACTS:-$PISTIS_BUILD/fuzz/artifacts}/TARGET/ and the command that replays it.
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=${PISTIS_BUILD:-build}
case "$build" in /*) ;; *) build=$(pwd)/$build ;; esac
artifacts=${PISTIS_FUZZ_ARTIFACTS:-$build/fuzz/artifacts}

if [ $# -lt 2 ] || ! [ "$1" -gt 0 ] 2>/dev/null; then
	echo "Usage: tests/fuzz-smoke.sh SECONDS TARGET..." >&2
	exit 100
fi
secs=$1
shift

work=$(mktemp -d "${TMPDIR:-/tmp}/pistis-fuzz.XXXXXX") || exit 111
trap 'rm -rf "$work"' EXIT

echo "1..$#"
n=0 passed=0 failed=0
for t in "$@"; do
	n=$((n + 1))
	bin=$build/fuzz/bin/$t
	if [ ! -x "$bin" ]; then
		echo "not ok $n - $t: $bin is not built (make fuzz)"
		failed=$((failed + 1))
		continue
	fi
	corpus=$work/$t/corpus
	mkdir -p "$corpus" "$work/$t/artifacts"
	seeds=0
	if [ -d "$here/fuzz/corpus/$t" ]; then
		cp -R "$here/fuzz/corpus/$t/." "$corpus/"
		seeds=$(find "$corpus" -type f | wc -l)
	fi
	log=$work/$t/log
	# -timeout: one input taking 10 s is a hang, reported like a crash. The outer timeout
	# only guards against the fuzzer itself wedging.
	timeout -k 10 $((secs * 2 + 60)) "$bin" -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/$t/artifacts/" "$corpus" >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	found=$(find "$work/$t/artifacts" -type f | wc -l)
	# A fuzzer that ran no input (a target that returns at once, stats never printed)
	# tested nothing: not a pass.
	if [ "$rc" -eq 0 ] && [ "$found" -eq 0 ] && [ "${runs:-0}" -gt 0 ] 2>/dev/null; then
		echo "ok $n - $t: ${runs:-?} runs in ${secs}s from $seeds seeds"
		passed=$((passed + 1))
		continue
	fi
	echo "not ok $n - $t: exit $rc after ${runs:-?} runs"
	failed=$((failed + 1))
	if [ "$found" -gt 0 ]; then
		mkdir -p "$artifacts/$t"
		for a in "$work/$t/artifacts"/*; do
			cp "$a" "$artifacts/$t/"
			echo "#   reproducer: $artifacts/$t/$(basename "$a")"
			echo "#   replay:     $bin $artifacts/$t/$(basename "$a")"
		done
	fi
	grep -E 'ERROR|SUMMARY|==[0-9]+==|runtime error' "$log" | head -n 20 |
		sed 's/^/#   /'
	[ "$rc" -eq 124 ] && echo "#   the fuzzer did not stop on its own (outer timeout)"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
