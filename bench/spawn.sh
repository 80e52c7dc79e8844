#!/bin/bash
# The spawn core's cost, all in one run (root; never touches the host's /etc or users):
#  1. median wall of `pistisd run --agent a -- /bin/true` against /bin/true, `pi-env --
#     /bin/true`, `setpriv --reuid --regid --clear-groups /bin/true` and `sudo -n -u`,
#     measured inside a throwaway Debian test root (a mount namespace over an overlay);
#  2. inside one process, N spawns of /bin/true through the core against posix_spawn.
# Usage: bench/spawn.sh [RUNS] [N]   (PISTIS_BUILD as for the tests)
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_root
need_mount_ns "$@"
runs=${1:-300} n=${2:-1000}
B=/usr/local/lib/pistis-tests/bench-spawn
R=$(root_fresh debian) || { echo "bench: no debian test root" >&2; exit 111; }
in_root "$R" pistisd users ensure-base >/dev/null
out=$(in_root "$R" pistisd users ensure a) || exit 111
uid=$(echo "$out" | sed -n 's/^uid=//p')
name=$(echo "$out" | sed -n 's/^name=//p')
# One run first so the agent's home and cgroup exist (ensure is part of every run anyway).
in_root "$R" pistisd run --agent a -- /bin/true || exit 111

med() { in_root "$R" "$B" exec "$runs" -- "$@" | sed -n 's/^median_us=\([0-9.]*\).*/\1/p'; }
true_us=$(med /bin/true)
run_us=$(med /usr/local/bin/pistisd run --agent a -- /bin/true)
pienv_us=$(med /usr/local/bin/pi-env -- /bin/true)
setpriv_us=$(med /usr/bin/setpriv --reuid="$uid" --regid="$uid" --clear-groups /bin/true)
sudo_us=$(med /usr/bin/sudo -n -u "$name" /bin/true)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '%-44s %10s\n' "command (median of $runs, in the debian root)" "µs"
printf '%-44s %10s\n' "/bin/true" "$true_us"
printf '%-44s %10s\n' "pi-env -- /bin/true" "$pienv_us"
printf '%-44s %10s\n' "pistisd run --agent a -- /bin/true" "$run_us"
printf '%-44s %10s\n' "setpriv --reuid --regid --clear-groups" "$setpriv_us"
printf '%-44s %10s\n' "sudo -n -u $name /bin/true" "$sudo_us"
echo "pistisd run / pi-env  = $(ratio "$run_us" "$pienv_us")   (target <= 1.3)"
echo "pistisd run / setpriv = $(ratio "$run_us" "$setpriv_us")   (target < 1)"
echo "sudo / pistisd run    = $(ratio "$sudo_us" "$run_us")   (target >= 3)"
echo
echo "in-process, $n spawns of /bin/true:"
"$PISTIS_BUILD/tests/bench-spawn" "$n"
