#!/bin/bash
# Red team, what one agent can see of and do through the kernel's shared interfaces: file
# leases on files it owns in a shared tree, the shared scratch directories (/tmp, /dev/shm,
# /var/tmp, /run/lock) and their sticky bit, cgroupfs and /proc/sys. Agent A (uid 31001)
# attacks agent B (uid 31002), both through `pistisd run --root` in a throwaway Debian root.
# Root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
[ -x "$BIN/pistisd" ] && [ -x "$TESTBIN/redteam-probe" ] ||
	missing "pistisd or redteam-probe not built"
RT=/usr/local/lib/pistis-tests/redteam-probe
R=$(root_fresh debian) || missing "root_fresh debian failed"
field() { sed -n "s/^$1=//p" | tr -d '\r' | head -n 1; }
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
kill_agents() {
	local pid
	for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null; done
	for pid in $(root_pids "$R"); do kill -9 "$pid" 2>/dev/null; done
	root_cleanup
}
trap kill_agents EXIT
run() { in_root "$R" pistisd run "$@"; }
A() { run --agent view-a --uid 31001 "$@"; }
B() { run --agent view-b --uid 31002 "$@"; }
A -- /bin/true && B -- /bin/true
ok "two agents, uids 31001 and 31002" test "$(A -- id -u)$(B -- id -u)" = 3100131002
mkdir -p "$R/workspaces" && chmod 1777 "$R/workspaces"

# --- 1. file leases ----------------------------------------------------------------------
# The owner of a file may take a write lease on it; every other open then waits for the
# holder to let go, up to fs.lease-break-time (45 s), which the holder may simply sit out.
# Agents own files in the trees they share: before, B's `cat` of A's file in /workspaces
# waited until A's lease ended (18 s of a 20 s hold), and so would a trusted command's open
# of it, or B's exec of a script there (past the 2 s exec deadline).
A -- sh -c 'echo from-a >/workspaces/a-file; chmod 644 /workspaces/a-file'
A -- "$RT" lease /workspaces/a-file 8 >"$R/tmp/lease.out" 2>&1 &
LJ=$!
for _ in $(seq 50); do grep -q '^lease=' "$R/tmp/lease.out" && break; sleep 0.1; done
is "A cannot take a lease on its own file in /workspaces" "$(field lease <"$R/tmp/lease.out")" EPERM
t=$(date +%s%N)
out=$(B -- timeout 20 cat /workspaces/a-file 2>&1)
ms=$(ms_since "$t")
is "B reads A's file" "$out" from-a
ok "... without waiting on A (${ms} ms)" test "$ms" -lt 3000
kill "$LJ" 2>/dev/null; wait "$LJ" 2>/dev/null

# --- 2. the sticky bit of the shared scratch directories -----------------------------------
# fs.protected_symlinks, _regular and _fifos apply to sticky directories only, and without
# the bit anyone who may write a directory removes and renames what others made there. An
# image made with `chmod 777 /tmp` (common in Dockerfiles) had both, and nothing said so.
serve_setup "$R" # ALLOW: this host's failing hard checks, before /tmp is loosened
chmod 0777 "$R/tmp" "$R/var/tmp"
B -- sh -c 'echo b >/tmp/b-file; mkdir /tmp/b-dir'
out=$(A -- sh -c 'rm -f /tmp/b-file && echo removed; mv /tmp/b-dir /tmp/a-now && echo renamed' 2>&1)
is "a 0777 /tmp: A removes B's file and renames B's directory (what the sticky bit stops)" \
	"$out" "$(printf 'removed\nrenamed')"
out=$(in_root "$R" pistisd check --no-walk 2>&1)
like "pistisd check: sticky_shared fails, naming /tmp and its mode" "$out" \
	'sticky_shared +fail +yes +/tmp: mode 0777, writable by others and not sticky'
out=$(in_root "$R" timeout 10 pistisd serve --relay ws://127.0.0.1:1 --token-file /etc/pistis/token \
	--name s1 ${ALLOW:+--allow "$ALLOW"} 2>&1)
is "pistisd serve refuses to start on it (exit 1)" "$?" 1
like "... saying which requirement" "$out" "hard requirement 'sticky_shared' does not hold"
in_root "$R" /usr/local/bin/pistisd-entry --no-harden-mounts --no-restart -- /bin/true >/dev/null 2>"$R/entry.log"
is "pistisd-entry adds the sticky bit to /tmp and /var/tmp (root's)" \
	"$(stat -c %a "$R/tmp" "$R/var/tmp" | paste -sd' ')" "1777 1777"
like "... and logs it" "$(cat "$R/entry.log")" "'/tmp' was mode 0777, writable by others without the sticky bit: made 1777"
like "pistisd check: sticky_shared ok now" "$(in_root "$R" pistisd check --no-walk 2>&1)" \
	'sticky_shared +ok +yes +/tmp, /dev/shm, /var/tmp, /run/lock: root.s and sticky'
B -- sh -c 'echo b >/tmp/b-file2; mkdir /tmp/b-dir2'
out=$(A -- sh -c 'rm -f /tmp/b-file2 || echo kept; mv /tmp/b-dir2 /tmp/a-now2 || echo kept' 2>/dev/null)
is "sticky: A can neither remove B's file nor rename B's directory" "$out" "$(printf 'kept\nkept')"
# An owner other than root removes anyone's files, sticky or not: refused, not repaired.
chown 31001 "$R/run/lock"
like "pistisd check: a sticky /run/lock an agent owns fails" "$(in_root "$R" pistisd check --no-walk 2>&1)" \
	'sticky_shared +fail +yes +/run/lock: owned by uid 31001'
in_root "$R" /usr/local/bin/pistisd-entry --no-harden-mounts --no-restart -- /bin/true >/dev/null 2>&1
is "... and pistisd-entry does not take it over" "$(stat -c %u "$R/run/lock")" 31001
chown 0 "$R/run/lock"

# --- 3. what held -------------------------------------------------------------------------
# B's command cgroup: A cannot read which processes are in it nor what they use (the
# agent's directory is root:B 0710), and A writes no knob in /proc/sys.
B -- sleep 30 >/dev/null 2>&1 &
BJ=$!
BPID=
for _ in $(seq 50); do
	BPID=$(root_pids "$R" 31002 | head -n 1)
	[ -n "$BPID" ] && grep -q 'sleep' "/proc/$BPID/cmdline" 2>/dev/null && break
	sleep 0.1
done
BCG=$(sed -n 's/^0:://p' "/proc/$BPID/cgroup" 2>/dev/null)
BDIR=
for m in /sys/fs/cgroup /sys/fs/cgroup/unified; do
	[ -n "$BCG" ] && [ "$BCG" != / ] && [ -e "$m$BCG/cgroup.procs" ] && BDIR=$m$BCG && break
done
if [ -n "$BDIR" ]; then
	out=$(A -- sh -c 'for f; do cat "$f" >/dev/null 2>&1 && echo "read $f"; done; ls "${1%/*}" >/dev/null 2>&1 && echo listed; echo done' \
		sh "$BDIR/cgroup.procs" "$BDIR/cgroup.events" "$BDIR/memory.stat" "$BDIR/cpu.stat" \
		"$BDIR/io.stat" "$BDIR/pids.current" "$BDIR/memory.current" 2>&1)
	is "A reads none of B's command cgroup's files, nor lists B's cgroups" "$out" done
else
	skip "B's command cgroup" "no cgroup v2 command cgroups here"
fi
kill "$BJ" 2>/dev/null; wait "$BJ" 2>/dev/null
out=$(A -- sh -c 'for f in $(find /proc/sys -type f -writable 2>/dev/null); do
	(echo 0 >"$f") 2>/dev/null && echo "wrote $f"; done; echo done' 2>&1)
is "A writes no /proc/sys knob (those open to all ask for a capability)" "$out" done
done_testing
