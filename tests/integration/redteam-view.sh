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
	{ echo "1..0 # SKIP pistisd or redteam-probe not built"; exit 0; }
RT=/usr/local/lib/pistis-tests/redteam-probe
R=$(root_fresh debian) || { echo "1..0 # SKIP root_fresh debian failed"; exit 0; }
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
done_testing
