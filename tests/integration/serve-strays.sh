#!/bin/bash
# A tightening policy.apply must leave nothing running as an agent, including what no command
# tracks any more: without a cgroup (the process-group fallback: a container whose
# /sys/fs/cgroup is read-only, hidden here by an empty tmpfs) a setsid'ed grandchild leaves
# its command's process group and survives the command's end. Holding an fd opened while the
# tree was writable, it would go on writing through the new, read-only modes. The apply
# kills every process of a registry uid once the commands have ended; a process of another
# uid in the agent range (a plain host's user) is never touched. Root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
R=$(root_fresh debian) || { echo "1..0 # SKIP no debian test root"; exit 0; }
W=$(scratch)
cleanup() {
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	[ -n "${OTHER:-}" ] && kill "$OTHER" 2>/dev/null
	wait 2>/dev/null
	for p in $(root_pids "$R"); do kill -9 "$p" 2>/dev/null; done
	root_cleanup
}
trap cleanup EXIT

mount -t tmpfs -o mode=0755,size=1m no-cgroup "$R/sys/fs/cgroup"
relay_up "$R" "$W"
P() { timeout 30 "$BIN/pistis" "$@"; }
call() { timeout 60 "$BIN/pistis" call "$@" 2>&1; }
like "pistisd serve is connected" "$(P ls 2>&1)" '^s1 +connected'

mkdir -p "$R/workspaces"
rules() { call policy.apply "{\"rules\":\"[{\\\"path\\\":\\\"/workspaces\\\",\\\"access\\\":\\\"$1\\\"}]\"}" | tail -n 1; }
like "policy.apply: /workspaces write" "$(rules write)" '"ok":true.*"complete":true'
out=$(P exec --agent alice -- sh -c 'echo "tree=$(cat /proc/self/cgroup)"; id -u' 2>&1)
AUID=$(echo "$out" | tail -n 1)
like "alice's command runs (uid $AUID)" "$AUID" '^1[0-9]{4}$'

# The writer: its own session, so its command's process group does not hold it; an fd on a
# file agents may write now.
# (The command waits until the writer is in its own session: the group is killed when it ends.)
P exec --agent alice -- sh -c 'setsid sh -c "exec 3>>/workspaces/log; while :; do echo x >&3; sleep 0.05; done" \
	</dev/null >/dev/null 2>&1 & sleep 0.5'
sleep 0.5
ok "the setsid'ed writer outlived its command (no cgroup to hold it)" test -n "$(root_pids "$R" "$AUID")"
s0=$(stat -c %s "$R/workspaces/log")
sleep 0.5
ok "... and is writing ($s0 → $(stat -c %s "$R/workspaces/log") bytes)" \
	test "$(stat -c %s "$R/workspaces/log")" -gt "$s0"
# A process of a uid in the agent range that is no agent of this sandbox's registry.
chroot "$R" setpriv --reuid=10777 --regid=10777 --clear-groups sleep 120 &
OTHER=$!
sleep 0.3

like "policy.apply: /workspaces read (tightening)" "$(rules read)" '"ok":true.*"complete":true'
is "no process of alice's is left" "$(root_pids "$R" "$AUID")" ""
like "pistisd says what it killed" "$(cat "$W/pd.log")" 'killed [1-9][0-9]* agent process\(es\) outside any running command'
s1=$(stat -c %s "$R/workspaces/log")
sleep 0.5
is "the file does not grow after the apply" "$(stat -c %s "$R/workspaces/log")" "$s1"
is "... and is read-only for agents now" "$(stat -c '%U %a' "$R/workspaces/log")" "root 644"
ok "uid 10777, in the agent range but no agent here: untouched" kill -0 "$OTHER"
like "a command of alice's starts again after the apply" "$(P exec --agent alice -- echo back 2>&1)" '^back'
done_testing
