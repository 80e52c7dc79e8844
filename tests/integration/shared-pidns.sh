#!/bin/bash
# A PID namespace shared with another sandbox (docker run --pid host or --pid container:X,
# Kubernetes shareProcessNamespace) or with the host's users (a chroot on a plain machine):
# without a user namespace, uid 10100 there is every sandbox's first agent. pistisd's
# clean-ups must kill only this sandbox's agents' processes. Emulated in a PID namespace of
# the test's own (so no process of the machine is reachable): `pistisd serve` in a debian
# root, in process-group mode (no cgroup, no audit session: the mode that sweeps by uid),
# beside two processes with the agent's uid that are not the sandbox's: one in the test's
# own root ("the host's"), one in another mount namespace and root ("another container").
# Each round: the agent's last command's end, and a tightening policy.apply. Round "ptrace"
# runs serve as root with every capability in the test's mount namespace; round
# "no-ptrace" in a mount namespace of its own without CAP_SYS_PTRACE (Docker's default
# set), where /proc/PID/root of another uid cannot be read. Root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
if [ "${PISTIS_TEST_PID_NS:-}" != "$(readlink /proc/self/ns/pid)" ]; then
	# (--mount-proc makes a new private mount namespace: the test's from then on; an IPC
# namespace of its own, shared by both "containers", as in a Kubernetes pod)
	exec unshare --pid --ipc --fork --mount-proc bash -c 'PISTIS_MNT_NS=$(readlink /proc/self/ns/mnt) \
		PISTIS_TEST_PID_NS=$(readlink /proc/self/ns/pid) exec bash "$0" "$@"' "$0" "$@"
fi
need_bins pistisd server-min pistis
R=$(root_fresh debian) || missing "no debian test root"
R2=$(root_fresh musl) || missing "no musl test root"
W=$(scratch)
FOREIGN=()
cleanup() {
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	for p in "${FOREIGN[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	for p in $(root_pids "$R"); do kill -9 "$p" 2>/dev/null; done
	root_cleanup
}
trap cleanup EXIT

mount -t tmpfs -o mode=0755,size=1m no-cgroup "$R/sys/fs/cgroup"
mkdir -p "$R/workspaces"
P() { timeout 30 "$BIN/pistis" "$@"; }
call() { timeout 60 "$BIN/pistis" call "$@" 2>&1; }
rules() { call policy.apply "{\"rules\":\"[{\\\"path\\\":\\\"/workspaces\\\",\\\"access\\\":\\\"$1\\\"}]\"}" | tail -n 1; }
alive() { kill -0 "$1" 2>/dev/null; }

# serve_up MODE: server-min and `pistisd serve` in R (relay_up, with serve in a mount
# namespace of its own and without CAP_SYS_PTRACE for MODE no-ptrace).
serve_up() {
	local ROOT_WRAP=()
	[ "$1" = no-ptrace ] && ROOT_WRAP=(unshare -m --propagation private setpriv --bounding-set=-sys_ptrace)
	SERVE_ENV=PISTIS_NO_AUDIT_SESSION=1 relay_up "$R" "$W"
}
serve_down() {
	kill "$PD" "$SM" 2>/dev/null
	wait "$PD" "$SM" 2>/dev/null
	PD= SM=
}

# pistisd check: processes of another mount namespace in our PID namespace are a sidecar's.
chk() { in_root "$R" pistisd check --no-walk 2>/dev/null | awk '$1 == "shared_pid_ns"'; }
like "check: shared_pid_ns ok while every process here is in our mount namespace" "$(chk)" '^shared_pid_ns +ok'
unshare -m --propagation private chroot "$R2" sleep 603 &
SIDE=$!
FOREIGN+=("$SIDE")
sleep 0.2
like "check: shared_pid_ns warns with another container's process in the namespace" "$(chk)" \
	"^shared_pid_ns +warn .*1 process\(es\) of another mount namespace.*\(pid $SIDE\)"
kill -9 "$SIDE"
wait "$SIDE" 2>/dev/null

for mode in ptrace no-ptrace; do
	serve_up "$mode"
	like "$mode: pistisd serve is connected" "$(P ls 2>&1)" '^s1 +connected'
	like "$mode: policy.apply: /workspaces write" "$(rules write)" '"ok":true.*"complete":true'
	AUID=$(P exec --agent alice -- id -u 2>&1 | tail -n 1)
	like "$mode: alice's command runs (uid $AUID)" "$AUID" '^1[0-9]{4}$'
	if [ "$mode" = no-ptrace ]; then
		capeff=$(sed -n 's/^CapEff:\t//p' /proc/$(pgrep -n -f "pistisd serve --relay ws://127.0.0.1:$SP")/status)
		ok "$mode: serve runs without CAP_SYS_PTRACE ($capeff)" test $((0x$capeff >> 19 & 1)) = 0
	fi
	# The host's process of alice's uid (root /, the test's mount namespace), and another
	# container's (its own mount namespace and root).
	setpriv --reuid="$AUID" --regid="$AUID" --clear-groups sleep 600 &
	HOSTP=$!
	unshare -m --propagation private chroot --userspec="$AUID:$AUID" "$R2" sleep 601 &
	CTRP=$!
	FOREIGN+=("$HOSTP" "$CTRP")
	sleep 0.3
	ok "$mode: the host's process of uid $AUID runs" alive "$HOSTP"
	ok "$mode: ... and the other container's" alive "$CTRP"

	# What the agent reaches of the other container's process of its uid: the kernel lets
	# a uid signal its own processes anywhere (docs/security.md); Landlock's ptrace rule
	# (the command's scope domain) keeps its environment, files and root out of reach.
	out=$(P exec --agent alice -- sh -c "kill -0 $CTRP && echo signal-ok; cat /proc/$CTRP/environ >/dev/null 2>&1 || echo environ-denied; ls /proc/$CTRP/root/ >/dev/null 2>&1 || echo root-denied; ls -l /proc/$CTRP/fd/ >/dev/null 2>&1 || echo fd-denied" 2>&1)
	like "$mode: alice may signal the other container's process of her uid (kernel rule)" "$out" signal-ok
	if grep -q 'landlock .*ok' <(in_root "$R" pistisd check --no-walk 2>/dev/null); then
		like "$mode: ... but not read its environ, root or fds (Landlock's ptrace rule)" \
			"$(echo $out)" 'environ-denied root-denied fd-denied'
	fi

	# The host's process of the uid uses a SysV message queue, owned by the uid as the
	# agent's would be.
	QID=$(setpriv --reuid="$AUID" --regid="$AUID" --clear-groups ipcmk -Q | awk '{print $NF}')
	like "$mode: a message queue of uid $AUID ($QID)" "$QID" '^[0-9]+$'

	# The agent's last command's end, a setsid'ed leftover of its own with it.
	P exec --agent alice -- sh -c 'setsid sleep 300 </dev/null >/dev/null 2>&1 & sleep 0.3' >/dev/null 2>&1
	for _ in $(seq 30); do [ -z "$(root_pids "$R" "$AUID")" ] && break; sleep 0.1; done
	is "$mode: alice's last command's end: its leftover is killed" "$(root_pids "$R" "$AUID")" ""
	ok "$mode: ... the host's process of uid $AUID is not" alive "$HOSTP"
	ok "$mode: ... nor the other container's" alive "$CTRP"
	is "$mode: ... and the queue the host's process uses stays" \
		"$(awk -v q="$QID" 'NR > 1 && $2 == q {print "there"}' /proc/sysvipc/msg)" there
	like "$mode: ... which serve says" "$(cat "$W/pd.log")" \
		"agent=\"alice\": a process of uid $AUID outside this sandbox's root .*keeps the sweep"
	ipcrm -q "$QID"

	# A tightening apply: every process of the registry's uids in this sandbox goes.
	# (in serve's mount namespace, as `docker exec` would start it)
	nsenter -t "$PD" -m chroot "$R" setpriv --reuid="$AUID" --regid="$AUID" --clear-groups sleep 302 &
	disown
	sleep 0.3
	like "$mode: policy.apply: /workspaces read (tightening)" "$(rules read)" '"ok":true.*"complete":true'
	is "$mode: ... alice's process in the sandbox is killed" "$(root_pids "$R" "$AUID")" ""
	ok "$mode: ... the host's process of uid $AUID is not" alive "$HOSTP"
	ok "$mode: ... nor the other container's" alive "$CTRP"

	# users remove, run where serve runs (its mount namespace, its capabilities).
	wrap=()
	[ "$mode" = no-ptrace ] && wrap=(setpriv --bounding-set=-sys_ptrace)
	nsenter -t "$PD" -m "${wrap[@]}" env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd users remove alice >"$W/rm.out" 2>&1
	is "$mode: users remove alice" "$?" 0
	ok "$mode: ... the host's process of uid $AUID lives" alive "$HOSTP"
	ok "$mode: ... and the other container's" alive "$CTRP"
	kill -9 "$HOSTP" "$CTRP" 2>/dev/null
	wait "$HOSTP" "$CTRP" 2>/dev/null
	serve_down
done
done_testing
