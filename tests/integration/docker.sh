#!/bin/bash
# The static binaries COPY'd into a glibc image (the Debian test root) and a musl image (the
# busybox/musl root), run by a real dockerd under Docker's defaults: default capabilities,
# default seccomp profile, no --privileged. `pistisd users`, `pistisd run` asserted by the
# probe; pistisd-entry as PID 1 starting `pistisd serve`, which dials server-min on the host
# (--network host) and is driven by `pistis`; `docker stop`; a new container on the same
# /data; `pistisd check`; trusted commands; `pistisd policy apply`. A private dockerd (no
# bridge, no iptables) with everything in a scratch directory, removed at exit.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd pi-env pistisd-entry server-min pistis
[ -x "$TESTBIN/probe" ] || missing "$TESTBIN/probe not built"

S=$(scratch)
trap 'kill $SM 2>/dev/null; dockerd_down; umount -l "$S"/trusted/* 2>/dev/null; lib_cleanup' EXIT
SM=""
dockerd_up_or_bail "$S/dockerd"
CGV=$(DK info -f '{{.CgroupVersion}}')
echo "# docker $(DK version -f '{{.Server.Version}}'), cgroup v$CGV"
PROBE=/usr/local/lib/pistis-tests/probe
field() { probe_field "$@"; }
jfield() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1"; }

# --- the images: each root imported, then a Dockerfile that COPYs the binaries ------------
ctx=$S/ctx
mkdir -p "$ctx"
cp "$BIN/pistisd" "$BIN/pi-env" "$BIN/pistisd-entry" "$TESTBIN/probe" "$ctx/"
musl_bin=""
[ -x "$BIN/pistisd-musl" ] && cp "$BIN/pistisd-musl" "$ctx/" && musl_bin=pistisd-musl
for kind in debian musl; do
	tar -C "$("$_lib_dir/roots.sh" "$kind")" --exclude='./proc/*' --exclude='./sys/*' -c . |
		DK import - "pistis-test-$kind-base" >/dev/null
	cat >"$ctx/Dockerfile.$kind" <<EOF
FROM pistis-test-$kind-base
COPY pistisd $musl_bin pi-env pistisd-entry /usr/local/bin/
COPY probe $PROBE
VOLUME /data
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/pistisd-entry"]
EOF
	ok "$kind: docker build of the image (FROM the $kind root, COPY the binaries)" \
		DK build -q -f "$ctx/Dockerfile.$kind" -t "pistis-test-$kind" "$ctx"
done

# --- 1. pistisd users and pistisd run in a default container -------------------------------
for kind in debian musl; do
	I=pistis-test-$kind
	exits 0 "$kind: pistisd users ensure-base, the binary alone (no entry)" \
		DK run --rm --network none --entrypoint /usr/local/bin/pistisd "$I" users ensure-base
	[ -n "$musl_bin" ] && exits 0 "$kind: pistisd-musl users ensure-base" \
		DK run --rm --network none --entrypoint /usr/local/bin/pistisd-musl "$I" users ensure-base
	like "$kind: docker run --read-only: entry stops at ensure-base, saying why" \
		"$(DK run --rm --network none --read-only --tmpfs /tmp "$I" --no-restart -- true 2>&1)" \
		'cannot lock /etc/.pwd.lock: read-only file system: .*docker run --read-only'
	# A long-lived container as a user runs one: entry as PID 1 (it prepares /data and runs
	# ensure-base), a CMD that waits; everything below through docker exec. Its environment
	# carries a secret that must not reach an agent.
	C=$(DK run -d --network none -e PISTIS_TEST_SECRET=hunter2 -v "$S/ws-$kind:/workspaces" "$I" \
		--no-restart -- sleep 600)
	ok "$kind: entry as PID 1 starts the container" test -n "$C"
	# (Linux 6.2 and later answer the removal of an absent ACL with success: entry said it
	# removed both from a brand-new volume at every start)
	for _ in $(seq 50); do DK logs "$C" 2>&1 | grep -q "started '" && break; sleep 0.1; done
	unlike "$kind: entry reports no ACL removed from a new volume" "$(DK logs "$C" 2>&1)" 'had an ACL'
	X() { DK exec "$C" "$@"; }
	json=$(X pistisd users ensure agent/a --json 2>&1)
	is "$kind: users ensure: the first agent uid" "$(echo "$json" | jfield uid)" 10100
	out=$(X pistisd run --agent agent/a -- $PROBE 2>&1)
	probe_confined "$kind" "$out"
	is "$kind: RLIMIT_NOFILE" "$(echo "$out" | field rlimit.NOFILE)" "4096:4096"
	is "$kind: RLIMIT_NPROC" "$(echo "$out" | field rlimit.NPROC)" "512:512"
	is "$kind: the agent env, nothing else" "$(echo "$out" | sed -n 's/^env\.\([A-Z_]*\)=.*/\1/p' | sort | paste -sd' ')" \
		"HOME LOGNAME PATH SHELL TMPDIR USER"
	unlike "$kind: the container's env does not leak" "$out" 'hunter2|HOSTNAME'
	is "$kind: keyctl filtered" "$(echo "$out" | field sc.keyctl)" EPERM
	json=$(X pistisd run --agent agent/a --json -- true 2>&1)
	# Docker mounts cgroupfs read-only: no cgroup for the command, its own audit session
	# instead (a cgroup only where the host gave a writable cgroup2 all the same).
	if [ "$CGV" = 1 ]; then
		like "$kind: --json: the tree is the command's audit session (cgroup v1 host)" "$json" '"tree":"session"'
	else
		like "$kind: --json: the tree is the command's audit session or a cgroup" "$json" '"tree":"(session|cgroup)"'
	fi
	# A setsid()'d grandchild: its command's timeout and end still reach it.
	X pistisd run --agent agent/a --timeout 1 -- sh -c 'setsid sleep 401 </dev/null >/dev/null 2>&1 & sleep 30' \
		>/dev/null 2>&1
	json=$(X pistisd run --agent agent/a --json -- sh -c 'setsid sleep 402 </dev/null >/dev/null 2>&1 &' 2>&1)
	like "$kind: ... what the command left is stopped at its end" "$json" '"left_children_killed":true'
	sleep 0.3
	is "$kind: a setsid()'d grandchild dies with its command's timeout and end" \
		"$(X sh -c 'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\0" " "' | grep -oE 'sleep 40[12]' | sort -u | paste -sd,)" ""
	exits 7 "$kind: exit code passes through" X pistisd run --agent agent/a -- $PROBE exit 7
	exits 137 "$kind: a signal gives 128+N" X pistisd run --agent agent/a -- $PROBE raise 9
	exits 127 "$kind: not found: 127" X pistisd run --agent agent/a -- no-such-command
	is "$kind: stdout alone" "$(X pistisd run --agent agent/a -- sh -c 'echo out; echo err >&2' 2>/dev/null)" out
	is "$kind: stderr alone" "$(X pistisd run --agent agent/a -- sh -c 'echo out; echo err >&2' 2>&1 >/dev/null)" err
	start=$(date +%s%N)
	json=$(X pistisd run --agent agent/a --timeout 0.5 --json -- $PROBE sleep 30 2>&1 >/dev/null)
	ms=$((($(date +%s%N) - start) / 1000000))
	like "$kind: --timeout ends the command" "$json" '"end":"timeout"'
	ok "$kind: ... in ${ms} ms (< 4000)" test "$ms" -lt 4000
	json=$(X pistisd users ensure agent/b --json 2>&1)
	is "$kind: a second agent, the next uid" "$(echo "$json" | jfield uid)" 10101
	eval "C_$kind=$C"
done

# --- 3. pistisd check in a default container --------------------------------------------
for kind in debian musl; do
	eval "C=\$C_$kind"
	json=$(DK exec "$C" pistisd check --json 2>/dev/null)
	st() { echo "$json" | python3 -c 'import json,sys; d={c["name"]: c for c in json.load(sys.stdin)["checks"]}; c=d[sys.argv[1]]; print(c["status"], c["value"])' "$1"; }
	like "$kind: check: seccomp works, under the container's profile, keyctl refused" \
		"$(st seccomp)" '^ok .*container profile.*keyctl refused'
	for c in openat2 close_range account_files; do
		like "$kind: check: $c ok" "$(st $c)" '^ok '
	done
	if [ "$CGV" = 1 ]; then
		like "$kind: check: cgroup2 missing, named" "$(st cgroup2)" '^missing .*cgroup v1'
	fi
	like "$kind: check: proc_hidepid warns (Docker cannot remount /proc)" "$(st proc_hidepid)" '^warn no hidepid'
	like "$kind: check: oom_floor warns: no CAP_SYS_RESOURCE" "$(st oom_floor)" '^warn .*CAP_SYS_RESOURCE'
	like "$kind: check: nosuid_data warns, agents keep no_new_privs" "$(st nosuid_data)" \
		'^warn /data: without nosuid,nodev \(no trusted commands'
	# What fails hard is only what the host's sysctls decide (not namespaced): the same
	# list as the host's own check.
	failed=$(echo "$json" | python3 -c 'import json,sys; print(",".join(c["name"] for c in json.load(sys.stdin)["checks"] if c["hard"] and c["status"] in ("fail","missing")))')
	host=$("$BIN/pistisd" check --json --no-walk 2>/dev/null | python3 -c 'import json,sys; print(",".join(c["name"] for c in json.load(sys.stdin)["checks"] if c["hard"] and c["status"] in ("fail","missing") and c["name"].startswith(("protected_","suid_dumpable"))))')
	is "$kind: check: hard failures are the host's sysctls only" "$failed" "$host"
done
ALLOW=$failed

# --- 5. pistisd policy apply with a /workspaces tree --------------------------------------
for kind in debian musl; do
	eval "C=\$C_$kind"
	X() { DK exec "$C" "$@"; }
	W=$S/ws-$kind
	mkdir -p "$W/proj" "$W/secret" && echo private >"$W/secret/key"
	DK exec -i "$C" sh -c 'cat >/data/pistis/rules.json' <<'J'
[ {"path": "/workspaces", "access": "write"},
  {"path": "/workspaces/secret", "access": "none"} ]
J
	X chmod 0644 /data/pistis/rules.json
	ok "$kind: policy apply" X pistisd policy apply
	is "$kind: write rule: group pi-sandbox, setgid" "$(stat -c '%g %a' "$W/proj")" "10010 2770"
	like "$kind: ... and a default ACL" "$(getfacl -p "$W/proj" 2>/dev/null)" '^default:group::rwx'
	ok "$kind: an agent writes there" X pistisd run --agent agent/a -- sh -c 'echo hi >/workspaces/proj/a'
	is "$kind: ... another agent reads it" "$(X pistisd run --agent agent/b -- cat /workspaces/proj/a 2>&1)" hi
	denied "$kind: a none path cannot be read" X pistisd run --agent agent/a -- cat /workspaces/secret/key
done

# --- 4. trusted commands (the Debian image has sudo) ----------------------------------------
# As docs/entry.md says for Docker: the shared trees mounted nosuid,nodev from outside (tmpfs
# for /tmp, /var/tmp, /run/lock; /data and /workspaces bound from host directories that are
# nosuid mounts, which a bind keeps), entry with --no-harden-mounts.
T=$S/trusted
for d in data ws; do
	mkdir -p "$T/$d" && mount --bind "$T/$d" "$T/$d" && mount -o remount,bind,nosuid,nodev "$T/$d"
done
trusted_box() { # docker run options...
	# (sudo resolves the host name: Debian builds it with fqdn)
	DK run -d --network none --hostname box --add-host box:127.0.1.1 \
		-v "$T/data:/data" -v "$T/ws:/workspaces" \
		--tmpfs /tmp:rw,nosuid,nodev --tmpfs /var/tmp:rw,nosuid,nodev \
		--tmpfs /run/lock:rw,nosuid,nodev "$@" pistis-test-debian --no-harden-mounts \
		--no-restart -- sleep 600
}
C=$(trusted_box)
X() { DK exec "$C" "$@"; }
like "trusted: /data is nosuid,nodev in the container" \
	"$(X sh -c "awk '\$5 == \"/data\" {print \$6}' /proc/self/mountinfo")" 'nosuid,nodev'
DK exec -i "$C" sh -c 'cat >/root/whoami && chmod 0755 /root/whoami' <<'EOF'
#!/bin/sh
echo "trusted as $(id -un)"
EOF
out=$(X pistisd trusted add whoami /root/whoami 2>&1)
is "trusted: add (default capabilities)" "$?" 0
# (as the user users show then names, which must be an agent's: both answers come from
# the code under test)
tid=$(X pistisd run --agent agent/t -- id -un 2>&1)
tname=$(X pistisd users show agent/t | sed -n 's/^name=//p')
like "trusted: an ordinary command still runs once trusted commands are configured" \
	"$tid" '^pi-agent-[0-9a-f]{8}$'
is "... as agent/t's user" "$tid" "$tname"
# Without CAP_SYS_ADMIN no agent can run without no_new_privs under the filter (the
# kernel's rule for seccomp and Landlock): trusted commands cannot work under Docker's
# default capabilities. They fail closed, and add says why.
like "trusted: add says they stay off without CAP_SYS_ADMIN" "$out" \
	'stay off for agents: pistisd lacks CAP_SYS_ADMIN.*--cap-add SYS_ADMIN'
like "trusted: the trusted command, default capabilities: refused by sudo (no_new_privs)" \
	"$(X pistisd run --agent agent/t -- whoami 2>&1)" 'no new privileges'
check_row() { X pistisd check --no-walk 2>&1 | awk -v n="$1" '$1 == n {print $2}'; }
is "trusted: check's trusted_caps warns without CAP_SYS_ADMIN" "$(check_row trusted_caps)" warn
DK rm -f "$C" >/dev/null
C=$(trusted_box --cap-add SYS_ADMIN)
# A new container: /data keeps the scripts, the image's /etc has no drop-in; entry runs
# `pistisd trusted install` before its child.
for _ in $(seq 100); do DK logs "$C" 2>&1 | grep -q "started '" && break; sleep 0.1; done
like "trusted: entry restored the drop-in in the new container" "$(DK logs "$C" 2>&1)" \
	"restored the trusted commands' sudoers drop-in from /data/trusted"
ok "trusted: ... which pistisd trusted check accepts" X pistisd trusted check
is "trusted: check's trusted_caps with CAP_SYS_ADMIN" "$(check_row trusted_caps)" ok
is "trusted: the trusted command with --cap-add SYS_ADMIN" \
	"$(X pistisd run --agent agent/t -- whoami 2>&1)" "trusted as pi-tools"
out=$(X pistisd run --agent agent/t -- $PROBE 2>&1)
is "trusted: ... the agent without no_new_privs" "$(echo "$out" | field NoNewPrivs)" 0
is "trusted: ... bounding = SETUID|SETGID|AUDIT_WRITE" "$(echo "$out" | field CapBnd)" 00000000200000c0
is "trusted: ... seccomp still on" "$(echo "$out" | field Seccomp)" 2
DK rm -f "$C" >/dev/null

# --- 2. pistisd-entry as PID 1 starting pistisd serve, server-min on the host ----------------
volumes_relay_up "$S" debian musl
PC=$BIN/pistis
# The musl sandbox's token as a Kubernetes Secret volume lays it out: a read-only mount
# whose files are links into a timestamped directory (token -> ..data/token, ..data ->
# ..2026_12_02_10_00_00.1), which serve follows within that directory only.
K=$S/secret-musl
mkdir -p "$K/..2026_12_02_10_00_00.1"
cp "$S/data-musl/pistis/token" "$K/..2026_12_02_10_00_00.1/token"
chmod 0400 "$K/..2026_12_02_10_00_00.1/token"
ln -s ..2026_12_02_10_00_00.1 "$K/..data"
ln -s ..data/token "$K/token"
token_opts() { # kind: where its sandbox container finds the token
	if [ "$1" = musl ]; then
		echo "-v $K:/run/secrets/pistis:ro -e PISTIS_TOKEN_FILE=/run/secrets/pistis/token"
	else
		echo "-e PISTIS_TOKEN_FILE=/data/pistis/token"
	fi
}
serve() { # kind [docker run options...]: the sandbox container, detached
	local k=$1
	shift
	DK run -d --name "pistis-test-serve-$k" --network host -v "$S/data-$k:/data" \
		-e PISTIS_RELAY=ws://127.0.0.1:$SP $(token_opts "$k") "$@" "pistis-test-$k" --grace 5
}
for kind in debian musl; do
	out=$(DK run --rm --network host -v "$S/data-$kind:/data" -e PISTIS_RELAY=ws://127.0.0.1:$SP \
		-e PISTIS_TOKEN_FILE=/data/pistis/token "pistis-test-$kind" --no-restart 2>&1)
	rc=$?
	if [ -n "$ALLOW" ]; then
		is "$kind: serve refuses without the opt-outs (the host's sysctls)" "$rc" 1
		like "$kind: ... naming the requirement and the opt-out" "$out" \
			"Refusing to start: hard requirement '[a-z_]+' does not hold \(opt out: --allow"
	fi
	serve "$kind" ${ALLOW:+-e PISTIS_ALLOW=$ALLOW} >/dev/null
	ok "$kind: entry starts serve, which dials server-min on the host$([ "$kind" = musl ] &&
		echo " (its token a Kubernetes Secret's link)")" sandbox_connected "$kind"
	out=$("$PC" exec --sandbox "$kind" --agent a1 -- sh -c 'echo out; echo err >&2; exit 3' 2>"$S/err")
	is "$kind: pistis exec: the command's exit code" "$?" 3
	is "$kind: ... its stdout" "$out" out
	is "$kind: ... its stderr" "$(cat "$S/err")" err
	u1=$("$PC" exec --sandbox "$kind" --agent a1 -- id -u)
	u2=$("$PC" exec --sandbox "$kind" --agent a2 -- id -u)
	ok "$kind: two agents, two uids ($u1, $u2)" test -n "$u1" -a -n "$u2" -a "$u1" != "$u2"
	DK stop -t 15 "pistis-test-serve-$kind" >/dev/null
	is "$kind: docker stop: exit code 143" "$(DK inspect -f '{{.State.ExitCode}}' "pistis-test-serve-$kind")" 143
	log=$(DK logs "pistis-test-serve-$kind" 2>&1)
	like "$kind: ... serve stopped on the signal" "$log" 'pistisd: Signal 15: stopping'
	like "$kind: ... and exited 0 within the grace period" "$log" 'child [0-9]+ exited with status 0'
	DK rm "pistis-test-serve-$kind" >/dev/null
	serve "$kind" ${ALLOW:+-e PISTIS_ALLOW=$ALLOW} >/dev/null
	ok "$kind: a new container on the same /data connects" sandbox_connected "$kind"
	is "$kind: ... the agents keep their uids" \
		"$("$PC" exec --sandbox "$kind" --agent a2 -- id -u) $("$PC" exec --sandbox "$kind" --agent a1 -- id -u)" \
		"$u2 $u1"
	DK rm -f "pistis-test-serve-$kind" >/dev/null
done
done_testing
