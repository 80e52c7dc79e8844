# Shell TAP helpers for integration tests. Source it: `. "$(dirname "$0")/lib.sh"`.
# Binaries come from $PISTIS_BUILD/bin (default build/bin); tests run as root and never
# touch the host's /etc, /data or sudoers: use throwaway roots (tests/roots.sh) and
# mount namespaces (unshare -m).
set -u
PISTIS_BUILD=${PISTIS_BUILD:-build}
case "$PISTIS_BUILD" in /*) ;; *) PISTIS_BUILD=$(pwd)/$PISTIS_BUILD ;; esac
BIN=$PISTIS_BUILD/bin
TESTBIN=$PISTIS_BUILD/tests
_tap_n=0
_tap_failed=0

_tap_result() { # status desc [detail]
	_tap_n=$((_tap_n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $_tap_n - $2"
	else
		echo "not ok $_tap_n - $2"
		_tap_failed=$((_tap_failed + 1))
		[ -n "${3:-}" ] && printf '%s\n' "$3" | sed 's/^/#   /' | head -n 40
	fi
	return 0
}

plan() { echo "1..$1"; }

# ok DESC CMD...   passes when CMD exits 0; shows CMD's output when it fails
ok() {
	_d=$1; shift
	_out=$("$@" 2>&1); _rc=$?
	_tap_result "$([ $_rc -eq 0 ] && echo 0 || echo 1)" "$_d" "exit $_rc: $_out"
}

# fails DESC CMD...   passes when CMD exits non-zero
fails() {
	_d=$1; shift
	_out=$("$@" 2>&1); _rc=$?
	_tap_result "$([ $_rc -ne 0 ] && echo 0 || echo 1)" "$_d" "expected failure, got exit 0: $_out"
}

# denied DESC CMD...   passes when CMD fails for want of permission (EACCES or EPERM: its
#                     output says "Permission denied" or "Operation not permitted"), not
#                     because the file is missing or the command could not run at all
denied() {
	_d=$1; shift
	_out=$("$@" 2>&1); _rc=$?
	if [ $_rc -ne 0 ] && printf '%s\n' "$_out" | grep -qE 'Permission denied|Operation not permitted'; then
		_tap_result 0 "$_d"
	else
		_tap_result 1 "$_d" "expected a refusal (EACCES/EPERM), got exit $_rc: $_out"
	fi
}

# exits CODE DESC CMD...   passes when CMD exits with exactly CODE
exits() {
	_c=$1; _d=$2; shift 2
	_out=$("$@" 2>&1); _rc=$?
	_tap_result "$([ $_rc -eq "$_c" ] && echo 0 || echo 1)" "$_d" "expected exit $_c, got $_rc: $_out"
}

# is DESC GOT WANT
is() {
	_tap_result "$([ "$2" = "$3" ] && echo 0 || echo 1)" "$1" "got:  '$2'
want: '$3'"
}

# grep -E takes each line of a pattern as one more alternative: an empty one (an empty
# pattern, a blank line in a multi-line one, a trailing newline) matches every input, so
# like would pass whatever it got and unlike fail. Such a pattern is the test's bug.
_tap_empty_pattern() {
	case "$1" in '' | $'\n'* | *$'\n' | *$'\n\n'*) return 0 ;; esac
	return 1
}

# like DESC GOT REGEX (grep -E)
like() {
	if _tap_empty_pattern "$3"; then
		_tap_result 1 "$1" "the pattern '$3' has an empty line: it matches anything"
	elif printf '%s\n' "$2" | grep -Eq -- "$3"; then _tap_result 0 "$1"; else
		_tap_result 1 "$1" "got: '$2'
does not match: '$3'"; fi
}

# unlike DESC GOT REGEX
unlike() {
	if _tap_empty_pattern "$3"; then
		_tap_result 1 "$1" "the pattern '$3' has an empty line: it matches anything"
	elif printf '%s\n' "$2" | grep -Eq -- "$3"; then _tap_result 1 "$1" "got: '$2'
matches: '$3'"; else _tap_result 0 "$1"; fi
}

skip() { _tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $1 # SKIP ${2:-}"; }

# untested DESC WHY: DESC could not be checked for want of WHY (a tool scripts/bootstrap.sh
# check installs, a binary the build makes): a failure, and the test goes on.
untested() { _tap_result 1 "$1" "untested: $2"; }

# missing WHAT: a prerequisite of the whole test is not there (a binary not built, no test
# root, a tool scripts/bootstrap.sh check installs): a failure that says so, and the end of
# the test. Never a skip: a test that did not run must not look green (tests/run.sh fails
# a "1..0" plan as well).
missing() {
	_tap_result 1 "prerequisite: $1" "$1"
	echo "Bail out! $1"
	done_testing
	exit 1
}

done_testing() {
	echo "1..$_tap_n"
	[ "$_tap_failed" -eq 0 ]
}

need_root() {
	[ "$(id -u)" = 0 ] || missing "needs root"
}

# need_bins NAME...: fail the whole test unless every $BIN/NAME is built.
need_bins() {
	local b
	for b; do
		[ -x "$BIN/$b" ] || missing "$BIN/$b not built"
	done
}

# A scratch directory removed when the test exits. `d=$(scratch)` runs in a subshell,
# so the directory carries the test's PID ($$ is the same in subshells) and the EXIT
# trap set below (lib_cleanup) removes every one of them; a trap set in here would fire
# as soon as the $(...) subshell ended.
# mark_key ROOT: the policy walk's closing-mark key in ROOT/data/pistis as `pistisd users
# ensure-base` makes it (32 random bytes, root 0600; tests/integration/users.sh checks that
# one), for roots with no /etc to ensure; walks only read it (docs/policy.md).
mark_key() {
	mkdir -p "$1/data/pistis" && chmod 0755 "$1/data" "$1/data/pistis" &&
		head -c 32 /dev/urandom >"$1/data/pistis/mark.key" &&
		chmod 0600 "$1/data/pistis/mark.key"
}

scratch() {
	mktemp -d "${TMPDIR:-/tmp}/pistis-test.$$.XXXXXX"
}

# need_python_root          python3 there and R a fresh Debian root (root_fresh; else the
#                           test fails: missing), W a scratch directory: how the tests of
#                           serve and the relay start, after need_bins.
need_python_root() {
	command -v python3 >/dev/null || missing "no python3"
	R=$(root_fresh debian) || missing "no debian test root"
	W=$(scratch)
}

# serve_test_cleanup        the EXIT trap of those tests: the test's background jobs, PD
#                           (pistisd serve) and SM (server-min) where set, every process
#                           left in R killed, waited for, then root_cleanup.
serve_test_cleanup() {
	local pid
	for pid in $(jobs -p); do kill "$pid" 2>/dev/null; done
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	for pid in $(root_pids "$R"); do kill -KILL "$pid" 2>/dev/null; done
	wait 2>/dev/null
	root_cleanup
}

# --- throwaway roots ------------------------------------------------------------------
# root_fresh debian|trixie|musl   prints the path of a fresh writable root: an overlay
#                          over the cached base (tests/roots.sh; debian is trixie's where
#                          PISTIS_TEST_DEBIAN=trixie) on a private tmpfs, with /proc,
#                          a minimal /dev, /sys read-only, a tmpfs /tmp, and the build's
#                          bin/ and tests/ bind-mounted read-only at /usr/local/bin and
#                          /usr/local/lib/pistis-tests. Only inside a private mount
#                          namespace (tests/run.sh gives each test one; need_mount_ns).
# in_root ROOT CMD...      CMD chrooted into ROOT with a clean environment; its exit code.
# root_cleanup             unmount and remove this test's roots and scratch dirs (runs on
#                          EXIT; call it from your own EXIT trap if you set one).
_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# In a private mount namespace that scripts/in-private-ns made (it names it in
# PISTIS_MNT_NS). Not "differs from PID 1's": where /proc/1/ns/mnt cannot be read (PID 1
# out of reach, as on some VMs), that was true in the host's own namespace, and a test run
# by hand left its mounts there.
in_private_mount_ns() {
	[ -n "${PISTIS_MNT_NS:-}" ] && [ "$PISTIS_MNT_NS" = "$(readlink /proc/self/ns/mnt)" ]
}

# Re-run this test in a private mount namespace unless it already is in one (tests/run.sh
# does that for every *.sh as root; this covers running a test by hand).
need_mount_ns() {
	in_private_mount_ns && return 0
	exec "$_lib_dir/../scripts/in-private-ns" bash "$0" "$@"
}

root_fresh() {
	local kind=${1:-} base d
	case "$kind" in debian | trixie | musl) ;; *)
		echo "root_fresh: debian|trixie|musl, not '$kind'" >&2
		return 100 ;;
	esac
	# PISTIS_TEST_DEBIAN=trixie: every test's Debian root is the Debian 13 one (a run by
	# hand over the newer userland; `make check` uses bookworm). One that cannot be built
	# is a failed root_fresh, as a missing bookworm one is: never bookworm's instead.
	if [ "$kind" = debian ] && [ -n "${PISTIS_TEST_DEBIAN:-}" ]; then
		case "$PISTIS_TEST_DEBIAN" in bookworm) ;; trixie) kind=trixie ;; *)
			echo "root_fresh: PISTIS_TEST_DEBIAN is bookworm or trixie, not '$PISTIS_TEST_DEBIAN'" >&2
			return 100 ;;
		esac
	fi
	if ! in_private_mount_ns; then
		echo "root_fresh: refusing: not in a private mount namespace (mounts would leak to the host)" >&2
		return 111
	fi
	base=$("$_lib_dir/roots.sh" "$kind") || return 111
	d=$(mktemp -d "${TMPDIR:-/tmp}/pistis-root.$$.XXXXXX") || return 111
	# Everything the test writes lives on this tmpfs, so it dies with the namespace even
	# when the test is killed before root_cleanup runs.
	mount -t tmpfs -o mode=0700,size=1g pistis-root "$d" || return 111
	mkdir "$d/upper" "$d/work" "$d/root"
	mount -t overlay overlay -o "lowerdir=$base,upperdir=$d/upper,workdir=$d/work" "$d/root" ||
		return 111
	local r=$d/root
	_root_bind_ro "$PISTIS_BUILD/bin" "$r/usr/local/bin" || return 111
	_root_bind_ro "$PISTIS_BUILD/tests" "$r/usr/local/lib/pistis-tests" || return 111
	mount -t proc -o nosuid,nodev,noexec proc "$r/proc" || return 111
	mkdir -p "$r/sys" && mount --rbind /sys "$r/sys" && mount -o remount,bind,ro "$r/sys" ||
		return 111
	mount -t tmpfs -o mode=1777,nosuid,nodev pistis-tmp "$r/tmp" || return 111
	mkdir -p "$r/dev" && mount -t tmpfs -o mode=0755,nosuid,size=1m pistis-dev "$r/dev" ||
		return 111
	local n
	for n in null zero full random urandom tty; do
		[ -e "/dev/$n" ] || continue
		touch "$r/dev/$n" && mount --bind "/dev/$n" "$r/dev/$n" || return 111
	done
	ln -s /proc/self/fd "$r/dev/fd"
	ln -s /proc/self/fd/0 "$r/dev/stdin"
	ln -s /proc/self/fd/1 "$r/dev/stdout"
	ln -s /proc/self/fd/2 "$r/dev/stderr"
	mkdir -m 1777 "$r/dev/shm"
	echo "$r"
}

# serve_setup ROOT: what `pistisd serve` in ROOT needs to dial a relay: the sandbox token
# at /etc/pistis/token (root-only), and in ALLOW the hard start-up requirements this host's
# kernel does not meet (not namespaced: not ours to change), for `--allow "$ALLOW"`.
serve_setup() {
	mkdir -p "$1/etc/pistis"
	head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$1/etc/pistis/token"
	chmod 600 "$1/etc/pistis/token"
	ALLOW=$(in_root "$1" pistisd check --no-walk 2>/dev/null |
		awk '$3 == "yes" && ($2 == "fail" || $2 == "missing") {print $1}' | paste -sd, -)
}

# relay_config ROOT DIR: what a test needs before it starts server-min and `pistisd serve`
# in ROOT: serve_setup (so --allow "$ALLOW"), two loopback ports in SP (sandboxes) and CP
# (clients), DIR/pistis.json naming sandbox s1 with ROOT's token, and PISTIS_URL and
# PISTIS_TOKEN exported for `pistis`.
relay_config() {
	local r=$1 w=$2
	SP=$((20000 + RANDOM % 12000))
	CP=$((SP + 1))
	serve_setup "$r"
	export PISTIS_TEST_CT=client-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
	cat >"$w/pistis.json" <<J
{
  "listen": {"sandbox": "127.0.0.1:$SP", "client": "127.0.0.1:$CP"},
  "client_token": "\${PISTIS_TEST_CT}",
  "sandboxes": [{"name": "s1", "token": "$(cat "$r/etc/pistis/token")"}]
}
J
	export PISTIS_URL=ws://127.0.0.1:$CP PISTIS_TOKEN=$PISTIS_TEST_CT
}

# fake_relay_run ROOT DIR SCRIPT [ARG...]: a relay of the test's own (python3 SCRIPT PORT
# TOKEN ARG..., its output in DIR/out) on a loopback port, and `pistisd serve` in ROOT
# (serve_setup first) dialling it as s1 (PD, its log DIR/pd.log), with SERVE_ARGS (words)
# after its own options; returns when SCRIPT ends.
fake_relay_run() {
	local r=$1 w=$2 script=$3 port=$((20000 + RANDOM % 12000)) fk
	shift 3
	python3 "$script" "$port" "$(cat "$r/etc/pistis/token")" "$@" >"$w/out" 2>&1 &
	fk=$!
	sleep 0.3
	(in_root_exec "$r" pistisd serve --relay "ws://127.0.0.1:$port" \
		--token-file /etc/pistis/token --name s1 ${ALLOW:+--allow $ALLOW} ${SERVE_ARGS:-}) \
		>"$w/pd.log" 2>&1 &
	PD=$!
	wait "$fk"
}

# wait_port PORT: 0 once something accepts on 127.0.0.1:PORT, 1 if nothing does within 10 s.
wait_port() {
	for _ in $(seq 100); do
		python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), 1)" 2>/dev/null &&
			return 0
		sleep 0.1
	done
	return 1
}

# relay_up ROOT DIR: relay_config, then server-min and `pistisd serve` in ROOT dialling it as
# sandbox s1, with SERVE_ENV (NAME=VALUE words) in its environment. Sets SM and PD (the two
# pids, for the caller's cleanup); the logs are DIR/smin.log and DIR/pd.log. 0 once s1 is connected, 1 if it is not within 10 s.
relay_up() {
	local r=$1 w=$2
	relay_config "$r" "$w"
	"$BIN/server-min" --config "$w/pistis.json" >>"$w/smin.log" 2>&1 &
	SM=$!
	(in_root_exec "$r" ${SERVE_ENV:-} pistisd serve --relay "ws://127.0.0.1:$SP" \
		--token-file /etc/pistis/token --name s1 ${ALLOW:+--allow $ALLOW} ${SERVE_ARGS:-}) \
		>"$w/pd.log" 2>&1 &
	PD=$!
	for _ in $(seq 100); do
		"$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && return 0
		sleep 0.1
	done
	return 1
}

# volumes_relay_up DIR NAME...: for containers that each mount DIR/data-NAME as /data, a
# token in each (data-NAME/pistis/token), DIR/pistis.json naming the sandboxes NAME... on
# two loopback ports (SP for sandboxes, CP for clients), PISTIS_URL and PISTIS_TOKEN
# exported for `pistis`, and server-min started (SM; its log DIR/smin.log).
volumes_relay_up() {
	local d=$1 k sbs="" sep=""
	shift
	SP=$((20000 + RANDOM % 12000))
	CP=$((SP + 1))
	export PISTIS_TEST_CT=client-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
	for k in "$@"; do
		mkdir -p "$d/data-$k/pistis"
		head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$d/data-$k/pistis/token"
		chmod 600 "$d/data-$k/pistis/token"
		sbs+="$sep{\"name\": \"$k\", \"token\": \"$(cat "$d/data-$k/pistis/token")\"}"
		sep=", "
	done
	cat >"$d/pistis.json" <<J
{
  "listen": {"sandbox": "127.0.0.1:$SP", "client": "127.0.0.1:$CP"},
  "client_token": "\${PISTIS_TEST_CT}",
  "sandboxes": [$sbs]
}
J
	export PISTIS_URL=ws://127.0.0.1:$CP PISTIS_TOKEN=$PISTIS_TEST_CT
	"$BIN/server-min" --config "$d/pistis.json" >"$d/smin.log" 2>&1 &
	SM=$!
}

# sandbox_connected NAME: 0 once `pistis ls` shows sandbox NAME connected, 1 if it does not
# within 10 s.
sandbox_connected() {
	for _ in $(seq 100); do
		"$BIN/pistis" ls 2>/dev/null | grep -q "^$1  *connected" && return 0
		sleep 0.1
	done
	return 1
}

# harden_shared ROOT: the trees agents share (trusted/trusted.h TRUSTED_SHARED_TREES) bound
# onto themselves nosuid,nodev, as pistisd-entry leaves a sandbox; /data and /workspaces
# are made first. Trusted commands (agents without no_new_privs) are on only then.
harden_shared() {
	local d
	mkdir -p "$1/data" "$1/workspaces" || return 111
	for d in data workspaces workspace tmp dev/shm var/tmp run/lock; do
		[ -d "$1/$d" ] && [ ! -L "$1/$d" ] || continue
		mount --bind "$1/$d" "$1/$d" && mount -o remount,bind,nosuid,nodev "$1/$d" || return 111
	done
}

_root_bind_ro() { # src dst
	[ -d "$1" ] || return 0
	mkdir -p "$2" && mount --bind "$1" "$2" && mount -o remount,bind,ro "$2"
}

# probe_field NAME: the value of NAME= in the probe's report on stdin (first line only)
probe_field() { sed -n "s/^$1=//p" | tr -d '\r' | head -n 1; }

# probe_confined LABEL REPORT: what every command of the first agent (uid 10100) shows in
# the probe's report, wherever it runs: its ids and groups, no capability, no_new_privs,
# the seccomp filter, fds 0-2 only, umask 0007, its own session without a terminal, and
# the limits (no core, no POSIX message queue, no real-time policy, no lower nice value).
probe_confined() {
	local k=$1 out=$2 c
	is "$k: ids are the agent's" "$(echo "$out" | probe_field uid)" "10100,10100,10100,10100"
	is "$k: gids are the agent's" "$(echo "$out" | probe_field gid)" "10100,10100,10100,10100"
	is "$k: groups: own + pi-sandbox" "$(echo "$out" | probe_field groups)" "10010,10100"
	for c in CapInh CapPrm CapEff CapBnd CapAmb; do
		is "$k: $c empty" "$(echo "$out" | probe_field $c)" "0000000000000000"
	done
	is "$k: no_new_privs" "$(echo "$out" | probe_field NoNewPrivs)" 1
	is "$k: seccomp filter" "$(echo "$out" | probe_field Seccomp)" 2
	is "$k: only fds 0-2" "$(echo "$out" | probe_field fds)" "0,1,2"
	is "$k: umask" "$(echo "$out" | probe_field umask)" "0007"
	is "$k: own session" "$(echo "$out" | probe_field sid)" "$(echo "$out" | probe_field pid)"
	is "$k: no controlling tty" "$(echo "$out" | probe_field devtty)" ENXIO
	is "$k: RLIMIT_CORE 0" "$(echo "$out" | probe_field rlimit.CORE)" "0:0"
	is "$k: RLIMIT_MSGQUEUE 0" "$(echo "$out" | probe_field rlimit.MSGQUEUE)" "0:0"
	is "$k: ... so no POSIX message queue can be made" "$(echo "$out" | probe_field mq_create)" EMFILE
	is "$k: RLIMIT_RTPRIO 0" "$(echo "$out" | probe_field rlimit.RTPRIO)" "0:0"
	is "$k: ... so no real-time scheduling" "$(echo "$out" | probe_field sched_fifo)" EPERM
	is "$k: RLIMIT_NICE 0" "$(echo "$out" | probe_field rlimit.NICE)" "0:0"
	is "$k: ... so no nice value below pistisd's" "$(echo "$out" | probe_field nice_lower)" EACCES
}

_ROOT_ENV=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C
	TERM=dumb)
in_root() {
	local r=$1
	shift
	env -i "${_ROOT_ENV[@]}" chroot "$r" "$@"
}

# in_root_exec ROOT [NAME=VALUE...] CMD...: in_root in place of the calling (sub)shell, so
# that `( in_root_exec ... ) &` leaves in $! the pid of CMD itself, which a kill then
# reaches (a backgrounded in_root leaves a subshell's pid, and CMD outlives its kill).
# ROOT_WRAP (an array, may be unset): a command line it runs under, e.g. an unshare.
in_root_exec() {
	local r=$1
	shift
	exec ${ROOT_WRAP[@]+"${ROOT_WRAP[@]}"} env -i "${_ROOT_ENV[@]}" chroot "$r" env "$@"
}

# How many live threads (not zombies) on the machine have real uid UID, whatever their
# process's state: a process whose main thread has exited shows no root (/proc/PID/root)
# and a zombie's status, but its other threads run on (probe ghost). Shell builtins only.
# SysV IPC objects (shm segments, message queues, semaphore sets) live in the host's IPC
# namespace, not the test root's: counted and removed by uid (owner or creator).
ipc_of() { # UID: how many the uid owns or made
	{ awk -v u="$1" 'NR > 1 && ($8 == u || $10 == u)' /proc/sysvipc/shm /proc/sysvipc/msg
	  awk -v u="$1" 'NR > 1 && ($5 == u || $7 == u)' /proc/sysvipc/sem; } | wc -l
}
ipc_remove() { # UID...: remove every one each uid owns or made (what a failed check left)
	local u id
	for u in "$@"; do
		for id in $(awk -v u="$u" 'NR > 1 && ($8 == u || $10 == u) {print $2}' /proc/sysvipc/shm); do ipcrm -m "$id"; done
		for id in $(awk -v u="$u" 'NR > 1 && ($8 == u || $10 == u) {print $2}' /proc/sysvipc/msg); do ipcrm -q "$id"; done
		for id in $(awk -v u="$u" 'NR > 1 && ($5 == u || $7 == u) {print $2}' /proc/sysvipc/sem); do ipcrm -s "$id"; done
	done 2>/dev/null
}

uid_tasks() { # uid
	local s k v st n=0
	for s in /proc/[0-9]*/task/[0-9]*/status; do
		st=
		{
			while read -r k v _; do
				[ "$k" = State: ] && st=$v
				if [ "$k" = Uid: ]; then
					[ "$v" = "$1" ] && [ "$st" != Z ] && [ "$st" != X ] &&
						n=$((n + 1))
					break
				fi
			done <"$s"
		} 2>/dev/null
	done
	echo "$n"
}

# _ghost_in_root /proc/PID ROOT: a process whose main thread has exited (a zombie, with no
# root of its own) while other threads run on in ROOT; cheap for everything else.
_ghost_in_root() {
	local t
	[[ -e $1/root ]] && return 1
	for t in "$1"/task/[0-9]*; do
		[[ $t/root -ef $2 ]] && return 0
	done
	return 1
}

# The pids of the processes whose root directory is ROOT (the same directory: -ef compares
# device and inode), optionally only those whose effective uid is UID (as ps -u). Shell
# builtins only: a fork per process on the machine (a readlink, an awk) took ~0.5 s a call
# on a VM where a fork costs ~2 ms, longer than the states some tests poll for last. A
# ghost (main thread exited, threads running on) counts by its threads' root.
root_pids() { # root [uid]
	local d k r e _ uid
	for d in /proc/[0-9]*; do
		[[ $d/root -ef $1 ]] || _ghost_in_root "$d" "$1" || continue
		if [ -n "${2:-}" ]; then
			uid=""
			while read -r k r e _; do
				[ "$k" = Uid: ] && uid=$e && break
			done <"$d/status" 2>/dev/null
			[ "$uid" = "$2" ] || continue
		fi
		echo "${d#/proc/}"
	done
}

# What a "nothing left" check counts must be a count that could be taken: each of these
# prints a message, not 0 or nothing, and returns 1 where what it measures is not there (a
# missing directory, a path with no devpts on it), so the check fails rather than passes.
# tests/integration/lib-controls.sh shows each one sees what it must.

# ptys_in_use DIR: how many ptys the devpts instance mounted at DIR has in use (its
# numbered entries).
ptys_in_use() {
	local e n=0
	[ "$(stat -f -c %T "$1" 2>/dev/null)" = devpts ] || { echo "no devpts at $1"; return 1; }
	for e in "$1"/[0-9]*; do
		[ -e "$e" ] && n=$((n + 1))
	done
	echo "$n"
}

# fds_of PID: how many fds process PID holds.
fds_of() {
	local out
	if [ -z "$1" ] || ! out=$(ls "/proc/$1/fd" 2>&1); then
		echo "no fds of process '$1': $out"
		return 1
	fi
	[ -z "$out" ] && echo 0 || printf '%s\n' "$out" | wc -l
}

# zombies_of PID: how many children of process PID are zombies.
zombies_of() {
	if [ -z "$1" ] || [ ! -d "/proc/$1" ]; then
		echo "no process '$1'"
		return 1
	fi
	ps --ppid "$1" -o stat= | grep -c '^Z'
	return 0
}

# entries_in DIR: the first 5 of what DIR holds, at any depth; nothing when it is empty.
entries_in() {
	local out
	if [ ! -d "$1" ] || ! out=$(find "$1" -mindepth 1 2>&1); then
		echo "cannot list $1: ${out:-no such directory}"
		return 1
	fi
	[ -n "$out" ] && printf '%s\n' "$out" | head -n 5
	return 0
}

# new_in DIR LIST: the first 5 paths under DIR (DIR included) that LIST, an earlier
# `find DIR | sort`, does not hold; nothing when there are none.
new_in() {
	local out
	if [ ! -s "$2" ] || [ ! -d "$1" ] || ! out=$(find "$1" 2>&1); then
		echo "cannot compare $1 with ${2}: ${out:-a missing directory or list}"
		return 1
	fi
	printf '%s\n' "$out" | sort | comm -13 "$2" - | head -n 5
	return 0
}

# Kill every process still running inside one of this test's roots (a daemon started in
# the background through in_root, whose $! was only the wrapping subshell): nothing a
# test started may outlive it.
_root_kill_procs() { # root-dir
	local pid root n
	for n in 1 2 3; do
		local found=0
		for pid in /proc/[0-9]*; do
			# Most processes share our root: skipped without a fork (root_pids).
			[[ $pid/root -ef / ]] && continue
			root=$(readlink "$pid/root" 2>/dev/null) ||
				root=$(for t in "$pid"/task/[0-9]*; do readlink "$t/root" && break; done 2>/dev/null) ||
				continue
			case "$root" in "$1" | "$1"/*)
				kill -9 "${pid#/proc/}" 2>/dev/null && found=1 ;;
			esac
		done
		[ $found = 0 ] && break
		sleep 0.1
	done
}

root_cleanup() {
	local d
	for d in "${TMPDIR:-/tmp}"/pistis-root.$$.*; do
		[ -d "$d" ] || continue
		_root_kill_procs "$d/root"
		umount -R -l "$d" 2>/dev/null
		rmdir "$d" 2>/dev/null
	done
	for d in "${TMPDIR:-/tmp}"/pistis-test.$$.*; do
		[ -d "$d" ] && rm -rf "$d"
	done
	return 0
}
lib_cleanup() { root_cleanup; }
trap lib_cleanup EXIT

# --- a private dockerd ------------------------------------------------------------------
# dockerd_up DIR: start Debian's dockerd (docker.io) with everything under DIR (data root,
# exec root, pid file, socket; no bridge, no iptables: containers use --network host or
# none) and wait up to 30 s for it. DK runs the client against it (each call bounded to
# 120 s); DDP is its pid. 1, with the reason on stderr, when it is not installed or does
# not come up. dockerd_down stops it and removes DIR (call it from an EXIT trap).
DOCKERD=${DOCKERD:-/usr/sbin/dockerd}
DOCKER=${DOCKER:-/usr/bin/docker}
DK() { timeout 120 "$DOCKER" -H "unix://$_dk_dir/docker.sock" "$@"; }
dockerd_up() {
	_dk_dir=$1
	if [ ! -x "$DOCKERD" ] || [ ! -x "$DOCKER" ]; then
		echo "$DOCKERD or $DOCKER missing (scripts/bootstrap.sh check installs docker.io)" >&2
		return 1
	fi
	mkdir -p "$_dk_dir" || return 1
	# On a tmpfs of its own (the caller is in a private mount namespace): a volume is
	# bind-mounted into its container with the flags of the mount it lives on, so a data
	# root on a nosuid,nodev /tmp (as some machines mount it) made every container's
	# /data nosuid,nodev, which Docker's defaults do not.
	mount -t tmpfs -o mode=0711 pistis-dockerd "$_dk_dir" || return 1
	"$DOCKERD" --bridge=none --iptables=false --ip6tables=false --data-root "$_dk_dir/root" \
		--exec-root "$_dk_dir/exec" --pidfile "$_dk_dir/dockerd.pid" \
		-H "unix://$_dk_dir/docker.sock" >"$_dk_dir/dockerd.log" 2>&1 &
	DDP=$!
	for _ in $(seq 300); do
		DK info >/dev/null 2>&1 && return 0
		kill -0 "$DDP" 2>/dev/null || break
		sleep 0.1
	done
	echo "dockerd did not come up; the end of its log:" >&2
	tail -n 5 "$_dk_dir/dockerd.log" >&2
	return 1
}

# dockerd_up_or_bail DIR: dockerd_up DIR, passing a test line, or failing one and bailing
# out. Not a skip: `make check` installs docker.io (scripts/bootstrap.sh check), so a
# dockerd that cannot run here is a failure of this machine the run must show.
dockerd_up_or_bail() {
	local err
	if ! dockerd_up "$1" 2>"$1.err"; then
		err=$(cat "$1.err")
		_tap_result 1 "a private dockerd runs" "$err"
		echo "Bail out! no dockerd: $err"
		done_testing
		exit 1
	fi
	ok "a private dockerd runs" true
}
dockerd_down() {
	[ -n "${_dk_dir:-}" ] || return 0
	if [ -n "${DDP:-}" ] && kill -0 "$DDP" 2>/dev/null; then
		DK ps -aq 2>/dev/null | xargs -r timeout 60 "$DOCKER" -H "unix://$_dk_dir/docker.sock" \
			rm -f >/dev/null 2>&1
		kill "$DDP"
		for _ in $(seq 100); do kill -0 "$DDP" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$DDP" 2>/dev/null
		wait "$DDP" 2>/dev/null
	fi
	grep " $_dk_dir/" /proc/self/mountinfo | awk '{print $5}' | sort -r |
		xargs -r -n1 umount -l 2>/dev/null
	umount -l "$_dk_dir" 2>/dev/null
	rm -rf "$_dk_dir"
	_dk_dir=""
}
