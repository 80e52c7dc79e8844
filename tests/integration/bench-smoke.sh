#!/bin/bash
# Every benchmark of bench/ that runs on one machine without a network of its own runs here
# to its end, briefly, and prints its ratio lines with numbers in them: a bench that no
# longer runs (a path it assumed, a mount layout it did not expect, a tool missing from a
# fresh machine) fails here rather than in the hands of whoever measures. The figures of
# such short runs mean nothing and are not judged. Not here: bench/relay.sh and
# relay-idle.sh (a GiB through the relay, a dockerd, thousands of connections: minutes),
# bench/ab.sh (two builds).
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
export LC_ALL=C
cd "$_lib_dir/.." || exit 1
S=$(scratch)

# bench NAME CMD...: runs the bench, its output in $S/NAME.out; "ends with 0" is a test
bench() {
	local name=$1 rc
	shift
	"$@" >"$S/$name.out" 2>&1
	rc=$?
	is "bench/$name ends with 0" "$rc" 0
	[ "$rc" = 0 ] || sed 's/^/# /' "$S/$name.out" | tail -n 20
}
out() { cat "$S/$1.out"; }
num='[0-9]+(\.[0-9]+)?'

bench pi-env.sh env BENCH_TOOL=loop bash bench/pi-env.sh 30
like "pi-env.sh: its ratio to env -i" "$(out pi-env.sh)" "pi-env / env -i  = $num \(target"

bench spawn.sh bash bench/spawn.sh 10 50
like "spawn.sh: pistisd run / pi-env" "$(out spawn.sh)" "pistisd run / pi-env  = $num "
like "spawn.sh: pistisd run / setpriv" "$(out spawn.sh)" "pistisd run / setpriv = $num "
like "spawn.sh: sudo / pistisd run" "$(out spawn.sh)" "sudo / pistisd run    = $num "
like "spawn.sh: the in-process core against posix_spawn" "$(out spawn.sh)" \
	"ratio spawn/posix_spawn: mean = $num, median = $num"

bench users.sh env BASH_N=0 BATCH=10 bash bench/users.sh 20
like "users.sh: useradd against ensure, one process per agent" "$(out users.sh)" \
	"ratio useradd/pistisd: mean=$num median=$num"
like "users.sh: the same end state on both sides, checked" "$(out users.sh)" \
	"check: 20 agents in ours, 20 in useradd's"
like "users.sh: ensure of an existing agent in-process" "$(out users.sh)" \
	"existing n=[0-9]+ total_ms=$num per_op_us=$num"

bench policy.sh env REPS=1 bash bench/policy.sh --entries 3000
like "policy.sh: first apply against chown -R + chmod -R" "$(out policy.sh)" \
	"first apply / \(chown -R \+ chmod -R\) += $num +\(1 thread $num"
like "policy.sh: re-apply against the getdents walk" "$(out policy.sh)" \
	"re-apply / find -printf \"\" += $num +\(1 thread $num"
unlike "policy.sh: both trees conform after apply" "$(out policy.sh)" 'does not conform'

bench trusted.sh bash bench/trusted.sh 10
like "trusted.sh: the wrapper against sudo itself" "$(out trusted.sh)" "ratio wrapper/direct: $num"
like "trusted.sh: a clean start against sudo itself" "$(out trusted.sh)" "ratio clean/direct: $num"

done_testing
