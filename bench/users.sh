#!/bin/bash
# bench/users.sh [N] — create N agents (default 1000) with `pistisd users ensure`, one
# process per agent, against `useradd -R` doing the same on a temporary copy of /etc, in
# the same run, interleaved; the batch form separately; then time `ensure` of an existing
# agent in-process (bench-users).
# Runs as root in a private mount namespace; never touches the host's /etc or /data.
# BENCH_FS=tmpfs puts both roots on a tmpfs (no fsync cost) instead of /var/tmp.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "bench/users.sh: needs root" >&2; exit 100; }
if [ "$(readlink /proc/self/ns/mnt)" = "$(readlink /proc/1/ns/mnt)" ]; then
	exec unshare -m --propagation private bash "$0" "$@"
fi
N=${1:-1000}
B=${PISTIS_BUILD:-build}
case "$B" in /*) ;; *) B=$(pwd)/$B ;; esac
P=$B/bin/pistisd
H=$B/tests/bench-users
command -v useradd >/dev/null || { echo "bench/users.sh: useradd missing (passwd package)" >&2; exit 111; }
[ -x "$P" ] && [ -x "$H" ] || { echo "bench/users.sh: build $P and $H first" >&2; exit 111; }

work=$(mktemp -d /var/tmp/pistis-bench-users.XXXXXX)
trap 'umount "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
[ "${BENCH_FS:-disk}" = tmpfs ] && mount -t tmpfs -o size=512m bench "$work"

mkroot() { # dir: a copy of the host's files, never the files themselves
	mkdir -p "$1/etc/default" "$1/skel-empty" "$1/data/sandbox-home"
	cp -a /etc/passwd /etc/group /etc/shadow /etc/gshadow /etc/login.defs "$1/etc/"
	[ -e /etc/default/useradd ] && cp -a /etc/default/useradd "$1/etc/default/"
	return 0
}

mkroot "$work/ours"
mkroot "$work/theirs"
mkroot "$work/batch"
# The same end state on both sides: a shared group, a user and group per agent, a home.
"$P" users ensure-base --root "$work/ours" >/dev/null
"$P" users ensure-base --root "$work/batch" >/dev/null
groupadd -R "$work/theirs" -g 10010 pi-sandbox

# Interleaved, one pistisd and one useradd per step, each timed alone with bash's
# $EPOCHREALTIME (no fork for the clock): both sides see the same machine load, which on a
# shared machine matters more than anything else. Means and medians per user.
us() { local t=${1/./}; echo $((10#$t)); }
ours=() theirs=()
for i in $(seq 1 "$N"); do
	a=$EPOCHREALTIME
	"$P" users ensure "bench-agent-$i" --root "$work/ours" >/dev/null
	b=$EPOCHREALTIME
	useradd -R "$work/theirs" -K UID_MIN=10100 -K GID_MIN=10100 -U -G pi-sandbox -m \
		-k /skel-empty -b /data/sandbox-home -s /bin/sh "u$i" 2>/dev/null
	c=$EPOCHREALTIME
	ours+=($(($(us "$b") - $(us "$a")))) theirs+=($(($(us "$c") - $(us "$b"))))
done
stats() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1; s+=$1} END {printf "%d %d", s/NR, v[int((NR+1)/2)]}'; }
read -r ours_us ours_med <<<"$(stats "${ours[@]}")"
read -r theirs_us theirs_med <<<"$(stats "${theirs[@]}")"
echo "fs: ${BENCH_FS:-disk} ($(stat -f -c %T "$work"))  agents: $N  load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "create, one process per agent (mean):    pistisd users ensure ${ours_us} us/user   useradd ${theirs_us} us/user   ratio $(awk "BEGIN{printf \"%.1f\", $theirs_us/$ours_us}")x"
echo "create, one process per agent (median):  pistisd users ensure ${ours_med} us/user   useradd ${theirs_med} us/user   ratio $(awk "BEGIN{printf \"%.1f\", $theirs_med/$ours_med}")x"
echo "check: $(grep -c '^pi-agent-' "$work/ours/etc/passwd") agents in ours, $(grep -c '^u[0-9]' "$work/theirs/etc/passwd") in useradd's"

# The batch form (servers that pre-create agents): N agents, BATCH ids per process, one
# lock and one rewrite per process. Not the headline: useradd has no batch form.
BATCH=${BATCH:-100}
if "$P" users ensure batch-probe-1 batch-probe-2 --root "$work/batch" >/dev/null 2>&1; then
	a=$EPOCHREALTIME
	for ((i = 1; i <= N; i += BATCH)); do
		ids=()
		for ((j = i; j < i + BATCH && j <= N; j++)); do ids+=("batch-agent-$j"); done
		"$P" users ensure "${ids[@]}" --root "$work/batch" >/dev/null
	done
	b=$EPOCHREALTIME
	batch_us=$(( ($(us "$b") - $(us "$a")) / N ))
	echo "create, batches of $BATCH per process: pistisd users ensure ID... ${batch_us} us/user   (useradd mean above: ${theirs_us} us/user, $(awk "BEGIN{printf \"%.1f\", $theirs_us/$batch_us}")x)"
	echo "check: $(grep -c '^pi-agent-' "$work/batch/etc/passwd") agents in the batch root (+2 probes)"
else
	echo "create, batches: this build has no batch form"
fi

# In-process (what pistisd itself does): N more agents, then an existing one many times.
"$H" "$work/ours" create inproc "$N"
"$H" "$work/ours" existing bench-agent-500 5000
