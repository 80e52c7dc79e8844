#!/bin/bash
# bench/policy.sh — pistisd policy apply against the tools an operator would otherwise use.
#
#   bench/policy.sh            200k entries
#   bench/policy.sh --big      also 1M entries (minutes; needs ~1 GiB of tmpfs)
#
# For each size, two identical trees on a private tmpfs (agent-owned, 0644 files, 0755
# dirs, 100 files per directory): tree A gets `pistisd policy apply` with a write rule (first
# apply) and then again (re-apply: nothing to change); tree B gets `chown -R` + `chmod -R`
# (+ `setfacl -R -d` with the same default ACL) — the same end state by hand. The pure walk
# is `find DIR -printf ''` (getdents only) and `find DIR -printf '%m'` (one stat per
# entry). Caches are warm (each tree is walked once before timing). Targets: first apply
# <= 0.5x chown+chmod; re-apply <= 1.5x the pure walk.
set -eu
[ "$(id -u)" = 0 ] || { echo "bench/policy.sh: run as root (chown, tmpfs)" >&2; exit 111; }
if [ "$(readlink /proc/self/ns/mnt)" = "$(readlink /proc/1/ns/mnt)" ]; then
	exec unshare -m --propagation private bash "$0" "$@"
fi
B=${PISTIS_BUILD:-build}
P=$B/bin/pistisd
[ -x "$P" ] || { echo "bench/policy.sh: $P not built (make B=$B)" >&2; exit 111; }
sizes="200000"
[ "${1:-}" = --big ] && sizes="200000 1000000"

T=$(mktemp -d /tmp/pistis-bench-policy.XXXXXX)
mount -t tmpfs -o size=2g,mode=0755 pistis-bench "$T"
trap 'umount -l "$T"; rmdir "$T"' EXIT

now() { date +%s.%N; }
timeit() { local s e; s=$(now); "$@" >/dev/null 2>&1 || true; e=$(now); echo "$e - $s" | bc; }

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

printf '%-8s %-28s %10s\n' entries measurement seconds
for n in $sizes; do
	mkdir -p "$T/$n"
	gen "$T/$n/a/workspaces" "$n"
	cp -a "$T/$n/a" "$T/$n/b"
	count=$(find "$T/$n/a/workspaces" | wc -l)
	printf '[{"path":"/workspaces","access":"write"}]\n' >"$T/rules.json"
	find "$T/$n/a" -printf '' && find "$T/$n/b" -printf ''

	walk=$(timeit find "$T/$n/a/workspaces" -printf '')
	statwalk=$(timeit find "$T/$n/a/workspaces" -printf '%m')
	first=$(timeit "$P" policy apply --root "$T/$n/a" --rules "$T/rules.json")
	again=$(timeit "$P" policy apply --root "$T/$n/a" --rules "$T/rules.json")
	chown_t=$(timeit chown -R 10100:10010 "$T/$n/b/workspaces")
	chmod_t=$(timeit chmod -R u=rwX,g=rwX,o= "$T/$n/b/workspaces")
	setfacl_t=$(timeit setfacl -R -d -m u::rwx,g::rwx,o::- "$T/$n/b/workspaces")
	"$P" policy check --root "$T/$n/a" --rules "$T/rules.json" >/dev/null ||
		echo "warning: tree A does not conform after apply" >&2

	byhand=$(echo "$chown_t + $chmod_t" | bc)
	printf '%-8s %-28s %10.3f\n' "$count" "find -printf ''" "$walk" \
		"$count" "find -printf '%m'" "$statwalk" \
		"$count" "chown -R" "$chown_t" "$count" "chmod -R" "$chmod_t" \
		"$count" "setfacl -R -d" "$setfacl_t" \
		"$count" "policy apply (first)" "$first" "$count" "policy apply (again)" "$again"
	printf '%-8s first apply / (chown -R + chmod -R)      = %.2f   (target <= 0.5)\n' "$count" \
		"$(echo "$first / $byhand" | bc -l)"
	printf '%-8s first apply / (chown+chmod+setfacl -R)   = %.2f\n' "$count" \
		"$(echo "$first / ($byhand + $setfacl_t)" | bc -l)"
	printf '%-8s re-apply / find -printf ""               = %.2f   (target <= 1.5)\n' "$count" \
		"$(echo "$again / $walk" | bc -l)"
	printf '%-8s re-apply / find -printf "%%m" (stat walk) = %.2f\n' "$count" \
		"$(echo "$again / $statwalk" | bc -l)"
	rm -rf "${T:?}/$n"
done
