#!/bin/bash
# bench/users.sh [N] — create N agents (default 1000) with `pistisd users ensure`, one
# process per agent, against `useradd -R` doing the same on a temporary copy of /etc, in
# the same run, interleaved, each process spawned and timed by bench-users (posix_spawn +
# CLOCK_MONOTONIC), the file system synced (untimed) before each step; the batch form
# separately; then time `ensure` of an existing agent in-process (bench-users).
# Runs as root in a private mount namespace; never touches the host's /etc or /data.
# BENCH_FS=tmpfs puts both roots on a tmpfs (no fsync cost) instead of /var/tmp;
# BENCH_SETTLE=0 leaves out the sync before each step.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "bench/users.sh: needs root" >&2; exit 100; }
# scripts/in-private-ns: mounts made here never reach the host.
[ "${PISTIS_MNT_NS:-}" = "$(readlink /proc/self/ns/mnt)" ] ||
	exec "$(dirname "$0")/../scripts/in-private-ns" bash "$0" "$@"
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

# Interleaved, one pistisd and one useradd per step, each spawned alone by bench-users
# (posix_spawn, i.e. vfork+exec, as hyperfine -N does) and timed from spawn to reaped exit
# with CLOCK_MONOTONIC: both sides see the same machine load, which on a shared machine
# matters more than anything else. Means and medians per user.
# Why not bash: timing `cmd` between two $EPOCHREALTIME reads includes bash's own fork of
# itself (a full copy of bash's page tables, ~1 ms on a small VM) on both sides. That is
# the harness, not the tool, and it swamps a ~1 ms creation. The bash-timed figures are
# still printed below (BASH_N steps on their own pair of roots) for comparison with older
# runs.
# Settled: before every step the bench file system is synced, untimed (bench-users
# --settle: syncfs). Both tools fsync what they write; without this, whichever runs next
# also pays in its first fsync for the journal commit of what the other left for
# writeback (useradd's home, lastlog and renames; our /etc renames and homes), and which
# side pays more depends on the other's habits, not its own. BENCH_SETTLE=0 leaves it
# out (the figures of runs before this option).
settle=(--settle "$work")
[ "${BENCH_SETTLE:-1}" = 0 ] && settle=()
USERADD=$(command -v useradd)
ua_args=(-K UID_MIN=10100 -K GID_MIN=10100 -U -G pi-sandbox -m -k /skel-empty
	-b /data/sandbox-home -s /bin/sh)
"$H" pair "$N" "${settle[@]}" "$P" users ensure "bench-agent-{}" --root "$work/ours" \
	-- "$USERADD" -R "$work/theirs" "${ua_args[@]}" "u{}" >"$work/pair.out"
field() { awk -v s="$1" '$1 == s {for (i = 2; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]} print v["mean_us"], v["median_us"]}' "$work/pair.out"; }
read -r ours_us ours_med <<<"$(field A)"
read -r theirs_us theirs_med <<<"$(field B)"
echo "fs: ${BENCH_FS:-disk} ($(stat -f -c %T "$work"))  agents: $N  settled: $([ ${#settle[@]} -gt 0 ] && echo "yes (syncfs before each step)" || echo no)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "create, one process per agent, posix_spawn-timed (mean):    pistisd users ensure ${ours_us} us/user   useradd ${theirs_us} us/user   ratio $(awk "BEGIN{printf \"%.1f\", $theirs_us/$ours_us}")x"
echo "create, one process per agent, posix_spawn-timed (median):  pistisd users ensure ${ours_med} us/user   useradd ${theirs_med} us/user   ratio $(awk "BEGIN{printf \"%.1f\", $theirs_med/$ours_med}")x"
sed 's/^A /  pistisd: /; s/^B /  useradd: /; s/^ratio B\/A/  ratio useradd\/pistisd:/' "$work/pair.out"
# The same end state on both sides, checked, not assumed.
n_ours=$(grep -c '^pi-agent-' "$work/ours/etc/passwd")
n_theirs=$(grep -c '^u[0-9]' "$work/theirs/etc/passwd")
echo "check: $n_ours agents in ours, $n_theirs in useradd's"
[ "$n_ours" = "$N" ] && [ "$n_theirs" = "$N" ] || { echo "bench/users.sh: end states differ" >&2; exit 1; }
for r in ours theirs; do
	s=$(awk -F: '$1 == "pi-sandbox" {print gsub(/,/, ",") + 1}' "$work/$r/etc/group")
	h=$(find "$work/$r/data/sandbox-home" -mindepth 1 -maxdepth 1 -type d | wc -l)
	echo "check: $r: $s members of pi-sandbox, $h homes"
	[ "$s" = "$N" ] && [ "$h" -ge "$N" ] || { echo "bench/users.sh: $r is incomplete" >&2; exit 1; }
done

# The old harness, for comparison: each step timed in bash with $EPOCHREALTIME around
# bash's fork+exec (the fork's ~1 ms lands on both sides).
BASH_N=${BASH_N:-200}
mkroot "$work/ours-bash"
mkroot "$work/theirs-bash"
"$P" users ensure-base --root "$work/ours-bash" >/dev/null
groupadd -R "$work/theirs-bash" -g 10010 pi-sandbox
us() { local t=${1/./}; echo $((10#$t)); }
ours=() theirs=()
for i in $(seq 1 "$BASH_N"); do
	a=$EPOCHREALTIME
	"$P" users ensure "bench-agent-$i" --root "$work/ours-bash" >/dev/null
	b=$EPOCHREALTIME
	"$USERADD" -R "$work/theirs-bash" "${ua_args[@]}" "u$i" 2>/dev/null
	c=$EPOCHREALTIME
	ours+=($(($(us "$b") - $(us "$a")))) theirs+=($(($(us "$c") - $(us "$b"))))
done
stats() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1; s+=$1} END {printf "%d %d", s/NR, v[int((NR+1)/2)]}'; }
if [ "$BASH_N" -gt 0 ]; then # BASH_N=0 leaves the old harness out
	read -r b_ours_us b_ours_med <<<"$(stats "${ours[@]}")"
	read -r b_theirs_us b_theirs_med <<<"$(stats "${theirs[@]}")"
	echo "create, bash-timed (incl. bash's fork), $BASH_N agents: pistisd mean ${b_ours_us} median ${b_ours_med} us/user   useradd mean ${b_theirs_us} median ${b_theirs_med} us/user   ratio (median) $(awk "BEGIN{printf \"%.1f\", $b_theirs_med/$b_ours_med}")x"
fi

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
