#!/bin/bash
# bench/policy.sh — pistisd policy apply against the tools an operator would otherwise use.
#
#   bench/policy.sh                 200k entries on a private tmpfs
#   bench/policy.sh --big           also 1M entries (minutes; needs ~3 GiB of tmpfs)
#   bench/policy.sh --disk DIR      on DIR's file system instead (e.g. /var/tmp on ext4;
#                                   caches are warm there too)
#
# For each size, three identical trees on a private tmpfs (or --disk) (agent-owned, 0644 files, 0755
# dirs, 100 files per directory): tree A gets `pistisd policy apply` with a write rule (first
# apply) and then again (re-apply: nothing to change); tree B gets `chown -R` + `chmod -R`
# (+ `setfacl -R -d` with the same default ACL) — the same end state by hand. The pure walk
# is `find DIR -printf ''` (getdents only) and `find DIR -printf '%m'` (one stat per
# entry). Caches are warm (each tree is walked once before timing). Targets: first apply
# <= 0.5x chown+chmod; re-apply <= 1.5x the pure walk. pistisd walks with one thread per
# CPU (at most 8); "1 thread" rows repeat both applies on a third tree with --threads 1.
# Each row is the fastest of REPS runs (default 3; a tree is reset to its first state
# before each run that changes it) and also shows the CPU seconds (user+sys) of that run:
# on a shared machine the wall clock says as much about the neighbours as about the walk.
set -eu
[ "$(id -u)" = 0 ] || { echo "bench/policy.sh: run as root (chown, tmpfs)" >&2; exit 111; }
if [ "$(readlink /proc/self/ns/mnt)" = "$(readlink /proc/1/ns/mnt)" ]; then
	exec unshare -m --propagation private bash "$0" "$@"
fi
B=${PISTIS_BUILD:-build}
P=$B/bin/pistisd
[ -x "$P" ] || { echo "bench/policy.sh: $P not built (make B=$B)" >&2; exit 111; }
sizes="200000"
disk=
while [ $# -gt 0 ]; do
	case $1 in
	--big) sizes="200000 1000000" ;;
	--disk) disk=$2; shift ;;
	*) echo "usage: bench/policy.sh [--big] [--disk DIR]" >&2; exit 100 ;;
	esac
	shift
done

if [ -n "$disk" ]; then
	T=$(mktemp -d "$disk/pistis-bench-policy.XXXXXX")
	trap 'rm -rf "$T"' EXIT
	fs=$(findmnt -no FSTYPE -T "$T")
else
	T=$(mktemp -d /tmp/pistis-bench-policy.XXXXXX)
	mount -t tmpfs -o size=3g,mode=0755 pistis-bench "$T"
	trap 'umount -l "$T"; rmdir "$T"' EXIT
	fs=tmpfs
fi
echo "file system: $fs; CPUs: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"

# timeit CMD…: prints "wall cpu" (seconds; cpu = user + sys of CMD and its threads)
timeit() {
	/usr/bin/time -o "$T/.time" -f '%e %U %S' "$@" >/dev/null 2>&1 || true
	awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$T/.time"
}
wall() { echo "${1% *}"; }
REPS=${REPS:-3}
# best PREP CMD…: the fastest of $REPS runs of CMD, each after PREP ("-": none; untimed)
best() {
	local prep=$1 b= r
	shift
	for _ in $(seq "$REPS"); do
		[ "$prep" = - ] || $prep
		r=$(timeit "$@")
		if [ -z "$b" ] || [ "$(echo "$(wall "$r") < $(wall "$b")" | bc)" = 1 ]; then
			b=$r
		fi
	done
	echo "$b"
}
# The state gen leaves: agent-owned, 0755 dirs, 0644 files, no ACLs; caches warm.
reset() {
	chown -R 10100:10100 "$1"
	chmod -R u=rwX,go=rX "$1"
	setfacl -R -b "$1"
	find "$1" -printf ''
}

gen() { # dir entries
	python3 - "$1" "$2" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
os.makedirs(root)
per = 100
d = 0
made = 0
while made < n:
    sub = os.path.join(root, "d%03d" % (d // 100), "e%03d" % (d % 100))
    os.makedirs(sub, exist_ok=True)
    for i in range(min(per, n - made)):
        fd = os.open(os.path.join(sub, "f%03d" % i), os.O_CREAT | os.O_WRONLY, 0o644)
        os.close(fd)
    made += per + 1
    d += 1
EOF
	chown -R 10100:10100 "$1"
}

printf '%-8s %-30s %8s %8s\n' entries measurement wall cpu
for n in $sizes; do
	mkdir -p "$T/$n"
	gen "$T/$n/a/workspaces" "$n"
	cp -a "$T/$n/a" "$T/$n/b"
	cp -a "$T/$n/a" "$T/$n/c"
	count=$(find "$T/$n/a/workspaces" | wc -l)
	printf '[{"path":"/workspaces","access":"write"}]\n' >"$T/rules.json"
	for t in a b c; do find "$T/$n/$t" -printf ''; done

	ra() { reset "$T/$n/a"; }
	rb() { reset "$T/$n/b"; }
	rc() { reset "$T/$n/c"; }
	walk=$(best - find "$T/$n/a/workspaces" -printf '')
	statwalk=$(best - find "$T/$n/a/workspaces" -printf '%m')
	first=$(best ra "$P" policy apply --root "$T/$n/a" --rules "$T/rules.json")
	again=$(best - "$P" policy apply --root "$T/$n/a" --rules "$T/rules.json")
	first1=$(best rc "$P" policy apply --threads 1 --root "$T/$n/c" --rules "$T/rules.json")
	again1=$(best - "$P" policy apply --threads 1 --root "$T/$n/c" --rules "$T/rules.json")
	chown_t=$(best rb chown -R 10100:10010 "$T/$n/b/workspaces")
	chmod_t=$(best rb chmod -R u=rwX,g=rwX,o= "$T/$n/b/workspaces")
	setfacl_t=$(best rb setfacl -R -d -m u::rwx,g::rwx,o::- "$T/$n/b/workspaces")
	for t in a c; do
		"$P" policy check --root "$T/$n/$t" --rules "$T/rules.json" >/dev/null ||
			echo "warning: tree $t does not conform after apply" >&2
	done

	row() { printf '%-8s %-30s %8.3f %8.2f\n' "$count" "$1" "$(wall "$2")" "${2#* }"; }
	row "find -printf ''" "$walk"
	row "find -printf '%m'" "$statwalk"
	row "chown -R" "$chown_t"
	row "chmod -R" "$chmod_t"
	row "setfacl -R -d" "$setfacl_t"
	row "policy apply (first)" "$first"
	row "policy apply (again)" "$again"
	row "policy apply (first, 1 thread)" "$first1"
	row "policy apply (again, 1 thread)" "$again1"
	byhand=$(echo "$(wall "$chown_t") + $(wall "$chmod_t")" | bc)
	ratio() { echo "$1 / $2" | bc -l; }
	printf '%-8s first apply / (chown -R + chmod -R)      = %.2f  (1 thread %.2f; target <= 0.5)\n' \
		"$count" "$(ratio "$(wall "$first")" "$byhand")" "$(ratio "$(wall "$first1")" "$byhand")"
	printf '%-8s first apply / (chown+chmod+setfacl -R)   = %.2f\n' "$count" \
		"$(ratio "$(wall "$first")" "($byhand + $(wall "$setfacl_t"))")"
	printf '%-8s re-apply / find -printf ""               = %.2f  (1 thread %.2f; target <= 1.5)\n' \
		"$count" "$(ratio "$(wall "$again")" "$(wall "$walk")")" \
		"$(ratio "$(wall "$again1")" "$(wall "$walk")")"
	printf '%-8s re-apply / find -printf "%%m" (stat walk) = %.2f  (1 thread %.2f)\n' "$count" \
		"$(ratio "$(wall "$again")" "$(wall "$statwalk")")" \
		"$(ratio "$(wall "$again1")" "$(wall "$statwalk")")"
	rm -rf "${T:?}/$n"
done
