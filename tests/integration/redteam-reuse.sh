#!/bin/bash
# Red team: what a removed agent leaves to the next holder of its uid. `users remove
# --forget` gives the uid to the next new agent; SysV IPC objects (shared memory, message
# queues, semaphore sets) are no files and no kill reaches them, so those the old agent
# left (with --keep-children, or made by a command whose `pistisd run` died) were the new
# agent's, owner and creator its uid, with the old agent's bytes in them. remove now takes
# them with the processes, also one the old agent handed to another agent (IPC_SET: the
# creator stays), and keeps them where a process of the uid runs beside another root.
# Debian roots; root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd

PROBE=/usr/local/lib/pistis-tests/probe
A_UID=10900 C_UID=10901 D_UID=10902
cleanup() {
	local p
	for p in $(root_pids "${R:-/nonexistent}") $(root_pids "${R2:-/nonexistent}"); do
		kill -9 "$p" 2>/dev/null
	done
	ipc_remove $A_UID $D_UID $C_UID 10903 # a failed check's (lib.sh)
	root_cleanup
}
trap cleanup EXIT
for u in $A_UID $D_UID $C_UID 10903; do
	[ "$(ipc_of $u)" = 0 ] || missing "uid $u has SysV IPC objects already"
done
R=$(root_fresh debian) || missing "no debian root"
u() { "$BIN/pistisd" users "$@" --root "$R"; }
run() { in_root "$R" pistisd run "$@"; }

# --- 1. objects left by a command whose children were kept --------------------------------
u ensure rt/a --uid $A_UID >/dev/null || exit 1
u ensure rt/c --uid $C_UID >/dev/null || exit 1
out=$(run --agent rt/a --keep-children -- sh -c "$PROBE ipc-leave 65536; (sleep 300 >/dev/null 2>&1 </dev/null &)" 2>&1)
like "a's command leaves a segment, a queue and a semaphore set" "$out" '^ipc=shm:[0-9]+,msg:[0-9]+,sem:[0-9]+$'
is "... and they are there once it ended (its kept child may use them)" "$(ipc_of $A_UID)" 3
# One handed to another agent: owner c, creator still a (IPC_SET cannot change that).
python3 - "$A_UID" "$C_UID" <<'PY'
import ctypes, os, sys
a, c = int(sys.argv[1]), int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
os.setgroups([]); os.setresgid(a, a, a); os.setresuid(a, a, a)
q = libc.msgget(0, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
buf = ctypes.create_string_buffer(256)
assert q >= 0 and libc.msgctl(q, 2, buf) == 0  # IPC_STAT
ctypes.c_uint32.from_buffer(buf, 4).value = c  # ipc_perm.uid: the new owner
assert libc.msgctl(q, 1, buf) == 0  # IPC_SET
PY
is "a's queue handed to c: a still made it" "$(awk -v a=$A_UID -v c=$C_UID 'NR > 1 && $8 == c && $10 == a' /proc/sysvipc/msg | wc -l)" 1
is "a has 4 objects (made or owned)" "$(ipc_of $A_UID)" 4

out=$(u remove rt/a --forget 2>&1); rc=$?
is "remove --forget a exits 0" "$rc" 0
like "... it killed a's kept child" "$out" "killed 1 process\\(es\\) of agent 'rt/a' first"
like "... and says it removed the objects a left" "$out" "removed 4 SysV IPC object\\(s\\) agent 'rt/a' left"
is "... none of a's objects is left" "$(ipc_of $A_UID)" 0
is "... the one handed to c too" "$(ipc_of $C_UID)" 0
is "... no process runs as the uid" "$(uid_tasks $A_UID)" 0

# The next agent given the uid finds nothing of a's.
is "b gets a's uid" "$(u ensure rt/b --uid $A_UID | sed -n 's/^uid=//p')" "$A_UID"
out=$(run --agent rt/b -- sh -c 'cat /proc/sysvipc/msg /proc/sysvipc/shm' 2>&1)
unlike "b's command sees no queue or segment of its uid" "$(echo "$out" | awk -v u=$A_UID 'NR > 1 && ($8 == u || $10 == u)')" .
# a's old home is b's uid's now: ensuring a again (a new uid) cannot take it over, and is
# refused before anything is written (it recorded a as active, with no home, before).
reg_before=$(cat "$R/data/pistis/users.registry")
out=$(u ensure rt/a --uid 10904 2>&1); rc=$?
ok "ensure a again while its old home has b's uid: refused (rc=$rc)" test "$rc" -ne 0
like "... naming the home and its owner" "$out" \
	"/data/sandbox-home/pi-agent-[0-9a-f]*: it exists with another owner \\(uid $A_UID"
is "... nothing written to the registry" "$(cat "$R/data/pistis/users.registry")" "$reg_before"
unlike "... and no passwd line for uid 10904" "$(cat "$R/etc/passwd")" ':10904:'

# --- 2. plain remove (the uid stays reserved) takes them too -----------------------------
leave() { run --agent "$1" --keep-children -- sh -c \
	"$PROBE ipc-leave 4096 >/dev/null; (sleep 300 >/dev/null 2>&1 </dev/null &)" >/dev/null 2>&1; }
leave rt/c
is "c left 3 objects" "$(ipc_of $C_UID)" 3
out=$(u remove rt/c 2>&1); rc=$?
is "remove c exits 0" "$rc" 0
is "... c's objects are gone" "$(ipc_of $C_UID)" 0
# --keep-processes: they may still use them; kept.
u ensure rt/c >/dev/null
leave rt/c
out=$(u remove rt/c --keep-processes 2>&1); rc=$?
is "remove --keep-processes exits 0" "$rc" 0
is "... c's objects stay with its processes" "$(ipc_of $C_UID)" 3
out=$(u remove rt/c --forget 2>&1)
is "... a later remove --forget takes both" "$(ipc_of $C_UID) $(uid_tasks $C_UID)" "0 0"

# --- 3. the uid still runs beside another root: SysV IPC is not per root, kept -----------
R2=$(root_fresh debian) || { echo "Bail out! no second debian root"; exit 1; }
in_root "$R2" pistisd users ensure rt/d --uid $D_UID >/dev/null || exit 1
(in_root_exec "$R2" pistisd run --agent rt/d -- sleep 300 >/dev/null 2>&1) &
u ensure rt/d --uid $D_UID >/dev/null
leave rt/d
for _ in $(seq 50); do [ -n "$(root_pids "$R2" $D_UID)" ] && break; sleep 0.1; done
out=$(u remove rt/d --forget 2>&1); rc=$?
is "remove d in one root, d runs in the other: exits 0" "$rc" 0
like "... says why it keeps the objects" "$out" "left 3 SysV IPC object\\(s\\), kept: a process of uid $D_UID runs"
is "... they stay for the other root's d" "$(ipc_of $D_UID)" 3
ok "... whose process still runs" test -n "$(root_pids "$R2" $D_UID)"

# --- 4. a process of the agent's started while remove waits (after its first sweep) -------
# What serve starts for the agent between remove's kill and its registry write would run
# on as the uid's next holder: remove sweeps again once the agent is gone. The window is
# held open with /etc/.pwd.lock, the lock users_remove waits for.
E_UID=10903
u ensure rt/e --uid $E_UID >/dev/null || exit 1
S=$(scratch)
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "a"); fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[2], "w").close(); time.sleep(3)' "$R/etc/.pwd.lock" "$S/locked" &
LK=$!
for _ in $(seq 50); do [ -e "$S/locked" ] && break; sleep 0.1; done
u remove rt/e --forget >"$S/rm.out" 2>&1 &
RM=$!
sleep 1 # remove has swept once and waits for the lock
(in_root_exec "$R" setpriv --reuid $E_UID --regid $E_UID --clear-groups sleep 300 \
	>/dev/null 2>&1 </dev/null &)
for _ in $(seq 20); do [ -n "$(root_pids "$R" $E_UID)" ] && break; sleep 0.1; done
ok "a process of e runs while remove waits" test -n "$(root_pids "$R" $E_UID)"
wait $RM
is "remove e --forget exits 0" "$?" 0
wait $LK
like "... says it killed what started meanwhile" "$(cat "$S/rm.out")" \
	"killed 1 process\\(es\\) of agent 'rt/e' started while it was being removed"
is "... nothing of e's uid runs" "$(uid_tasks $E_UID)" 0
rm -rf "$S"

# --- 5. keys from 0x80000000 up: /proc/sysvipc prints them negative ----------------------
# The parser took a line whose key column began with '-' for a header and skipped the
# object: run's clean-up, serve's and remove's all missed it, and the next holder of the
# uid read the old agent's segment (red team).
u ensure rt/f --uid $E_UID >/dev/null || exit 1
out=$(run --agent rt/f -- "$PROBE" ipc-leave-key 4096 2>&1)
like "f's command leaves three objects under keys past 0x80000000" "$out" '^ipc=shm:[0-9]+,msg:[0-9]+,sem:[0-9]+$'
like "... run says it removed all three" "$out" "removed 3 SysV IPC object\\(s\\) agent 'pi-agent-[0-9a-f]*' left"
is "... none is left" "$(ipc_of $E_UID)" 0
run --agent rt/f --keep-children -- sh -c \
	"$PROBE ipc-leave-key 4096 >/dev/null; (sleep 300 >/dev/null 2>&1 </dev/null &)" >/dev/null 2>&1
is "kept: f's three keyed objects stay with its child" "$(ipc_of $E_UID)" 3
out=$(u remove rt/f --forget 2>&1)
like "... remove --forget says it removed them" "$out" "removed 3 SysV IPC object\\(s\\) agent 'rt/f' left"
is "... none is left" "$(ipc_of $E_UID) $(uid_tasks $E_UID)" "0 0"

# --- 6. a leftover slow to die: run's clean-up waits for what it killed -------------------
# A leftover holding 256 MiB, killed at the command's end, tears its memory down for a
# while, no zombie yet: run took it for a process of the agent's still running and kept
# the objects, in every run here (red team, with 2 GiB).
u ensure rt/g --uid $E_UID >/dev/null || exit 1
kept=0
for _ in 1 2 3; do
	run --agent rt/g -- sh -c "$PROBE ipc-leave 4096 >/dev/null; ($PROBE hold-mem 256 >/tmp/held &)
		for _ in \$(seq 200); do grep -q held /tmp/held 2>/dev/null && break; sleep 0.05; done" \
		>/dev/null 2>&1
	[ "$(ipc_of $E_UID)" = 0 ] || kept=$((kept + 1))
	ipc_remove $E_UID
done
is "a leftover holding 256 MiB, killed at the end: objects kept in 0 of 3 runs" "$kept" 0
is "... and nothing of the agent's runs" "$(uid_tasks $E_UID)" 0

done_testing
