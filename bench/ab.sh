#!/bin/bash
# Two builds against each other, interleaved, in one throwaway Debian test root (root;
# never touches the host's /etc or users): the median wall of RUNS runs each of
# `pistisd run --agent a -- /bin/true`, `pi-env -- /bin/true` and `pistisd --version`,
# with A's and B's binaries alternately (the order swapped every round) for ROUNDS rounds,
# so drift in the machine's load hits both alike. Prints each build's median over the
# rounds and the median over the rounds of (B - A).
# Usage: bench/ab.sh BUILD_A BUILD_B [ROUNDS] [RUNS]
#   (BUILD_* are build directories, e.g. a `make B=build-old` of another commit;
#    the root and bench-spawn come from PISTIS_BUILD as for the tests)
set -u
cd "$(dirname "$0")/.." || exit 111
. tests/lib.sh
need_root
[ $# -ge 2 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 100; }
need_mount_ns "$@"
a=$1 b=$2 rounds=${3:-20} runs=${4:-200}
for d in "$a" "$b"; do
	for f in pistisd pi-env; do
		[ -x "$d/bin/$f" ] || { echo "bench: $d/bin/$f is not built" >&2; exit 100; }
	done
done
B=/usr/local/lib/pistis-tests/bench-spawn
R=$(root_fresh debian) || { echo "bench: no debian test root" >&2; exit 111; }
mkdir -p "$R/opt/A" "$R/opt/B"
cp "$a/bin/pistisd" "$a/bin/pi-env" "$R/opt/A/" && cp "$b/bin/pistisd" "$b/bin/pi-env" "$R/opt/B/" ||
	exit 111
in_root "$R" /opt/B/pistisd users ensure-base >/dev/null
in_root "$R" /opt/B/pistisd users ensure a >/dev/null || exit 111
in_root "$R" /opt/B/pistisd run --agent a -- /bin/true || exit 111

med() { in_root "$R" "$B" exec "$runs" -- "$@" | sed -n 's/^median_us=\([0-9.]*\).*/\1/p'; }
S=$(scratch)
for i in $(seq "$rounds"); do
	if [ $((i % 2)) = 1 ]; then order="A B"; else order="B A"; fi
	for v in $order; do
		echo "$i $v run $(med "/opt/$v/pistisd" run --agent a -- /bin/true)"
		echo "$i $v pi-env $(med "/opt/$v/pi-env" -- /bin/true)"
		echo "$i $v version $(med "/opt/$v/pistisd" --version)"
	done
done >"$S/raw"

echo "A: $a   B: $b   ($rounds rounds of $runs runs, load $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-36s %10s %10s %12s\n' "median wall, µs" A B "B - A"
python3 - "$S/raw" <<'EOF'
import collections, statistics as st, sys
runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    i, v, k, us = line.split()
    runs[k].setdefault(i, {})[v] = float(us)
names = {"run": "pistisd run --agent a -- /bin/true", "pi-env": "pi-env -- /bin/true",
         "version": "pistisd --version"}
for k, title in names.items():
    rs = [r for r in runs[k].values() if "A" in r and "B" in r]
    a = st.median(r["A"] for r in rs)
    b = st.median(r["B"] for r in rs)
    d = st.median(r["B"] - r["A"] for r in rs)
    print("%-36s %10.1f %10.1f %+8.1f (%+.1f%%)" % (title, a, b, d, 100 * d / a))
EOF
