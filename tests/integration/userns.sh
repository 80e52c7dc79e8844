#!/bin/bash
# pistis inside a user namespace, as rootless Docker or Podman, Docker's --userns-remap,
# Kubernetes hostUsers: false and unprivileged LXC run it: "root" is uid 0 of a namespace
# that maps only a range of ids. Emulated cheaply: `unshare --user --mount` and a map that
# root writes from outside (root may write any map into a child's /proc/PID/uid_map), an
# identity map over part of the ids, so the test root's files keep their owners. An id the
# map does not cover cannot be set or given to a file (EINVAL) and shows as 65534; where
# setgroups is denied, no command can drop root's groups. Each must be a clear refusal
# before anything is written, never a half-made agent or a command as another id
# (docs/check.md, id_map; docs/security.md, "User namespaces").
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd pi-env pistisd-entry
[ -x "$TESTBIN/probe" ] || missing "$TESTBIN/probe not built"
if ! unshare --user true 2>/dev/null; then
	missing "no user namespaces here (unshare --user fails)"
fi

S=$(scratch)
PROBE=/usr/local/lib/pistis-tests/probe

# in_userns UIDMAP GIDMAP SETGROUPS ROOT CMD...: CMD chrooted into ROOT (clean environment)
# as root of a new user and mount namespace, whose maps ("A B N" lines, \n between) and
# /proc/PID/setgroups (allow|deny) are written from outside before CMD starts; its exit code.
in_userns() {
	local um=$1 gm=$2 sg=$3 r=$4 go pid rc
	shift 4
	go=$(mktemp -u "$S/go.XXXXXX")
	mkfifo "$go"
	unshare --user --mount --propagation unchanged sh -c 'read _ <"$0" && exec "$@"' "$go" \
		env -i "${_ROOT_ENV[@]}" PISTIS_ALLOW="${PISTIS_ALLOW:-}" chroot "$r" "$@" &
	pid=$!
	for _ in $(seq 200); do
		[ "$(readlink /proc/$pid/ns/user)" != "$(readlink /proc/self/ns/user)" ] && break
		sleep 0.01
	done
	printf '%b' "$um" >/proc/$pid/uid_map && echo "$sg" >/proc/$pid/setgroups &&
		printf '%b' "$gm" >/proc/$pid/gid_map || { kill $pid; wait $pid; return 111; }
	echo go >"$go"
	wait $pid
	rc=$?
	rm -f "$go"
	return $rc
}
isnt() { _tap_result "$([ "$2" != "$3" ] && echo 0 || echo 1)" "$1" "got '$2', want anything else"; }
row() { awk -v n="$1" '$1 == n { $1 = ""; $2 = ""; $3 = ""; sub(/^ +/, ""); print }'; }
status_of() { awk -v n="$1" '$1 == n { print $2 }'; }
pi_lines() { grep -c '^pi-' "$1/etc/passwd" "$1/etc/group" | awk -F: '{ s += $2 } END { print s }'; }

SMALL="0 0 10000\n"  # Docker's userns-remap or LXC with a range of 10,000: no pi-tools, no agents
BASE="0 0 10100\n"   # pi-tools and pi-sandbox, no agent
FULL="0 0 65536\n"   # what Docker, Podman, LXC and Kubernetes give by default

# --- 1. the host's namespace: the row says so -------------------------------------------------
R=$(root_fresh debian)
mark_key "$R"
out=$(in_root "$R" pistisd check --no-walk 2>&1)
is "host: id_map ok" "$(echo "$out" | status_of id_map)" ok
like "host: id_map says the ids are the host's" "$(echo "$out" | row id_map)" "host's user namespace"

# --- 2. a map that covers neither pi-tools nor the agents ----------------------------------
out=$(in_userns "$SMALL" "$SMALL" allow "$R" pistisd check --no-walk 2>&1)
is "0-9999: id_map fails" "$(echo "$out" | status_of id_map)" fail
like "0-9999: ... naming pi-tools' uid and the map" "$(echo "$out" | row id_map)" \
	"uid 10002 \(pi-tools\) is not mapped in this user namespace \(uid_map: 0 0 10000\)"
out=$(in_userns "$SMALL" "$SMALL" allow "$R" pistisd check --no-walk --json 2>&1)
like "0-9999: the JSON names id_map, hard and failed" "$out" \
	'"name": "id_map", "status": "fail", "hard": true'
out=$(in_userns "$SMALL" "$SMALL" allow "$R" pistisd users ensure-base 2>&1)
rc=$?
isnt "0-9999: users ensure-base refuses" "$rc" 0
like "0-9999: ... naming pi-tools' uid" "$out" "uid 10002 \(pi-tools\) is not mapped"
out=$(in_userns "$SMALL" "$SMALL" allow "$R" pistisd users ensure agent/a 2>&1)
rc=$?
isnt "0-9999: users ensure refuses" "$rc" 0
like "0-9999: ... naming the unmapped id, not a bare Invalid argument" "$out" "is not mapped in this user namespace"
is "0-9999: no pi- line written in /etc/passwd or /etc/group" "$(pi_lines "$R")" 0
ok "0-9999: no home made" test ! -e "$R/data/sandbox-home"
out=$(in_userns "$SMALL" "$SMALL" allow "$R" pistisd run --agent agent/a -- id 2>&1)
rc=$?
is "0-9999: pistisd run exits 111" "$rc" 111
like "0-9999: ... naming the unmapped id" "$out" "is not mapped in this user namespace"
unlike "0-9999: ... and ran nothing" "$out" "uid="
is "0-9999: still no pi- line" "$(pi_lines "$R")" 0
printf '#!/bin/sh\necho hi\n' >"$R/tmp/hello.sh"
chmod 0755 "$R/tmp/hello.sh"
out=$(in_userns "$SMALL" "$SMALL" allow "$R" pistisd trusted add hello /tmp/hello.sh 2>&1)
rc=$?
isnt "0-9999: trusted add refuses" "$rc" 0
like "0-9999: ... naming pi-tools' uid" "$out" "Refusing: uid 10002 \(pi-tools\) is not mapped"
ok "0-9999: ... before /data/trusted or the secrets are touched" \
	test ! -e "$R/data/trusted/hello" -a ! -e "$R/data/.secrets"
out=$(in_userns "$SMALL" "$SMALL" allow "$R" pistisd-entry --no-restart -- /bin/echo STARTED 2>&1)
rc=$?
is "0-9999: pistisd-entry exits 111" "$rc" 111
like "0-9999: ... refusing to start, naming the map" "$out" "Refusing to start: uid 10002 \(pi-tools\) is not mapped"
unlike "0-9999: ... without starting its child" "$out" STARTED

# --- 3. pi-tools mapped, the agents not --------------------------------------------------------
out=$(in_userns "$BASE" "$BASE" allow "$R" pistisd check --no-walk 2>&1)
is "0-10099: id_map fails" "$(echo "$out" | status_of id_map)" fail
like "0-10099: ... naming the agents' range" "$(echo "$out" | row id_map)" \
	"uids 10100-59999 \(agents\) are not mapped"
ok "0-10099: users ensure-base works" in_userns "$BASE" "$BASE" allow "$R" pistisd users ensure-base
out=$(in_userns "$BASE" "$BASE" allow "$R" pistisd users ensure agent/a 2>&1)
isnt "0-10099: users ensure of an agent refuses" "$?" 0
like "0-10099: ... naming the agent's uid" "$out" "uid 10100 \(the agent\) is not mapped"
unlike "0-10099: ... a sentence, without strerror(ERANGE) after it" "$out" "not representable|out of range\)"
is "0-10099: no agent line written" "$(grep -c '^pi-agent-' "$R/etc/passwd")" 0
out=$(in_userns "$BASE" "$BASE" allow "$R" pistisd users ensure agent/b agent/c 2>&1)
isnt "0-10099: a batch ensure refuses too" "$?" 0
like "0-10099: ... naming the first agent's uid" "$out" "uid 10100 \(the agent\) is not mapped"
is "0-10099: ... and writes no agent line" "$(grep -c '^pi-agent-' "$R/etc/passwd" "$R/etc/group" | grep -c ':0$')" 2
ok "0-10099: ... nor a registry record" sh -c "! grep -qs ':agent/[bc]$' '$R/data/pistis/users.registry'"
out=$(PISTIS_ALLOW=id_map in_userns "$BASE" "$BASE" allow "$R" pistisd-entry --no-restart -- /bin/echo STARTED 2>&1)
like "0-10099, PISTIS_ALLOW=id_map: entry starts its child" "$out" STARTED
# An agent made before the volume moved into a namespace that does not map it.
in_root "$R" pistisd users ensure agent/old >/dev/null 2>&1
out=$(in_userns "$BASE" "$BASE" allow "$R" pistisd run --agent agent/old -- id 2>&1)
rc=$?
is "0-10099: an existing agent's run exits 111" "$rc" 111
like "0-10099: ... naming its unmapped uid" "$out" "uid 10100 \(the agent\) is not mapped"

# --- 4. 0-65535 mapped: confined as on the host ------------------------------------------------
out=$(in_userns "$FULL" "$FULL" allow "$R" pistisd check --no-walk 2>&1)
is "0-65535: id_map ok" "$(echo "$out" | status_of id_map)" ok
like "0-65535: ... naming the agents' host uids" "$(echo "$out" | row id_map)" \
	"a user namespace: agents' uids 10100-59999 are host uids 10100-59999, pi-tools' 10002"
# CAP_SYS_RESOURCE of a user namespace's root makes no OOM floor: the kernel asks the
# initial namespace (__set_oom_adj); before, the row said "their floor" and the agent below
# lowered its score to pistisd's all the same.
like "0-65535: oom_floor says the floor does not hold here" "$(echo "$out" | row oom_floor)" \
	"held in a user namespace only"
is "0-65535: ... its status warn" "$(echo "$out" | status_of oom_floor)" warn
in_userns "$FULL" "$FULL" allow "$R" pistisd users ensure agent/a >/dev/null 2>&1
out=$(in_userns "$FULL" "$FULL" allow "$R" pistisd run --agent agent/a -- \
	sh -c 'echo 0 >/proc/self/oom_score_adj; cat /proc/self/oom_score_adj' 2>&1)
is "0-65535: ... and indeed an agent lowers its own to pistisd's" "$out" 0
out=$(in_userns "$FULL" "$FULL" allow "$R" pistisd run --agent agent/a -- $PROBE 2>&1)
# agent/old came first: uid 10100; agent/a 10101
is "0-65535: the probe runs as the agent" "$(echo "$out" | probe_field uid)" "10101,10101,10101,10101"
is "0-65535: ... with its groups alone, none of root's" "$(echo "$out" | probe_field groups)" "10010,10101"
is "0-65535: ... no capability (CapEff)" "$(echo "$out" | probe_field CapEff)" 0000000000000000
is "0-65535: ... no bounding set" "$(echo "$out" | probe_field CapBnd)" 0000000000000000
is "0-65535: ... no_new_privs" "$(echo "$out" | probe_field NoNewPrivs)" 1
is "0-65535: ... seccomp" "$(echo "$out" | probe_field Seccomp)" 2

# entry's hardening in a mount namespace the user namespace owns: the flags of the mounts it
# inherits are locked, and a remount repeats them (docs/entry.md, "Mount hardening")
mkdir -p "$R/workspaces"
out=$(in_userns "$FULL" "$FULL" allow "$R" pistisd-entry --no-restart -- \
	pistisd check --no-walk 2>&1)
like "0-65535: entry starts its child" "$out" "started 'pistisd'"
for c in nosuid_data nosuid_workspaces nosuid_shared; do
	is "0-65535: entry made $c hold" "$(echo "$out" | status_of $c)" ok
done

# --- 5. setgroups denied (a map its unprivileged creator wrote) -------------------------------
out=$(in_userns "$FULL" "$FULL" deny "$R" pistisd check --no-walk 2>&1)
is "setgroups deny: id_map fails" "$(echo "$out" | status_of id_map)" fail
like "setgroups deny: ... naming setgroups" "$(echo "$out" | row id_map)" "setgroups\(2\) is denied"
out=$(in_userns "$FULL" "$FULL" deny "$R" pistisd run --agent agent/new -- id 2>&1)
rc=$?
is "setgroups deny: pistisd run exits 111" "$rc" 111
like "setgroups deny: ... refusing up front" "$out" "Refusing to run: setgroups\(2\) is denied"
unlike "setgroups deny: ... ran nothing with root's groups" "$out" "uid="
is "setgroups deny: ... and made no agent" "$(grep -c '^pi-agent-' "$R/etc/passwd")" 2
out=$(in_userns "$FULL" "$FULL" deny "$R" pistisd-entry --no-restart -- /bin/echo STARTED 2>&1)
is "setgroups deny: pistisd-entry exits 111" "$?" 111
like "setgroups deny: ... naming setgroups" "$out" "Refusing to start: setgroups\(2\) is denied"
out=$(in_userns "$FULL" "$FULL" deny "$R" pistisd trusted add hello /tmp/hello.sh 2>&1)
isnt "setgroups deny: trusted add refuses" "$?" 0
like "setgroups deny: ... naming setgroups" "$out" "Refusing: setgroups\(2\) is denied"

# --- 6. files of ids the map does not cover: 65534 to everyone, closed to agents ---------------
mkdir -p "$R/workspaces/p"
echo secret >"$R/workspaces/p/f"
chown 70000:70000 "$R/workspaces/p" "$R/workspaces/p/f"
chmod 0771 "$R/workspaces/p"
chmod 0660 "$R/workspaces/p/f"
out=$(in_userns "$FULL" "$FULL" allow "$R" stat -c '%u:%g' /workspaces/p/f 2>&1)
is "unmapped owner shows as the overflow id" "$out" "65534:65534"
out=$(in_userns "$FULL" "$FULL" allow "$R" pistisd run --agent agent/a -- cat /workspaces/p/f 2>&1)
unlike "an agent cannot read a file of an unmapped owner" "$out" secret
out=$(in_userns "$FULL" "$FULL" allow "$R" setpriv --reuid 65534 --regid 65534 --clear-groups cat /workspaces/p/f 2>&1)
unlike "nor can nobody (65534), whose id the file only shows" "$out" secret
out=$(in_userns "$FULL" "$FULL" allow "$R" pistisd policy apply 2>&1)
like "policy apply: the unmapped node is an error, left no looser" "$out" \
	"error /workspaces/p: .*left no looser than before"
is "policy apply: ... its owner and mode unchanged" "$(stat -c '%u:%g %a' "$R/workspaces/p")" "70000:70000 771"
is "policy apply: ... its file's unchanged" "$(stat -c '%u:%g %a' "$R/workspaces/p/f")" "70000:70000 660"

is "no pi- line on the host" "$(grep -c '^pi-' /etc/passwd /etc/group | awk -F: '{ s += $2 } END { print s }')" 0
done_testing
