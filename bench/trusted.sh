#!/bin/bash
# bench/trusted.sh [RUNS]: median wall time of an agent calling a trusted no-op through its
# wrapper (/data/bin/noop: #!pistisd trusted-exec -> sudo -> /data/trusted/noop) against calling
# `sudo -n -u pi-tools /data/trusted/noop` directly, interleaved in the same run, inside the
# debian test root (real sudo 1.9.13). Prints both medians and the ratio; and, in the same
# loop, the same no-op with a clean start (#!PISTISD trusted-interp /bin/sh, called through
# sudo directly), against the plain one: what the reset costs.
# Needs root; works in a throwaway overlay root in a private mount namespace.
cd "$(dirname "$0")/.." || exit 111
. tests/lib.sh
need_root
need_mount_ns "$@"
RUNS=${1:-200}
P=$BIN/pistisd
[ -x "$P" ] || { echo "bench/trusted.sh: build $P first (make B=… all)" >&2; exit 111; }
R=$(root_fresh debian) || exit 111
S=$(scratch)

echo 'pi-tools:x:10002:10002::/nonexistent:/usr/sbin/nologin' >>"$R/etc/passwd"
echo 'pi-agent-bench:x:10100:10100::/tmp:/bin/sh' >>"$R/etc/passwd"
printf 'pi-tools:x:10002:\npi-sandbox:x:10010:pi-agent-bench\npi-agent-bench:x:10100:\n' >>"$R/etc/group"
printf 'pi-tools:!:19000::::::\npi-agent-bench:!:19000::::::\n' >>"$R/etc/shadow"
echo "127.0.1.1 $(hostname)" >>"$R/etc/hosts"
printf '#!/bin/sh\n:\n' >"$S/noop"
printf '#!/usr/local/bin/pistisd trusted-interp /bin/sh\n:\n' >"$S/noopclean"
chmod 0755 "$S/noop" "$S/noopclean"
"$P" trusted add noop "$S/noop" --root "$R" >/dev/null || exit 111
"$P" trusted add noopclean "$S/noopclean" --root "$R" >/dev/null || exit 111
echo "wrapper: $(head -n 1 "$R/data/bin/noop")"

# The timing loop runs inside the root as the agent, so chroot/exec of the harness is not
# in the figures: one shell, RUNS × (wrapper, direct), interleaved, nanosecond clock.
cat >"$R/tmp/loop.sh" <<'EOL'
n=$1
i=0
while [ $i -lt $n ]; do
	a=$(date +%s%N); /data/bin/noop; b=$(date +%s%N)
	sudo -n -u pi-tools /data/trusted/noop; c=$(date +%s%N)
	sudo -n -u pi-tools /data/trusted/noopclean; d=$(date +%s%N)
	echo "$((b - a)) $((c - b)) $((d - c))"
	i=$((i + 1))
done
EOL
chroot --userspec=10100:10100 --groups=10010 "$R" /usr/bin/env -i PATH=/usr/bin:/bin \
	sh /tmp/loop.sh 10 >/dev/null || { echo "warm-up failed" >&2; exit 111; }
chroot --userspec=10100:10100 --groups=10010 "$R" /usr/bin/env -i PATH=/usr/bin:/bin \
	sh /tmp/loop.sh "$RUNS" >"$S/t" || exit 111
# `date` itself costs the same in both columns; it is measured and subtracted.
cat >"$R/tmp/clock.sh" <<'EOL'
i=0; while [ $i -lt $1 ]; do a=$(date +%s%N); b=$(date +%s%N); echo $((b - a)); i=$((i + 1)); done
EOL
chroot --userspec=10100:10100 "$R" /usr/bin/env -i PATH=/usr/bin:/bin sh /tmp/clock.sh "$RUNS" >"$S/c"
python3 - "$S/t" "$S/c" <<'EOP'
import statistics, sys
rows = [tuple(map(int, l.split())) for l in open(sys.argv[1])]
clock = statistics.median(int(l) for l in open(sys.argv[2]))
w = statistics.median(r[0] for r in rows) - clock
d = statistics.median(r[1] for r in rows) - clock
print(f"runs: {len(rows)} (interleaved)  clock overhead subtracted: {clock/1e6:.3f} ms")
print(f"wrapper  /data/bin/noop                         median {w/1e6:.3f} ms")
print(f"direct   sudo -n -u pi-tools /data/trusted/noop  median {d/1e6:.3f} ms")
print(f"ratio wrapper/direct: {w/d:.3f}")
k = statistics.median(r[2] for r in rows) - clock
print(f"clean    sudo -n -u pi-tools /data/trusted/noopclean (trusted-interp) median {k/1e6:.3f} ms")
print(f"ratio clean/direct: {k/d:.3f}")
EOP
