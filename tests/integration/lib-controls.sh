#!/bin/bash
# Positive controls for lib.sh's measuring helpers. A "nothing left" check (no process of
# the agent, no SysV IPC object, no pty in use, nothing new in /data, an empty TMPDIR)
# passes whenever its helper returns nothing, the helper broken included: a wrong column
# of /proc/sysvipc, pids it cannot see, a path that is not there. Here each helper is
# shown the thing it must count, made by a test uid in a throwaway Debian root, then the
# thing is removed and the count must be back to 0; a measure that cannot be taken (a
# missing directory, no devpts) must fail the check, not read as empty. Root, private
# mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
# An IPC namespace of our own: the host's SysV table is shared with the other tests (a full
# one refuses our objects), and /proc/sysvipc shows the reader's namespace, the same
# columns either way.
[ -n "${LIB_CONTROLS_IPC_NS:-}" ] || LIB_CONTROLS_IPC_NS=1 exec unshare --ipc "$BASH" "$0" "$@"
U=34001 V=34002 G=34009 # G: U's objects' group, so a gid column read as the uid's is caught
S=""
cleanup() {
	[ -n "$S" ] && kill -9 "$S" 2>/dev/null
	ipc_remove $U $V
	root_cleanup
}
trap cleanup EXIT
for u in $U $V; do
	[ "$(ipc_of $u)" = 0 ] || missing "uid $u has SysV IPC objects already"
	[ "$(uid_tasks $u)" = 0 ] || missing "uid $u runs processes already"
done
R=$(root_fresh debian) || missing "no debian root"
R2=$(root_fresh debian) || missing "no second debian root"

# --- root_pids, uid_tasks: processes of a test uid chrooted into the root ---------------
# S, a sleep whose child C it never reaps: C killed stays a zombie (bash would reap a child
# of its own at once). Gid G: a Gid line read as the Uid one is caught.
(exec chroot --userspec=$U:$G "$R" /bin/sh -c '/bin/sleep 300 & exec /bin/sleep 301') &
S=$!
for _ in $(seq 50); do [ "$(root_pids "$R" $U | wc -l)" = 2 ] && break; sleep 0.1; done
C=$(root_pids "$R" $U | grep -vx "$S")
is "root_pids ROOT UID: the two processes of UID in ROOT are seen" \
	"$(root_pids "$R" $U | grep -cx "$S")/$(root_pids "$R" $U | wc -l)" 1/2
is "root_pids ROOT: ... and without a uid" "$(root_pids "$R" | wc -l)" 2
is "root_pids ROOT UID: not as another uid" "$(root_pids "$R" $V)" ""
is "root_pids: not in another root" "$(root_pids "$R2")" ""
is "uid_tasks UID: their two threads are counted" "$(uid_tasks $U)" 2
is "zombies_of: the parent has no zombie child yet" "$(zombies_of "$S")" 0
kill -9 "$C"
for _ in $(seq 50); do
	[ "$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$C/status" 2>/dev/null)" = Z ] && break
	sleep 0.1
done
is "the child killed is a zombie" "$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$C/status")" Z
is "... no process in the root: only its parent is left" "$(root_pids "$R" $U)" "$S"
is "... nor a task of the uid" "$(uid_tasks $U)" 1
is "zombies_of: the parent's zombie child is counted" "$(zombies_of "$S")" 1
kill -9 "$S"
wait "$S" 2>/dev/null
exits 1 "zombies_of: a process that is not there is no count of 0" zombies_of "$S"
exits 1 "... nor is no pid at all" zombies_of ""
S=""
for _ in $(seq 50); do [ -z "$(root_pids "$R")" ] && [ "$(uid_tasks $U)" = 0 ] && break; sleep 0.1; done
is "both gone: root_pids back to 0" "$(root_pids "$R" $U | wc -l)" 0
is "... uid_tasks back to 0" "$(uid_tasks $U)" 0

# A ghost: the main thread exited (a zombie's status, no root of its own) while another
# thread runs on in the root.
(exec chroot --userspec=$U:$G "$R" /usr/local/lib/pistis-tests/probe ghost 300 >/dev/null) &
S=$!
for _ in $(seq 50); do
	[ "$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$S/status" 2>/dev/null)" = Z ] && break
	sleep 0.1
done
is "a ghost's main thread has exited" "$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$S/status")" Z
is "root_pids ROOT UID: the ghost is seen by its running thread's root" "$(root_pids "$R" $U)" "$S"
is "uid_tasks UID: its running thread is counted, not the exited one" "$(uid_tasks $U)" 1
kill -9 "$S"
wait "$S" 2>/dev/null
S=""
for _ in $(seq 50); do [ -z "$(root_pids "$R")" ] && break; sleep 0.1; done
is "... killed: both back to 0" "$(root_pids "$R" | wc -l)/$(uid_tasks $U)" "0/0"

# Real uid V, effective uid U: root_pids goes by the effective uid (as ps -u), uid_tasks by
# the real one (the uid's own processes, whatever they became).
(exec chroot "$R" setpriv --ruid=$V --euid=$U --regid=$G --clear-groups /bin/sleep 300) &
S=$!
for _ in $(seq 50); do [ -n "$(root_pids "$R" $U)" ] && break; sleep 0.1; done
is "root_pids ROOT UID: by the effective uid" "$(root_pids "$R" $U)/$(root_pids "$R" $V)" "$S/"
is "uid_tasks UID: by the real uid" "$(uid_tasks $V)/$(uid_tasks $U)" "1/0"
kill -9 "$S"
wait "$S" 2>/dev/null
S=""
is "... both back to 0" "$(root_pids "$R" | wc -l)/$(uid_tasks $V)" "0/0"

# --- ipc_of: SysV objects made by a test uid --------------------------------------------
as_u() { setpriv --reuid=$U --regid=$G --clear-groups "$@"; }
ok "uid $U makes a shared memory segment" as_u ipcmk -M 4096
is "ipc_of counts it" "$(ipc_of $U)" 1
ok "... a message queue" as_u ipcmk -Q
is "ipc_of counts it" "$(ipc_of $U)" 2
ok "... a semaphore set" as_u ipcmk -S 1
is "ipc_of counts it" "$(ipc_of $U)" 3
is "ipc_of: none of them is another uid's" "$(ipc_of $V)" 0
is "... nor counted for their group's id" "$(ipc_of $G)" 0
ipc_remove $U
is "ipc_remove: ipc_of back to 0" "$(ipc_of $U)" 0

# --- fds_of: this shell's fds -----------------------------------------------------------
n=$(fds_of $$)
like "fds_of: a count" "$n" '^[0-9]+$'
exec 7</dev/null
is "one more opened: counted" "$(fds_of $$)" $((n + 1))
exec 7<&-
is "closed: back to what it was" "$(fds_of $$)" "$n"
exits 1 "a process that is not there has no count of 0" fds_of 999999999
exits 1 "... nor is no pid at all" fds_of ""

# --- ptys_in_use: a pty of the root's own devpts instance -------------------------------
mkdir -p "$R/dev/pts" && mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$R/dev/pts" ||
	missing "cannot mount devpts"
is "ptys_in_use: none at first" "$(ptys_in_use "$R/dev/pts")" 0
exec 3<>"$R/dev/pts/ptmx"
is "one opened: counted" "$(ptys_in_use "$R/dev/pts")" 1
exec 3<&-
is "closed: back to 0" "$(ptys_in_use "$R/dev/pts")" 0
exits 1 "a path that is not there is no count of 0" ptys_in_use "$R/dev/nopts"
exits 1 "... nor a directory with no devpts on it" ptys_in_use "$R/dev"
like "... and says so" "$(ptys_in_use "$R/dev")" '^no devpts at '

# --- entries_in: what an agent's TMPDIR holds -------------------------------------------
T=$R/data/sandbox-home/control/tmp
mkdir -p "$T"
is "entries_in: an empty directory holds nothing" "$(entries_in "$T")" ""
exits 0 "... and that is a count" entries_in "$T"
mkdir "$T/d" && touch "$T/d/f"
is "a file below it is seen" "$(entries_in "$T")" "$T/d
$T/d/f"
rm -r "$T/d"
is "removed: nothing again" "$(entries_in "$T")" ""
exits 1 "a directory that is not there is no empty one" entries_in "$T-not-there"
like "... and says so" "$(entries_in "$T-not-there")" '^cannot list '

# --- new_in: what is new under /data ----------------------------------------------------
L=$(scratch)/data0
find "$R/data" | sort >"$L"
is "new_in: nothing new at first" "$(new_in "$R/data" "$L")" ""
touch "$R/data/sandbox-home/control/new"
is "a new file is seen" "$(new_in "$R/data" "$L")" "$R/data/sandbox-home/control/new"
rm "$R/data/sandbox-home/control/new"
is "removed: nothing new again" "$(new_in "$R/data" "$L")" ""
exits 1 "a directory that is not there is no unchanged one" new_in "$R/data-not-there" "$L"
exits 1 "... nor is a list that is not there" new_in "$R/data" "$L-not-there"
done_testing
