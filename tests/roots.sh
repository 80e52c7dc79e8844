#!/bin/bash
# Build (once) and print the path of a cached base root for integration tests.
#
#   tests/roots.sh debian   Debian bookworm minbase + sudo (debootstrap; minutes, once)
#   tests/roots.sh trixie   Debian 13 (trixie) minbase + sudo, the same way; not used by
#                           `make check`: PISTIS_TEST_DEBIAN=trixie runs the tests' Debian
#                           root on it (tests/lib.sh root_fresh)
#   tests/roots.sh musl     busybox-static + Debian's musl runtime, /etc with root only
#
# Roots live under ${PISTIS_ROOTS_CACHE:-/var/cache/pistis/roots}/<kind>-<key>, where the
# key hashes the recipe (the builder function's text and the versions of the host packages
# it copies), so a change to the recipe builds a new root. A root is built into
# <dir>.tmp and renamed when complete, under a lock, so parallel callers and interrupted
# builds never see half a root. Tests never write to a base root: tests/lib.sh's
# root_fresh puts an overlay on top of it.
set -euo pipefail

cache=${PISTIS_ROOTS_CACHE:-/var/cache/pistis/roots}

die() {
	echo "roots.sh: $*" >&2
	exit 111
}

# The package mirror is whatever the host's apt uses; it is read at run time so that no
# host name is written into the tree.
debian_mirror() {
	local f uri=""
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		# The first URIs: of a stanza that is not the security archive.
		uri=$(awk '
			/^[[:space:]]*$/ { if (u != "" && !sec) { print u; exit } u = ""; sec = 0; next }
			/^URIs:/ { u = $2 }
			/^Suites:/ { if ($0 ~ /-security/) sec = 1 }
			END { if (u != "" && !sec) print u }' "$f" | head -n 1)
		[ -n "$uri" ] && break
	done
	if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
		uri=$(awk '$1 == "deb" && $0 !~ /-security/ { print $2; exit }' /etc/apt/sources.list)
	fi
	[ -n "$uri" ] || die "cannot find a Debian mirror in /etc/apt/sources.list.d/*.sources"
	echo "$uri"
}

build_debian() { # dir
	command -v debootstrap >/dev/null || die "debootstrap is not installed (scripts/bootstrap.sh check)"
	local log=$1.log
	if ! debootstrap --variant=minbase --include=sudo bookworm "$1" "$(debian_mirror)" \
		>"$log" 2>&1; then
		tail -n 20 "$log" >&2
		return 1
	fi
	rm -f "$log"
	# Keep the cached root small: the .debs and apt lists are not needed to run tests.
	rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*_Packages
	mkdir -p "$1/usr/local/bin" "$1/usr/local/lib/pistis-tests"
}

# Its own function, not build_debian with a suite argument: the recipe key hashes the
# builder's text, and changing build_debian's would rebuild every cached bookworm root.
build_trixie() { # dir
	command -v debootstrap >/dev/null || die "debootstrap is not installed (scripts/bootstrap.sh check)"
	[ -e /usr/share/debootstrap/scripts/trixie ] || die "this debootstrap does not know trixie"
	local log=$1.log
	if ! debootstrap --variant=minbase --include=sudo trixie "$1" "$(debian_mirror)" \
		>"$log" 2>&1; then
		tail -n 20 "$log" >&2
		return 1
	fi
	rm -f "$log"
	rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*_Packages
	mkdir -p "$1/usr/local/bin" "$1/usr/local/lib/pistis-tests"
}

build_musl() { # dir
	local d=$1 bb=/bin/busybox ld=/lib/ld-musl-x86_64.so.1 libc app
	[ -x "$bb" ] || die "$bb missing (install busybox-static)"
	file -L "$bb" | grep -q 'statically linked' || die "$bb is not static"
	[ -e "$ld" ] || die "$ld missing (install musl)"
	libc=$(readlink -f "$ld")
	mkdir -p "$d"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,usr/local/lib/pistis-tests} \
		"$d"/{etc,root,proc,sys,dev,lib,run,var/tmp}
	install -m 0755 "$bb" "$d/bin/busybox"
	# --list-full gives each applet with its usual directory (bin/ls, usr/bin/awk …).
	for app in $("$bb" --list-full); do
		[ "$app" = bin/busybox ] && continue
		[ -e "$d/$app" ] || ln -s /bin/busybox "$d/$app"
	done
	[ -e "$d/bin/sh" ] || ln -s /bin/busybox "$d/bin/sh"
	# Debian's musl: the dynamic loader is a symlink to libc.so; keep that shape.
	mkdir -p "$d$(dirname "$libc")"
	install -m 0755 "$libc" "$d$libc"
	ln -sfn "$libc" "$d$ld"
	printf 'root:x:0:0:root:/root:/bin/sh\n' >"$d/etc/passwd"
	printf 'root:x:0:\n' >"$d/etc/group"
	chmod 0644 "$d/etc/passwd" "$d/etc/group"
	chmod 0700 "$d/root"
	install -d -m 1777 "$d/tmp"
	chmod 1777 "$d/var/tmp"
}

pkgver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo none; }

recipe_key() { # kind
	{
		declare -f "build_$1"
		case "$1" in
		debian) echo bookworm minbase sudo ;;
		trixie) echo trixie minbase sudo ;;
		musl) pkgver busybox-static; pkgver musl ;;
		*) ;;
		esac
	} | sha256sum | cut -c1-12
}

main() {
	local kind=${1:-} dir lock
	case "$kind" in
	debian | trixie | musl) ;;
	-h | --help)
		sed -n '2,16s/^# \{0,1\}//p' "$0"
		exit 0
		;;
	*)
		echo "Usage: tests/roots.sh debian|trixie|musl" >&2
		exit 100
		;;
	esac
	[ "$(id -u)" = 0 ] || die "must run as root (builds a root filesystem)"
	mkdir -p "$cache"
	dir=$cache/$kind-$(recipe_key "$kind")
	if [ ! -d "$dir" ]; then
		lock=$cache/.$kind.lock
		exec 9>"$lock"
		flock 9
		if [ ! -d "$dir" ]; then
			rm -rf "$dir.tmp"
			echo "roots.sh: building $kind root in $dir (once)" >&2
			if ! "build_$kind" "$dir.tmp"; then
				rm -rf "$dir.tmp"
				die "building the $kind root failed"
			fi
			mv "$dir.tmp" "$dir"
		fi
		exec 9>&-
	fi
	echo "$dir"
}

main "$@"
