#!/bin/bash
# The container configurations platform engineers use beside Docker's defaults (docker.sh
# covers those): capabilities dropped, a non-root user, no-new-privileges, small ulimits,
# pids and memory limits, docker's own --init, namespaces shared with the host, noexec
# tmpfs. Each must give a confined agent (the probe) or a clear, early refusal in one line
# naming the cause, never a weaker sandbox: docs/entry.md, "Restricted containers". A
# private dockerd (no bridge, no iptables) with everything in a scratch directory; the
# Debian test root as the image, built once.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd pi-env pistisd-entry server-min pistis
[ -x "$TESTBIN/probe" ] || missing "$TESTBIN/probe not built"

S=$(scratch)
SHM_KEY=0x7e57c0de
trap 'kill $SM 2>/dev/null; dockerd_down; ipcrm -M $SHM_KEY 2>/dev/null; umount -l "$S"/trusted/* 2>/dev/null; lib_cleanup' EXIT
SM=""
dockerd_up_or_bail "$S/dockerd"
PROBE=/usr/local/lib/pistis-tests/probe
I=pistis-test-debian
ctx=$S/ctx
mkdir -p "$ctx"
cp "$BIN/pistisd" "$BIN/pi-env" "$BIN/pistisd-entry" "$TESTBIN/probe" "$ctx/"
tar -C "$("$_lib_dir/roots.sh" debian)" --exclude='./proc/*' --exclude='./sys/*' -c . |
	DK import - "$I-base" >/dev/null
cat >"$ctx/Dockerfile" <<EOF
FROM $I-base
COPY pistisd pi-env pistisd-entry /usr/local/bin/
COPY probe $PROBE
VOLUME /data
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/pistisd-entry"]
EOF
ok "docker build of the image" DK build -q -t "$I" "$ctx"

# entry as PID 1 with a CMD that waits, or its refusal: the container's id
box() { DK run -d --network none "$@" "$I" --no-restart -- sleep 600; }
started() { # container: entry started its CMD
	for _ in $(seq 50); do DK logs "$1" 2>&1 | grep -q "started '" && return 0; sleep 0.1; done
	return 1
}
ended() { # container: wait until it exited; its exit code
	for _ in $(seq 50); do
		[ "$(DK inspect -f '{{.State.Running}}' "$1")" = false ] && break
		sleep 0.1
	done
	DK inspect -f '{{.State.ExitCode}}' "$1"
}
probe_in() { # container: the first agent's probe report
	DK exec "$1" pistisd users ensure agent/a >/dev/null 2>&1
	DK exec "$1" pistisd run --agent agent/a -- $PROBE 2>&1
}
check_row() { DK exec "$1" pistisd check --no-walk 2>&1 | awk -v n="$2" '$1 == n {$1=""; print}'; }

# --- 1. what pistisd needs, dropped: entry refuses at once, in one line ----------------------
for drop in ALL KILL SETUID; do
	C=$(box --cap-drop "$drop")
	is "--cap-drop $drop: entry exits 111 without starting anything" "$(ended "$C")" 111
	log=$(DK logs "$C" 2>&1)
	is "--cap-drop $drop: ... one line" "$(echo "$log" | wc -l)" 1
	want=CAP_$drop
	[ "$drop" = ALL ] && want='CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_KILL, CAP_SETGID, CAP_SETUID, CAP_SETPCAP'
	like "--cap-drop $drop: ... naming what is missing" "$log" \
		"^pistisd-entry: Refusing to start: the container lacks $want, which pistisd needs"
	DK rm -f "$C" >/dev/null
done
# Without entry: check fails on it (serve refuses on the same verdict), run refuses. Before,
# check said nothing and every command failed at its own step ("setresuid: Operation not
# permitted", "drop bounding set: ..."), and without CAP_KILL a command ran past its
# --timeout and its setsid()'d leftovers outlived it although the result said killed.
for drop in SETGID CHOWN DAC_OVERRIDE FOWNER FSETID SETPCAP; do
	out=$(DK run --rm --network none --cap-drop "$drop" --entrypoint pistisd "$I" check --no-walk \
		--allow protected_symlinks,protected_regular,protected_fifos,protected_hardlinks,suid_dumpable 2>&1)
	like "--cap-drop $drop: check: capabilities fail, naming CAP_$drop" \
		"$(echo "$out" | awk '$1 == "capabilities"')" "fail +yes +root without CAP_$drop \(dropped\)"
	like "--cap-drop $drop: ... the verdict names it" "$out" "hard requirement 'capabilities' does not hold"
done
out=$(DK run --rm --network none --cap-drop KILL --entrypoint pistisd "$I" run --agent a -- true 2>&1)
is "--cap-drop KILL: pistisd run exits 111" "$?" 111
like "--cap-drop KILL: ... naming CAP_KILL" "$out" '^pistisd: Refusing to run: pistisd lacks CAP_KILL'

# --- 2. not root (docker run --user, Kubernetes runAsNonRoot) --------------------------------
C=$(box --user 1000:1000)
is "--user 1000: entry exits 111" "$(ended "$C")" 111
log=$(DK logs "$C" 2>&1)
is "--user 1000: ... one line" "$(echo "$log" | wc -l)" 1
like "--user 1000: ... saying pistisd must be root" "$log" \
	'Refusing to start: pistisd must run as root, and this container runs as uid 1000 \(docker run --user'
DK rm -f "$C" >/dev/null
like "--user 1000: check: capabilities fail, not root" \
	"$(DK run --rm --network none --user 1000 --entrypoint pistisd "$I" check --no-walk 2>&1)" \
	'capabilities +fail +yes +not root \(uid 1000\)'
like "--user 1000: pistisd run says it needs root and names the uid" \
	"$(DK run --rm --network none --user 1000 --entrypoint pistisd "$I" run --agent a -- true 2>&1)" \
	'needs root .*this is uid 1000'

# --- 3. configurations that hold: the probe's confinement ------------------------------------
# docker run --ulimit nofile=64: the agent's limit is the container's (pistisd cannot raise
# a hard limit without CAP_SYS_RESOURCE); before, every command failed at "setrlimit".
C=$(box --ulimit nofile=64)
started "$C"
out=$(probe_in "$C")
probe_confined "--ulimit nofile=64" "$out"
is "--ulimit nofile=64: the agent's RLIMIT_NOFILE is the container's" \
	"$(echo "$out" | probe_field rlimit.NOFILE)" "64:64"
is "--ulimit nofile=64: ... NPROC stays pistisd's own" "$(echo "$out" | probe_field rlimit.NPROC)" "512:512"
DK rm -f "$C" >/dev/null
for opts in "--security-opt no-new-privileges" "--init" "--pids-limit 64 --memory 64m" \
	"--tmpfs /tmp:rw,noexec,nosuid,nodev" "--ipc host --uts host"; do
	# shellcheck disable=SC2086
	C=$(box $opts)
	ok "$opts: entry starts" started "$C"
	probe_confined "$opts" "$(probe_in "$C")"
	case $opts in
	--init) is "--init: entry is PID 2 under docker's init" \
		"$(DK exec "$C" sh -c 'cat /proc/1/comm; for p in /proc/[0-9]*; do [ "$(cat $p/comm)" = pistisd-entry ] && cut -d" " -f4 $p/stat; done' | paste -sd,)" \
		"docker-init,1" ;;
	--ipc*) like "--ipc host --uts host: check warns: host namespaces" \
		"$(check_row "$C" host_namespaces)" '^ warn +- +the host.s ipc, uts namespace' ;;
	esac
	DK rm -f "$C" >/dev/null
done

# --- 4. no-new-privileges with trusted commands: they stay off, and everyone says why --------
T=$S/trusted
for d in data ws; do
	mkdir -p "$T/$d" && mount --bind "$T/$d" "$T/$d" && mount -o remount,bind,nosuid,nodev "$T/$d"
done
C=$(DK run -d --network none --hostname box --add-host box:127.0.1.1 -v "$T/data:/data" \
	-v "$T/ws:/workspaces" --tmpfs /tmp:rw,nosuid,nodev --tmpfs /var/tmp:rw,nosuid,nodev \
	--tmpfs /run/lock:rw,nosuid,nodev --cap-add SYS_ADMIN --security-opt no-new-privileges \
	"$I" --no-harden-mounts --no-restart -- sleep 600)
started "$C"
DK exec -i "$C" sh -c 'cat >/root/whoami && chmod 0755 /root/whoami' <<'EOF'
#!/bin/sh
echo "trusted as $(id -un)"
EOF
like "no-new-privileges: trusted add says they stay off, naming no_new_privs" \
	"$(DK exec "$C" pistisd trusted add whoami /root/whoami 2>&1)" \
	'stay off for agents: pistisd runs with no_new_privs \(docker run --security-opt no-new-privileges'
like "no-new-privileges: check's trusted_caps warns, naming it" "$(check_row "$C" trusted_caps)" \
	'^ warn .*stay off: pistisd runs with no_new_privs'
out=$(probe_in "$C")
is "no-new-privileges: the agent has no_new_privs" "$(echo "$out" | probe_field NoNewPrivs)" 1
is "no-new-privileges: ... and an empty bounding set (no CAP_SETUID kept for a sudo that cannot run)" \
	"$(echo "$out" | probe_field CapBnd)" 0000000000000000
is "no-new-privileges: ... seccomp" "$(echo "$out" | probe_field Seccomp)" 2
fails "no-new-privileges: the trusted command is refused" DK exec "$C" pistisd run --agent agent/a -- whoami
DK rm -f "$C" >/dev/null

# --- 5. namespaces shared with the host: cleanups reach no one else's ------------------------
# An agent uid is every sandbox's (the first agent of each is 10100). Sandbox A runs as
# usual; B's pistisd serve runs with --pid host: at each of its agents' last command's end,
# serve swept by uid (kill(-1) as the agent, and a /proc pass) and killed A's agent's
# process. C's runs with --ipc host: at its start and its commands' ends it removed the
# host's SysV objects of agent uids, as no process holding them was visible.
ALLOW=$("$BIN/pistisd" check --json --no-walk 2>/dev/null | python3 -c 'import json,sys; print(",".join(c["name"] for c in json.load(sys.stdin)["checks"] if c["hard"] and c["status"] in ("fail","missing") and c["name"].startswith(("protected_","suid_dumpable"))))')
volumes_relay_up "$S" b c
PC=$BIN/pistis
serve() { # name [docker run options...]
	local k=$1
	shift
	DK run -d --name "pistis-test-$k" --network host -v "$S/data-$k:/data" \
		-e PISTIS_RELAY=ws://127.0.0.1:$SP -e PISTIS_TOKEN_FILE=/data/pistis/token \
		${ALLOW:+-e PISTIS_ALLOW=$ALLOW} "$@" "$I" --grace 5
}
uid_procs() { # container uid: the command lines of that uid's processes there
	DK exec "$1" sh -c 'for p in /proc/[0-9]*; do [ "$(stat -c %u $p 2>/dev/null)" = '"$2"' ] && tr "\0" " " <$p/cmdline; echo; done' | grep .
}
A=$(box)
started "$A"
DK exec "$A" pistisd users ensure agent/a >/dev/null
DK exec -d "$A" pistisd run --agent agent/a -- sleep 333
for _ in $(seq 50); do uid_procs "$A" 10100 | grep -q 'sleep 333' && break; sleep 0.1; done
serve b --pid host >/dev/null
ok "--pid host: serve connects" sandbox_connected b
like "--pid host: check warns: host namespaces, the sweep's reach named" \
	"$(check_row pistis-test-b host_namespaces)" "^ warn .*the host's pid namespace.*sweep by uid reaches every process"
is "--pid host: B's first agent has A's uid" "$("$PC" exec --sandbox b --agent a -- id -u)" 10100
"$PC" exec --sandbox b --agent a -- sh -c 'setsid sleep 334 </dev/null >/dev/null 2>&1 &'
sleep 0.5
like "--pid host: A's agent's process outlives B's agent's commands" "$(uid_procs "$A" 10100)" 'sleep 333'
unlike "--pid host: ... while B's own command's leftover is gone (its audit session)" \
	"$(uid_procs pistis-test-b 10100)" 'sleep 334'
unlike "--pid host: ... and B's serve killed no process by uid" "$(DK logs pistis-test-b 2>&1)" \
	'killed [0-9]+ process\(es\) that had left'
DK rm -f pistis-test-b >/dev/null
# A SysV segment of uid 10100 in the host's IPC namespace, no process holding it.
python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
os.setgid(10100); os.setuid(10100)
sys.exit(0 if libc.shmget(int(sys.argv[1], 16), 4096, 0o1600) >= 0 else 1)' "$SHM_KEY"
key_dec=$((SHM_KEY))
shm_there() { awk -v k="$key_dec" '$1 == k' /proc/sysvipc/shm | grep -q .; }
ok "--ipc host: a host SysV segment of uid 10100 (made for the test)" shm_there
serve c --ipc host >/dev/null
ok "--ipc host: serve connects" sandbox_connected c
is "--ipc host: C's first agent is uid 10100" "$("$PC" exec --sandbox c --agent a -- id -u)" 10100
sleep 0.3
ok "--ipc host: the host's segment outlives serve's start and C's agent's command" shm_there
like "--ipc host: ... serve says it leaves them" "$(DK logs pistis-test-c 2>&1)" \
	"The IPC namespace is the host's .*left as they are"
DK exec pistis-test-c pistisd run --agent agent/a -- true
ok "--ipc host: ... and pistisd run's end" shm_there
DK rm -f pistis-test-c "$A" >/dev/null
done_testing
