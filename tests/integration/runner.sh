#!/bin/bash
# tests/run.sh and lib.sh's own honesty: a test file that stops early, skips itself as a
# whole, prints no plan or runs more tests than it planned is a failure, never green; a
# missing prerequisite fails; like/unlike refuse a pattern that matches anything; tap.c and
# fuzz-smoke.sh pass no test that did not run to its end.
. "$(dirname "$0")/../lib.sh"
W=$(scratch)
RUN=$_lib_dir/run.sh
# verdict FILE-BODY: the runner's last line and exit code over a test made of FILE-BODY
verdict() {
	printf '. %s\n%s\n' "$_lib_dir/lib.sh" "$1" >"$W/t.sh"
	PISTIS_TEST_LOGS=$W/logs PISTIS_TEST_TIMEOUT=60 sh "$RUN" "$W/t.sh" >"$W/out" 2>&1
	echo "rc=$? $(tail -n 1 "$W/out")"
}
is "a finished test passes" "$(verdict 'ok one true
ok two true
done_testing')" "rc=0 2 passed, 0 failed"
is "a test that exits 0 before done_testing fails" "$(verdict 'ok one true
exit 0
ok two true
done_testing')" "rc=1 1 passed, 1 failed"
like "... saying it printed no plan" "$(cat "$W/out")" 'not ok - t.sh printed 0 plans'
is "a test skipped as a whole (a 1..0 plan) fails" \
	"$(verdict 'echo "1..0 # SKIP not here"; exit 0')" "rc=1 0 passed, 1 failed"
like "... saying what it skipped" "$(cat "$W/out")" 'not ok - t.sh ran no test: 1..0 # SKIP not here'
is "a test with no output that exits 0 fails" "$(verdict 'true')" "rc=1 0 passed, 1 failed"
is "a test that runs more tests than it planned fails" "$(verdict 'plan 1
ok one true
ok two true')" "rc=1 2 passed, 1 failed"
is "a test that runs fewer than it planned fails" "$(verdict 'plan 3
ok one true
exit 0')" "rc=1 1 passed, 1 failed"
is "a tested command's own 'ok' line is no result" "$(verdict 'echo "ok done"
ok one true
done_testing')" "rc=0 1 passed, 0 failed"
is "two plans fail" "$(verdict 'plan 1
ok one true
done_testing')" "rc=1 1 passed, 1 failed"
is "a test that fails exits non-zero" "$(verdict 'ok one false
done_testing')" "rc=1 0 passed, 1 failed"
is "a skip inside a test is counted, not hidden" "$(verdict 'skip "one" "why"
ok two true
done_testing'; grep '^[0-9]* skipped$' "$W/out")" "rc=0 1 passed, 0 failed
1 skipped"
is "need_bins of a binary not built fails" "$(verdict 'ok one true
need_bins no-such-binary
ok two true
done_testing')" "rc=1 1 passed, 1 failed"
like "... naming it" "$(cat "$W/out")" 'not ok 2 - prerequisite: .*/no-such-binary not built'
is "missing fails and ends the test" "$(verdict 'missing "no frobnicator"
ok two true
done_testing')" "rc=1 0 passed, 1 failed"
is "untested fails, and the test goes on" "$(verdict 'untested "one" "no frobnicator"
ok two true
done_testing')" "rc=1 1 passed, 1 failed"
nl='
'
is "like with a blank line in its pattern fails" "$(verdict "like 'x' 'abc' 'zzz${nl}${nl}yyy'
done_testing")" "rc=1 0 passed, 1 failed"
is "like with a trailing newline in its pattern fails" "$(verdict "like 'x' 'abc' 'zzz${nl}'
done_testing")" "rc=1 0 passed, 1 failed"
is "like with an empty pattern fails" "$(verdict "like 'x' 'abc' ''
done_testing")" "rc=1 0 passed, 1 failed"
is "unlike with an empty pattern fails" "$(verdict "unlike 'x' 'abc' ''
done_testing")" "rc=1 0 passed, 1 failed"
# lib/tap.c, the unit tests' harness: a test passes only when its function returned, not
# when code under test exited 0 (or 4, the skip code) halfway.
cat >"$W/tapdemo.c" <<'C'
#include "lib/tap.h"
#include <stdlib.h>
static int under_test(int x) { if (x < 0) exit(0); return x; }
TEST(exits_halfway) { ASSERT_EQ(under_test(-1), 1); }
TEST(exits_with_the_skip_code) { exit(4); }
TEST(passes) { ASSERT_EQ(under_test(1), 1); }
TEST(skips) { SKIP("here"); }
TEST(fails) { EXPECT_EQ(under_test(1), 2); }
TEST_HARNESS_MAIN
C
ok "a TAP program builds with lib/tap.c" \
	gcc -std=gnu17 -D_GNU_SOURCE -I"$_lib_dir/.." -o "$W/tapdemo" "$_lib_dir/../lib/tap.c" "$W/tapdemo.c"
is "tap.c: exit(0) or exit(4) before a test's end fails it; a return, SKIP, a failure as before" \
	"$("$W/tapdemo" | grep -E '^(not )?ok ')" "not ok 1 exits_halfway # exited 0 before the test's end
not ok 2 exits_with_the_skip_code # exited 4 before the test's end
ok 3 passes
ok 4 skips # SKIP
not ok 5 fails"
# tests/fuzz-smoke.sh: a fuzzer that exits 0 having run no input is no pass.
mkdir -p "$W/fz/fuzz/bin"
printf '#!/bin/sh\nexit 0\n' >"$W/fz/fuzz/bin/idle"
printf '#!/bin/sh\necho "stat::number_of_executed_units: 99"\n' >"$W/fz/fuzz/bin/busy"
chmod 0755 "$W/fz/fuzz/bin/idle" "$W/fz/fuzz/bin/busy"
is "fuzz-smoke: a fuzzer that ran no input fails, one that ran passes" \
	"$(PISTIS_BUILD=$W/fz PISTIS_FUZZ_ARTIFACTS=$W/fz/art bash "$_lib_dir/fuzz-smoke.sh" 1 idle busy |
		grep -E '^(not )?ok |passed')" "not ok 1 - idle: exit 0 after ? runs
ok 2 - busy: 99 runs in 1s from 0 seeds
1 passed, 1 failed"
is "denied fails a command that failed for a missing file, passes a refusal" "$(verdict 'denied "a" cat /nonexistent/file
denied "b" sh -c "echo \"cat: f: Permission denied\" >&2; exit 1"
denied "c" true
done_testing')" "rc=1 1 passed, 2 failed"
is "like over two lines of pattern, neither empty, still works" "$(verdict "like 'x' 'abc' 'zzz${nl}b'
unlike 'y' 'abc' 'zzz${nl}yyy'
done_testing")" "rc=0 2 passed, 0 failed"
done_testing
