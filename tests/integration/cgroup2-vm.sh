#!/bin/bash
# The cgroup limits enforced, in a throwaway VM whose only cgroup hierarchy is v2 (this
# project's machines are hybrid hosts: memory, cpu and pids live in v1 there, so no other
# test can see a limit hold). qemu boots Debian 12's kernel (the linux-image package,
# unpacked once into /var/cache/pistis/kernel/, never installed) with an initramfs the test
# builds: busybox-static, the kernel's virtio, 9p and overlay modules, and an init that
# mounts this machine's / read-only over 9p under a tmpfs overlay (every write stays in the
# guest's RAM), mounts cgroup2 alone at /sys/fs/cgroup with memory, cpu and pids enabled,
# and runs tests/vm/cgroup2-guest.sh there (pistisd run's --memory-max, --pids-max, the
# cgroup.kill of a setsid'd grandchild at its command's end and at a timeout, then
# serve-limits.sh's second half with PISTIS_LIMITS_V2=1). The guest's TAP lines, read from its serial console, are this
# test's. KVM where a guest boots under /dev/kvm, else TCG (slower, still run). Never skips: no qemu, no
# kernel package to fetch or no guest result is a failure.
. "$(dirname "$0")/../lib.sh"
bail() {
	echo "Bail out! $*"
	exit 1
}
[ "$(id -u)" = 0 ] || bail "needs root (qemu, the kernel cache, mounts)"
need_mount_ns "$@"
for b in "$BIN/pistisd" "$BIN/pistis" "$BIN/server-min" "$BIN/pi-env" "$TESTBIN/probe"; do
	[ -x "$b" ] || bail "$b not built (make tests)"
done
SRC=$(cd "$(dirname "$0")/../.." && pwd)
W=$(scratch)

QEMU=$(command -v qemu-system-x86_64) ||
	bail "no qemu-system-x86_64 (scripts/bootstrap.sh check installs qemu-system-x86)"
[ -x /bin/busybox ] && file -L /bin/busybox | grep -q 'statically linked' ||
	bail "/bin/busybox is not a static busybox (busybox-static)"

# --- the kernel: Debian's current linux-image-*-amd64, unpacked once into the cache -----
KCACHE=${PISTIS_KERNEL_CACHE:-/var/cache/pistis/kernel}
PKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
	sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n 1)
if [ -z "$PKG" ]; then # no apt lists: the newest one cached
	PKG=$(ls "$KCACHE" 2>/dev/null | grep '^linux-image-.*-amd64$' | sort -V | tail -n 1)
fi
[ -n "$PKG" ] || bail "cannot resolve linux-image-amd64 to a kernel package (apt-get update?)"
K=$KCACHE/$PKG
if [ ! -d "$K" ]; then
	mkdir -p "$KCACHE" && chmod 0755 "$KCACHE"
	(
		flock 9
		[ -d "$K" ] && exit 0
		rm -rf "$K.tmp" && mkdir -p "$K.tmp/deb" && chmod 0755 "$K.tmp/deb" &&
			(cd "$K.tmp/deb" && apt-get download -q "$PKG" >"$K.tmp/log" 2>&1) &&
			dpkg-deb -x "$K.tmp/deb/"*.deb "$K.tmp/x" &&
			rm -rf "$K.tmp/deb" && mv "$K.tmp/x" "$K" && rm -rf "$K.tmp"
	) 9>"$KCACHE/.lock" || bail "cannot fetch and unpack $PKG: $(tail -n 3 "$K.tmp/log" 2>/dev/null)"
fi
VMLINUZ=$(ls "$K"/boot/vmlinuz-* 2>/dev/null | head -n 1)
MODS=$(ls -d "$K"/lib/modules/* 2>/dev/null | head -n 1)
[ -f "$VMLINUZ" ] && [ -d "$MODS" ] || bail "no vmlinuz or modules in $K"
ok "the kernel: $PKG, cached in $KCACHE" test -f "$VMLINUZ"

# --- the initramfs ------------------------------------------------------------------------
# Modules in load order (each after what its depends= names); none is compressed in
# Debian 12's packages. The socket diagnostics: pistis tells who owns a loopback socket by
# them (a plain ws:// relay on 127.0.0.1, docs/protocol.md).
I=$W/initramfs
mkdir -p "$I"/{bin,dev,proc,sys,host,rw,newroot,mods}
install -m 0755 /bin/busybox "$I/bin/busybox"
for m in drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_modern_dev \
	drivers/virtio/virtio_pci_legacy_dev drivers/virtio/virtio_pci fs/netfs/netfs \
	fs/fscache/fscache net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p fs/overlayfs/overlay \
	net/ipv4/inet_diag net/ipv4/tcp_diag net/unix/unix_diag; do
	[ -f "$MODS/kernel/$m.ko" ] || bail "$PKG has no $m.ko"
	cp "$MODS/kernel/$m.ko" "$I/mods/"
	echo "${m##*/}" >>"$I/mods/order"
done
# The guest's command: the guest script from this tree, over the same build;
# PISTIS_VM_CMD (by hand, when hacking) another shell command line in its place.
cat >"$I/cmd" <<EOF
cd '$SRC' && export PISTIS_BUILD='$PISTIS_BUILD' PISTIS_IN_VM=1 &&
${PISTIS_VM_CMD:-exec bash tests/vm/cgroup2-guest.sh}
EOF
cat >"$I/init" <<'EOF'
#!/bin/busybox sh
export PATH=/bin
/bin/busybox --install -s /bin
say() { echo "# vm: $*"; }
die() { echo "Bail out! vm: $*"; echo "PISTIS-VM-END rc=1"; poweroff -f; }
mount -t proc proc /proc && mount -t sysfs sys /sys && mount -t devtmpfs dev /dev ||
	die "cannot mount proc, sys, dev"
for m in $(cat /mods/order); do insmod "/mods/$m.ko" || die "insmod $m"; done
mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=512000,cache=loose host /host ||
	die "cannot mount the host's / over 9p"
mount -t tmpfs -o mode=0755,size=75% rw /rw && mkdir /rw/upper /rw/work || die "tmpfs"
mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /newroot ||
	die "cannot mount the overlay over the host's /"
N=/newroot
mount -t proc proc $N/proc && mount -t sysfs sys $N/sys && mount -t devtmpfs dev $N/dev &&
	mkdir -p $N/dev/pts $N/dev/shm && mount -t devpts -o newinstance,ptmxmode=0666 devpts $N/dev/pts &&
	mount -t tmpfs -o mode=1777 shm $N/dev/shm && mount -t tmpfs -o mode=0755 run $N/run ||
	die "cannot mount proc, sys, dev, run in the new root"
# cgroup2 alone: no v1 hierarchy is mounted, so memory, cpu and pids are v2's
mount -t cgroup2 -o nsdelegate cgroup2 $N/sys/fs/cgroup || die "cannot mount cgroup2"
echo "+memory +cpu +pids" >$N/sys/fs/cgroup/cgroup.subtree_control ||
	die "cannot enable memory cpu pids at the root"
say "cgroup2 controllers: $(cat $N/sys/fs/cgroup/cgroup.controllers)"
say "mounts of type cgroup: $(grep -c ' cgroup ' /proc/mounts)"
ip link set lo up || die "no loopback"
hostname pistis-vm
chroot $N /bin/sh /proc/1/root/cmd </dev/null 2>&1
echo "PISTIS-VM-END rc=$?"
poweroff -f
EOF
chmod 0755 "$I/init"
(cd "$I" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1 >"$W/initramfs.gz") ||
	bail "cannot build the initramfs"

# --- the VM ---------------------------------------------------------------------------------
# KVM where it boots: a machine may have a /dev/kvm that hangs its guests (nested
# virtualisation without the CPU's support: seen on this project's VMs), so a guest that
# only says hello must do so within 20 s under it; else TCG, slower.
qemu() { # SECONDS ACCEL CPU INITRD SERIAL-LOG [QEMU-ARG]...: killed after SECONDS
	local t=$1 a=$2 c=$3 i=$4 s=$5
	shift 5
	timeout -s KILL "$t" "$QEMU" -machine q35 -accel $a -cpu $c -smp 2 -m 2048 -nodefaults -no-reboot \
		-display none -monitor none -serial "file:$s" -kernel "$VMLINUZ" -initrd "$i" \
		-append "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init" "$@" </dev/null
}
mkdir -p "$W/hello/bin" && install -m 0755 /bin/busybox "$W/hello/bin/busybox" &&
	printf '#!/bin/busybox sh\n/bin/busybox echo PISTIS-VM-HELLO\n/bin/busybox poweroff -f\n' \
		>"$W/hello/init" && chmod 0755 "$W/hello/init" &&
	(cd "$W/hello" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1 >"$W/hello.gz") ||
	bail "cannot build the hello initramfs"
ACCEL=tcg,thread=multi
CPU=max
if [ "${PISTIS_VM_ACCEL:-}" != tcg ] && [ -c /dev/kvm ] && { : <>/dev/kvm; } 2>/dev/null; then
	qemu 20 kvm host "$W/hello.gz" "$W/hello.log" >"$W/hello.qemu" 2>&1
	if grep -q PISTIS-VM-HELLO "$W/hello.log" 2>/dev/null; then
		ACCEL=kvm
		CPU=host
	else
		echo "# /dev/kvm is there, but a guest under it did not boot in 20 s: TCG"
	fi
fi
echo "# qemu: accel=$ACCEL, 2 vCPUs, 2 GiB; serial log in $W/serial.log"
T0=$(date +%s)
qemu "${PISTIS_VM_TIMEOUT:-$([ $ACCEL = kvm ] && echo 300 || echo 1200)}" $ACCEL $CPU "$W/initramfs.gz" "$W/serial.log" \
	-virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap \
	>"$W/qemu.log" 2>&1
QRC=$?
echo "# the VM ran $(($(date +%s) - T0)) s (qemu exit $QRC)"
is "qemu exits by the guest's poweroff" "$QRC" 0
LOG=$(tr -d '\r' <"$W/serial.log")
[ -s "$W/qemu.log" ] && sed 's/^/# qemu: /' "$W/qemu.log"

# The guest's own TAP, renumbered into ours; its diagnostics as they were.
guest=0
while IFS= read -r line; do
	case "$line" in
	"ok "[0-9]*) guest=$((guest + 1)); _tap_result 0 "vm: ${line#* - }" ;;
	"not ok "[0-9]*) guest=$((guest + 1)); _tap_result 1 "vm: ${line#* - }" ;;
	"#"* | "Bail out!"*) echo "$line" ;;
	esac
done <<<"$(printf '%s\n' "$LOG" | sed -n '/^# vm:/,/^PISTIS-VM-END/p')"
like "the guest ran to its end, its checks passed" "$LOG" '^PISTIS-VM-END rc=0$'
ok "... having reported at least 40 results (it ran $guest)" test "$guest" -ge 40
like "... with memory, cpu and pids in its cgroup2" "$LOG" '^# vm: cgroup2 controllers: .*memory.*pids|^# vm: cgroup2 controllers: .*pids.*memory'
like "... and no cgroup v1 hierarchy" "$LOG" '^# vm: mounts of type cgroup: 0$'
[ "$_tap_failed" -eq 0 ] || printf '%s\n' "$LOG" | tail -n 60 | sed 's/^/# serial: /'
done_testing
