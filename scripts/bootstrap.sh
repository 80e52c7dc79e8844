#!/bin/sh
# Install the Debian packages a pistis build or test run needs, and say which.
# Usage: scripts/bootstrap.sh [build|check|asan|fuzz|analyze|demo|bench|docker]...
# Idempotent: a package already installed is not touched; nothing happens
# when everything is present.
set -eu

pkgs_build="make gcc musl musl-tools musl-dev gperf dpkg-dev cmake perl pkg-config
	autoconf automake libtool file xz-utils ca-certificates linux-libc-dev"
pkgs_docker="docker.io"
# docker.io: tests/integration/docker.sh runs the binaries in real containers (its own dockerd)
pkgs_check="$pkgs_build debootstrap busybox-static sudo util-linux iproute2 acl attr clang-format
	python3 libcap2-bin procps strace passwd time bc valgrind curl openssl qemu-system-x86
	$pkgs_docker"
# qemu-system-x86: tests/integration/cgroup2-vm.sh boots a pure cgroup v2 VM (Debian's kernel
# package, unpacked into /var/cache/pistis/kernel, never installed) to see the limits hold;
# KVM where /dev/kvm boots a guest, else TCG (slower, still run)
# passwd, time, bc: the benchmarks' short runs in make check (tests/integration/bench-smoke.sh):
# useradd is users.sh's baseline, /usr/bin/time and bc time and divide policy.sh's rows;
# curl asks server-min's HTTP API, openssl makes relay.sh's test CA (failures where missing)
pkgs_asan="gcc clang libseccomp-dev libcap-dev libacl1-dev libcjson-dev libssl-dev
	libwebsockets-dev libsqlite3-dev"
pkgs_fuzz="clang libclang-rt-14-dev $pkgs_asan"
# make analyze: gcc -fanalyzer, clang-tidy (clang's analyser among its checks) and cppcheck
# over a compile_commands.json that bear records from the analysis build (scripts/analyze.sh)
pkgs_analyze="clang-tidy cppcheck bear python3 $pkgs_asan"
pkgs_bench="hyperfine sudo passwd acl util-linux time bc"

want=""
[ $# -gt 0 ] || set -- build
for what in "$@"; do
	case "$what" in
	build) want="$want $pkgs_build" ;;
	check|demo) want="$want $pkgs_check" ;;
	asan) want="$want $pkgs_asan" ;;
	fuzz) want="$want $pkgs_fuzz" ;;
	analyze) want="$want $pkgs_analyze" ;;
	bench) want="$want $pkgs_check $pkgs_bench" ;;
	docker) want="$want $pkgs_docker" ;;
	*) echo "bootstrap: unknown set '$what' (build|check|asan|fuzz|analyze|demo|bench|docker)" >&2; exit 100 ;;
	esac
done

missing=""
for p in $(printf '%s\n' $want | sort -u); do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
[ -n "$missing" ] || exit 0

if [ "$(id -u)" != 0 ]; then
	echo "bootstrap: missing Debian packages:$missing; run as root to install them" >&2
	exit 111
fi
echo "bootstrap: installing missing Debian packages:$missing"
export DEBIAN_FRONTEND=noninteractive
stamp=/var/lib/apt/periodic/pistis-update-stamp
if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +360 2>/dev/null)" ]; then
	apt-get update -qq
	mkdir -p "${stamp%/*}" && touch "$stamp"
fi
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "bootstrap: installed:$missing"
