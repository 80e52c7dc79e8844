#!/bin/bash
# pi-env's cost in front of a command: median wall time of
#   A  pi-env --agent-user … -- /bin/true
#   B  env -i PATH=… /bin/true          (the baseline it must stay within 1.1x of)
#   C  /bin/true                        (the floor: fork+exec of the command alone)
# measured in the same run and printed as ratios.
# Usage: bench/pi-env.sh [RUNS]   (default 2000; PISTIS_BUILD picks the build directory)
# Uses hyperfine (scripts/bootstrap.sh bench) when installed, else (or with
# BENCH_TOOL=loop) a timing loop in bash that interleaves the three commands.
set -eu
RUNS=${1:-2000}
BUILD=${PISTIS_BUILD:-build}
PE=$BUILD/bin/pi-env
[ -x "$PE" ] || { echo "bench: $PE not built (make B=$BUILD all)" >&2; exit 111; }
TRUE=/bin/true
ENV=$(command -v env)
A="$PE --agent-user pi-agent-1 --home /tmp --tmpdir /tmp -- $TRUE"
B="$ENV -i PATH=/usr/bin:/bin $TRUE"
C="$TRUE"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

if [ "${BENCH_TOOL:-}" != loop ] && command -v hyperfine >/dev/null 2>&1; then
	json=$(mktemp)
	trap 'rm -f "$json"' EXIT
	# -N: no intermediate shell, so the shell's own start-up is not in the figures.
	hyperfine -N --style basic --warmup 100 --runs "$RUNS" --export-json "$json" \
		"$A" "$B" "$C" >&2
	read -r ma mb mc < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["results"]
print(" ".join("%.9f" % x["median"] for x in r))' "$json")
	tool="hyperfine -N, $RUNS runs each"
else
	# Fallback: time each run with the monotonic clock, interleaving A, B and C so drift
	# and noisy neighbours hit all three alike; median per command.
	ta=() tb=() tc=()
	for ((i = 0; i < RUNS; i++)); do
		s=$EPOCHREALTIME; $A; e=$EPOCHREALTIME; ta+=("$(awk -v s="$s" -v e="$e" 'BEGIN{print e-s}')")
		s=$EPOCHREALTIME; $B; e=$EPOCHREALTIME; tb+=("$(awk -v s="$s" -v e="$e" 'BEGIN{print e-s}')")
		s=$EPOCHREALTIME; $C; e=$EPOCHREALTIME; tc+=("$(awk -v s="$s" -v e="$e" 'BEGIN{print e-s}')")
	done
	median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
	ma=$(median "${ta[@]}") mb=$(median "${tb[@]}") mc=$(median "${tc[@]}")
	tool="bash timing loop, $RUNS runs each (includes bash's fork+exec)"
fi

printf 'pi-env bench (%s)\n' "$tool"
printf '  median pi-env -- /bin/true      %8.1f us\n' "$(awk -v x="$ma" 'BEGIN{print x*1e6}')"
printf '  median env -i PATH=… /bin/true  %8.1f us\n' "$(awk -v x="$mb" 'BEGIN{print x*1e6}')"
printf '  median /bin/true                %8.1f us\n' "$(awk -v x="$mc" 'BEGIN{print x*1e6}')"
printf '  pi-env / env -i  = %s (target <= 1.1)\n' "$(ratio "$ma" "$mb")"
printf '  pi-env / true    = %s\n' "$(ratio "$ma" "$mc")"
printf '  env -i / true    = %s\n' "$(ratio "$mb" "$mc")"
