#!/bin/bash
# A command's cgroup that cannot be emptied (a process in D state, which no SIGKILL ends
# until its I/O does) stays on pistisd serve's dying list, looked at and killed again less
# and less often, once a second at most after 2 s. serve's timer sleeps until the first
# one is due: it used to wake every 20 ms for as long as one was on the list, for nothing.
# Counted by serve's context switches over 3 s, its threads summed: with the timer at 20 ms
# at least 150. Once the process can go, the cgroup is removed. Root, private mount
# namespace, a writable cgroup2 (cgroup mode).
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
PROBE=$TESTBIN/probe
[ -x "$PROBE" ] || missing "$PROBE not built"
MNT=""
for m in /sys/fs/cgroup /sys/fs/cgroup/unified; do
	[ "$(stat -f -c %T "$m" 2>/dev/null)" = cgroup2fs ] && MNT=$m && break
done
[ -n "$MNT" ] || missing "no cgroup2 mounted"
R=$(root_fresh debian) || missing "no debian test root"
W=$(scratch)
HOLDER= STUCK=
cleanup() {
	[ -n "$HOLDER" ] && kill -KILL "$HOLDER" 2>/dev/null
	serve_test_cleanup
}
trap cleanup EXIT

relay_up "$R" "$W"
like "pistisd serve is connected" "$("$BIN/pistis" ls 2>&1)" '^s1 +connected'
"$BIN/pistis" exec --agent dying -- /bin/sleep 3181 >/dev/null 2>&1 &
LEADER=
for _ in $(seq 100); do
	LEADER=$(for p in $(root_pids "$R"); do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q '^/bin/sleep 3181' && echo "$p"
	done | head -n 1)
	[ -n "$LEADER" ] && break
	sleep 0.1
done
CG=$(sed -n 's/^0:://p' "/proc/${LEADER:-0}/cgroup" 2>/dev/null)
like "the command runs in a command cgroup of its own (${CG:-none})" "$CG" '/pistis/[^/]+/cmd-[^/]+$'
CG=$MNT$CG

# A D-state process in its cgroup, then the command's end: serve kills the tree, and the
# cgroup goes on the dying list, populated.
out=$("$PROBE" stuck "$CG" 2>&1)
HOLDER=$(echo "$out" | sed -n 's/.*holder=\([0-9]*\).*/\1/p')
STUCK=$(echo "$out" | sed -n 's/.*stuck=\([0-9]*\).*/\1/p')
like "a process in D state in the command's cgroup ($out)" "$out" 'state=D'
kill -KILL "$LEADER"
sleep 3 # the list's retries back off to a second (10, 30, 70 ... 1270, 2270 ms)
switches() {
	local f n=0 v
	for f in /proc/"$PD"/task/*/status; do
		for v in $(sed -n 's/^\(nonvoluntary_\)\{0,1\}voluntary_ctxt_switches:[[:space:]]*//p' "$f"); do
			n=$((n + v))
		done
	done
	echo "$n"
}
s0=$(switches)
sleep 3
s1=$(switches)
echo "# pistisd serve: $((s1 - s0)) context switches in 3 s with one stuck dying cgroup"
is "the stuck process is still in D state" "$(awk '{print $3}' "/proc/$STUCK/stat" 2>/dev/null)" D
ok "its cgroup is still there (on the dying list)" test -d "$CG"
ok "serve slept between the list's retries: $((s1 - s0)) context switches in 3 s (< 60)" \
	test "$((s1 - s0))" -lt 60
ok "serve still answers" test "$("$BIN/pistis" exec --agent dying -- echo hi 2>&1)" = hi

# Let go: the process dies of its pending SIGKILL, and the next retry removes the cgroup.
kill -KILL "$HOLDER"
for _ in $(seq 50); do kill -0 "$STUCK" 2>/dev/null || break; sleep 0.1; done
fails "the stuck process died once let go" kill -0 "$STUCK"
for _ in $(seq 40); do [ -d "$CG" ] || break; sleep 0.1; done
case "$CG" in
*/cmd-s[0-9]*) is "its slot is empty within 4 s" "$(cat "$CG/cgroup.procs" 2>&1)" "" ;;
*) fails "its cgroup is removed within 4 s" test -d "$CG" ;;
esac
done_testing
