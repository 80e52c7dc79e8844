#!/bin/bash
# Without a cgroup (the process group and the uid sweeps in force), the trusted commands an
# agent starts from a grandchild that left its process group: pi-tools' processes, which no
# kill of the agent's reaches, go with the agent's sweeps all the same (red team,
# reproduced: one ran on after its agent's last command, and after a tightening apply).
# Root, private mount namespace, a throwaway Debian root.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
[ -x "$BIN/server-min" ] && [ -x "$BIN/pistis" ] || { echo "1..0 # SKIP binaries not built"; exit 0; }
R=$(root_fresh debian) || { echo "1..0 # SKIP no debian test root"; exit 0; }
W=$(scratch)
cleanup() {
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	[ -n "${TOOLS:-}" ] && kill "$TOOLS" 2>/dev/null
	wait 2>/dev/null
	for p in $(root_pids "$R"); do kill -9 "$p" 2>/dev/null; done
	root_cleanup
}
trap cleanup EXIT

echo "127.0.1.1 $(hostname)" >>"$R/etc/hosts" # sudo resolves its host name
printf '#!/bin/sh\nexec sleep "${1:-30}"\n' >"$W/slow"
chmod 0755 "$W/slow"
"$BIN/pistisd" trusted add slow "$W/slow" --root "$R" >"$W/add.out" 2>&1
is "trusted command 'slow' added" "$?" 0
harden_shared "$R"
mount -t tmpfs -o mode=0755,size=1m no-cgroup "$R/sys/fs/cgroup"
relay_up "$R" "$W"
P() { timeout 30 "$BIN/pistis" "$@"; }
call() { timeout 60 "$BIN/pistis" call "$@" 2>&1; }
like "pistisd serve is connected" "$(P ls 2>&1)" '^s1 +connected'
unlike "alice's commands run as a process group (no cgroup of their own)" \
	"$(P exec --agent alice -- cat /proc/self/cgroup 2>&1)" 'pi-agent-'
tools() { root_pids "$R" 10002; }
wait_tools() { # N: until pi-tools has N processes in the root (at most 3 s)
	for _ in $(seq 60); do [ "$(tools | wc -l)" -ge "$1" ] && return 0; sleep 0.05; done
	return 1
}
wait_no_tools() {
	for _ in $(seq 60); do [ -z "$(tools)" ] && return 0; sleep 0.05; done
	return 1
}

# A pi-tools process no agent started (root's): never touched by the agents' sweeps.
chroot "$R" setpriv --reuid=10002 --regid=10002 --clear-groups sleep 120 &
TOOLS=$!
sleep 0.3
keep=$(tools)

back_to_keep() { # until only root's pi-tools process is left (at most 3 s)
	for _ in $(seq 60); do [ "$(tools)" = "$keep" ] && return; sleep 0.05; done
}
# outlives WHAT SCRIPT: while another command of alice's runs, SCRIPT (a command of alice's)
# leaves a trusted command running beyond it, which goes with alice's last command
outlives() {
	P exec --agent alice -- sleep 3 >/dev/null 2>&1 &
	local keep_cmd=$!
	sleep 0.5
	P exec --agent alice -- sh -c "$2" >/dev/null 2>&1
	ok "$1 runs as pi-tools beyond its command" wait_tools 2
	wait "$keep_cmd"
	back_to_keep
	is "... and is gone with alice's last command" "$(tools)" "$keep"
}

# 1. From a setsid'ed grandchild.
outlives "a trusted command from a setsid'ed grandchild" \
	'setsid sh -c "exec /data/bin/slow 300" </dev/null >/dev/null 2>&1 & sleep 0.5'
like "... which pistisd says" "$(cat "$W/pd.log")" 'alice..: killed [1-9][0-9]* process\(es\) that had left its process group'
# 2. Orphaned: the agent kills the sudo in between (its real uid is the agent's) with SIGHUP
#    ignored, so the script, re-parented, keeps running with no agent process above it.
outlives "an orphaned trusted command (its sudo killed by the agent)" \
	'setsid sh -c "trap \"\" HUP; /data/bin/slow 300 & sleep 0.5; kill -9 \$!" </dev/null >/dev/null 2>&1 & sleep 1'

# 3. A tightening apply while the command that started it still runs.
mkdir -p "$R/workspaces"
rules() { call policy.apply "{\"rules\":\"[{\\\"path\\\":\\\"/workspaces\\\",\\\"access\\\":\\\"$1\\\"}]\"}" | tail -n 1; }
like "policy.apply: /workspaces write" "$(rules write)" '"ok":true.*"complete":true'
P exec --agent alice -- sh -c 'setsid sh -c "exec /data/bin/slow 300" </dev/null >/dev/null 2>&1 & sleep 60' \
	>/dev/null 2>&1 &
KEEP=$!
ok "a trusted command runs beside alice's running command" wait_tools 2
like "policy.apply: /workspaces read (tightening)" "$(rules read)" '"ok":true.*"complete":true'
wait "$KEEP"
back_to_keep
is "... the apply killed the trusted command too" "$(tools)" "$keep"
ok "root's pi-tools process: untouched throughout" kill -0 "$TOOLS"
like "a trusted command still works afterwards" \
	"$(P exec --agent alice -- sh -c '/data/bin/slow 0 && echo done' 2>&1)" '^done'
done_testing
