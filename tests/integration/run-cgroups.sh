#!/bin/bash
# tests/run.sh runs each test file in a cgroup of its own (F, the file in F/test) and leaves
# no cgroup behind: here it runs small files of its own. One makes a tree beneath its
# cgroup as pistisd does (pistis/<agent>/cmd-s0): the run passes, F and the tree are gone,
# F held no process and was named to the file in PISTIS_TEST_CGROUP. One leaves a setsid'd
# sleeper (out of the watchdog's process group): the run fails and names it, the sleeper
# is dead, F is gone. Two files of one run get two cgroups. Root, a writable cgroup2.
. "$(dirname "$0")/../lib.sh"
need_root
TOP=$(cd "$(dirname "$0")/../.." && pwd)
S=$(scratch)
MNT=""
for m in /sys/fs/cgroup /sys/fs/cgroup/unified; do
	[ "$(stat -f -c %T "$m" 2>/dev/null)" = cgroup2fs ] && MNT=$m && break
done
[ -n "$MNT" ] || missing "no cgroup2 mounted"
OWN=$MNT$(sed -n 's/^0:://p' /proc/self/cgroup)
OWN=${OWN%/}
[ -w "$OWN" ] || missing "our cgroup $OWN is not writable"

# A file that writes down its cgroup, F's, and F's processes, then makes a tree as pistisd
# does and leaves it (with nothing in it).
cat >"$S/tree.sh" <<EOF
mine=$MNT\$(sed -n 's/^0:://p' /proc/self/cgroup)
echo "\$mine" >"$S/tree.cg"
echo "\${PISTIS_TEST_CGROUP:-}" >"$S/tree.f"
cat "\${PISTIS_TEST_CGROUP:-/nonexistent}/cgroup.procs" >"$S/tree.fprocs" 2>&1
mkdir -p "\$mine/pistis/agent/cmd-s0" && echo 1..1 && echo "ok 1 - tree made"
EOF
# One that leaves a sleeper in a session of its own (stdout away from run.sh's log).
cat >"$S/stray.sh" <<EOF
echo "$MNT\$(sed -n 's/^0:://p' /proc/self/cgroup)" >"$S/stray.cg"
setsid sleep 300 </dev/null >/dev/null 2>&1 &
echo \$! >"$S/stray.pid"
echo 1..1
echo "ok 1 - started a sleeper"
EOF

run() {
	PISTIS_TEST_LOGS=$S/logs "$TOP/tests/run.sh" "$@" 2>&1
}

out=$(run "$S/tree.sh")
is "a file that leaves a cgroup tree (nothing running): the run passes" "$?" 0
like "... 1 passed" "$out" '^1 passed, 0 failed$'
cg=$(cat "$S/tree.cg")
F=$(cat "$S/tree.f")
like "... the file ran in F/test, F a pistis-test-<pid>-<n> beneath our cgroup" "$cg" \
	"^$OWN/pistis-test-[0-9]+-1/test\$"
is "... PISTIS_TEST_CGROUP named F" "$F" "${cg%/test}"
is "... F held no process of its own (F/test's children may have controllers)" \
	"$(cat "$S/tree.fprocs")" ""
ok "... the file's tree is gone" test ! -e "$cg/pistis"
ok "... and F with it" test ! -e "$F"

out=$(run "$S/stray.sh")
is "a file that leaves a process running: the run fails" "$?" 1
like "... saying so" "$out" "^not ok - stray.sh left processes running in its cgroup \\(killed\\):\$"
like "... naming it" "$out" "^#   $(cat "$S/stray.pid") sleep 300"
like "... one failure, not a wrong count of the file's" "$out" '^1 passed, 1 failed$'
pid=$(cat "$S/stray.pid")
gone=no
for _ in $(seq 50); do
	kill -0 "$pid" 2>/dev/null || { gone=yes && break; }
	sleep 0.1
done
is "... the sleeper is dead" "$gone" yes
cg=$(cat "$S/stray.cg")
ok "... its F is gone" test -n "$cg" -a ! -e "${cg%/test}"

# Without cgroup.kill (Linux < 5.14): each process listed is killed, two here.
cat >"$S/stray2.sh" <<EOF
echo "$MNT\$(sed -n 's/^0:://p' /proc/self/cgroup)" >"$S/stray.cg"
setsid sh -c 'sleep 300 & echo \$! >"$S/stray2.pid"; exec sleep 301' </dev/null >/dev/null 2>&1 &
echo \$! >"$S/stray.pid"
while [ ! -s "$S/stray2.pid" ]; do sleep 0.1; done
echo 1..1
echo "ok 1 - started two sleepers"
EOF
out=$(PISTIS_TEST_NO_CGROUP_KILL=1 run "$S/stray2.sh")
is "the same without cgroup.kill: the run fails" "$?" 1
like "... naming both" "$out" "^#   $(cat "$S/stray2.pid") sleep 300"
like "... ..." "$out" "^#   $(cat "$S/stray.pid") sleep 301"
pids="$(cat "$S/stray.pid") $(cat "$S/stray2.pid")"
gone=no
for _ in $(seq 50); do
	live=0
	for p in $pids; do kill -0 "$p" 2>/dev/null && live=1; done
	[ "$live" = 0 ] && gone=yes && break
	sleep 0.1
done
is "... both are dead" "$gone" yes
cg=$(cat "$S/stray.cg")
ok "... F is gone" test -n "$cg" -a ! -e "${cg%/test}"

out=$(run "$S/tree.sh" "$S/tree.sh")
is "two files in one run: both pass" "$?" 0
cg=$(cat "$S/tree.cg")
like "... the second in a cgroup of its own" "$cg" "/pistis-test-[0-9]+-2/test\$"
left=$(echo "${cg%-2/test}"-*)
is "... and none of the run's is left" "$left" "${cg%-2/test}-*"
kill -9 $pid $pids 2>/dev/null
done_testing
