#!/bin/bash
# Without a cgroup (the process group and the uid sweeps in force), the trusted commands an
# agent starts from a grandchild that left its process group: pi-tools' processes, which no
# kill of the agent's reaches, go with the agent's sweeps all the same (red team,
# reproduced: one ran on after its agent's last command, and after a tightening apply).
# Root, private mount namespace, a throwaway Debian root.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
[ -x "$BIN/server-min" ] && [ -x "$BIN/pistis" ] || missing "binaries not built"
R=$(root_fresh debian) || missing "no debian test root"
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
# The sweeps are what holds such a process where a command can have no audit session of
# its own either (docs/spawn.md, "Process trees"); with one, its command's end takes it
# (tests/integration/serve-strays.sh).
SERVE_ENV=PISTIS_NO_AUDIT_SESSION=1 relay_up "$R" "$W"
P() { timeout 30 "$BIN/pistis" "$@"; }
call() { timeout 60 "$BIN/pistis" call "$@" 2>&1; }
like "pistisd serve is connected" "$(P ls 2>&1)" '^s1 +connected'
unlike "alice's commands run as a process group (no cgroup of their own)" \
	"$(P exec --agent alice -- cat /proc/self/cgroup 2>&1)" 'pi-agent-'
tools() { root_pids "$R" 10002; }
wait_tools() { # N [S]: until pi-tools has N processes in the root (at most S s, 3)
	for _ in $(seq $((${2:-3} * 20))); do [ "$(tools | wc -l)" -ge "$1" ] && return 0; sleep 0.05; done
	return 1
}
wait_no_tools() {
	for _ in $(seq 60); do [ -z "$(tools)" ] && return 0; sleep 0.05; done
	return 1
}

# pi-tools processes no agent started (root's): never touched by the agents' sweeps. One a
# child of this shell (which is serve's parent too), one orphaned in this shell's session.
chroot "$R" setpriv --reuid=10002 --regid=10002 --clear-groups sleep 120 &
TOOLS=$!
(chroot "$R" setpriv --reuid=10002 --regid=10002 --clear-groups sleep 120 &)
sleep 0.3
keep=$(tools)
is "root's two pi-tools processes run" "$(echo "$keep" | wc -l)" 2

back_to_keep() { # until only root's pi-tools process is left (at most 3 s)
	for _ in $(seq 60); do [ "$(tools)" = "$keep" ] && return; sleep 0.05; done
}
# outlives WHAT SCRIPT [N [S]]: while another command of alice's runs (S seconds, 3), SCRIPT
# (a command of alice's) leaves N trusted commands (1) running beyond it, which go with
# alice's last command
outlives() {
	local n=${3:-1} keep_cmd
	P exec --agent alice -- sleep "${4:-3}" >/dev/null 2>&1 &
	keep_cmd=$!
	sleep 0.5
	P exec --agent alice -- sh -c "$2" >/dev/null 2>&1
	ok "$1 runs as pi-tools beyond its command" wait_tools $((n + 2)) 10
	wait "$keep_cmd"
	back_to_keep
	is "... and is gone with alice's last command" "$(tools)" "$keep"
}

# 1. From a setsid'ed grandchild.
outlives "a trusted command from a setsid'ed grandchild" \
	'setsid sh -c "exec /data/bin/slow 300" </dev/null >/dev/null 2>&1 & sleep 0.5'
like "... which pistisd says" "$(cat "$W/pd.log")" 'agent="alice": killed [1-9][0-9]* process\(es\) that had left its process group'
# 2. Orphaned: the agent kills the sudo in between (its real uid is the agent's) with SIGHUP
#    ignored, so the script, re-parented, keeps running with no agent process above it.
outlives "an orphaned trusted command (its sudo killed by the agent)" \
	'setsid sh -c "trap \"\" HUP; /data/bin/slow 300 & sleep 0.5; kill -9 \$!" </dev/null >/dev/null 2>&1 & sleep 1'

# 2b. More than the sweep takes in one batch (64): the rounds that follow take the rest.
#     (72: the 70 and root's two, every pi-tools process the command sees)
outlives "each of 70 trusted commands" \
	'for i in $(seq 70); do setsid sh -c "exec /data/bin/slow 300" </dev/null >/dev/null 2>&1 & done
	 while [ "$(grep -l "^Uid:.10002" /proc/[0-9]*/status 2>/dev/null | wc -l)" -lt 72 ]; do sleep 0.1; done' 70 20

# 3. A tightening apply while the command that started it still runs.
mkdir -p "$R/workspaces"
rules() { call policy.apply "{\"rules\":\"[{\\\"path\\\":\\\"/workspaces\\\",\\\"access\\\":\\\"$1\\\"}]\"}" | tail -n 1; }
like "policy.apply: /workspaces write" "$(rules write)" '"ok":true.*"complete":true'
P exec --agent alice -- sh -c 'setsid sh -c "exec /data/bin/slow 300" </dev/null >/dev/null 2>&1 & sleep 60' \
	>/dev/null 2>&1 &
KEEP=$!
ok "a trusted command runs beside alice's running command" wait_tools 3
like "policy.apply: /workspaces read (tightening)" "$(rules read)" '"ok":true.*"complete":true'
wait "$KEEP"
back_to_keep
is "... the apply killed the trusted command too" "$(tools)" "$keep"
is "root's pi-tools processes: untouched throughout" "$(tools)" "$keep"
like "a trusted command still works afterwards" \
	"$(P exec --agent alice -- sh -c '/data/bin/slow 0 && echo done' 2>&1)" '^done'

# 4. serve under a pistisd-entry that is not PID 1 (docker run --init, a sidecar): a child
#    subreaper, to which an orphan is re-parented instead of PID 1 (red team, reproduced:
#    the orphaned trusted command outlived the sweeps).
serve_pids() { # the root's pistisd serve (not a pistisd-entry running one)
	local p
	for p in $(root_pids "$R" 0); do
		case "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" in "pistisd serve "*) echo "$p" ;; esac
	done
}
old=$(serve_pids)
kill $old
for _ in $(seq 50); do [ -z "$(serve_pids)" ] && break; sleep 0.1; done
is "the first pistisd serve is gone" "$(serve_pids)" ""
for _ in $(seq 50); do P ls 2>/dev/null | grep -q "s1 *connected" || break; sleep 0.1; done
in_root "$R" env PISTIS_NO_AUDIT_SESSION=1 pistisd-entry --no-prepare --no-harden-mounts \
	--no-restart -- pistisd serve \
	--relay "ws://127.0.0.1:$SP" --token-file /etc/pistis/token --name s1 ${ALLOW:+--allow $ALLOW} \
	>>"$W/pd.log" 2>&1 &
PD=$!
for _ in $(seq 100); do P ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
like "pistisd serve under pistisd-entry is connected" "$(P ls 2>&1)" '^s1 +connected'
new=$(serve_pids)
is "... its parent is pistisd-entry" "$(cat "/proc/$(awk '/^PPid/ {print $2}' "/proc/$new/status")/comm" 2>&1)" pistisd-entry
outlives "under pistisd-entry, an orphaned trusted command" \
	'setsid sh -c "trap \"\" HUP; /data/bin/slow 300 & sleep 0.5; kill -9 \$!" </dev/null >/dev/null 2>&1 & sleep 1'
is "root's pi-tools processes: still untouched" "$(tools)" "$keep"
done_testing
