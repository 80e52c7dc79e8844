#!/bin/bash
# shellcheck disable=SC2317 # build_* are called as "build_$p"
# Build the static (musl) libraries pistis links against, from Debian's
# source packages, into a cache outside the clone. See docs/building.md.
#
# Usage: scripts/build-deps.sh [--mk FILE] [--refresh] [--rebuild] [-h]
#   --mk FILE   also write "DEPS_PREFIX := <prefix>" to FILE (only if it changed)
#   --refresh   apt-get update, then re-resolve the source versions
#   --rebuild   build again even if the prefix for the current key exists
# Environment: PISTIS_DEPS_CACHE (default /var/cache/pistis/deps),
#   PISTIS_DEPS_JOBS (default: nproc), TMPDIR (build directory parent),
#   PISTIS_DEPS_LOCK_TIMEOUT (seconds to wait for another run, default 3600).
# Progress goes to stderr; the last stdout line is the absolute prefix.
# The whole script is one brace group so that bash parses it entirely before
# running it: editing or replacing this file cannot derail a run in progress.
{
set -euo pipefail
export LC_ALL=C
# A parent make must not leak its flags or variables into the sub-builds.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES GNUMAKEFLAGS \
	CC CXX CPP CFLAGS CXXFLAGS CPPFLAGS LDFLAGS LIBS AR RANLIB LD \
	PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR DESTDIR prefix

# Source package -> library name, in build order (acl needs attr,
# libwebsockets needs mbedtls).
SRCPKGS=(libseccomp libcap2 attr acl cjson mbedtls libwebsockets)
declare -A LIBNAME=([libseccomp]=libseccomp [libcap2]=libcap [attr]=libattr
	[acl]=libacl [cjson]=cjson [mbedtls]=mbedtls [libwebsockets]=libwebsockets)

say() { echo "build-deps: $*" >&2; }
die() { say "error: $*"; exit 1; }

# A run that (through some bug) reaches the project's Makefile again would
# wait forever for its own lock: refuse instead.
[ -z "${PISTIS_IN_BUILD_DEPS:-}" ] || die "called from inside a build-deps run (pid $PISTIS_IN_BUILD_DEPS)"
export PISTIS_IN_BUILD_DEPS=$$

usage() { sed -n '/^# Usage:/,/^# Progress/s/^# \{0,1\}//p' "$0"; }

mkfile="" refresh=0 rebuild=0
while [ $# -gt 0 ]; do
	case "$1" in
	--mk) [ $# -ge 2 ] || die "--mk needs a file"; mkfile=$2; shift ;;
	--mk=*) mkfile=${1#--mk=} ;;
	--refresh) refresh=1 ;;
	--rebuild) rebuild=1 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument '$1'" ;;
	esac
	shift
done

HERE=$(cd "$(dirname "$0")" && pwd -P)
SELF=$HERE/$(basename "$0")
WRAPPER=$HERE/musl-cc
[ -x "$WRAPPER" ] || die "$WRAPPER missing or not executable"

CACHE=${PISTIS_DEPS_CACHE:-/var/cache/pistis/deps}
mkdir -p "$CACHE" || die "cannot create $CACHE (set PISTIS_DEPS_CACHE)"
CACHE=$(cd "$CACHE" && pwd -P)
export PISTIS_DEPS_CACHE=$CACHE # the wrapper keeps its kinc/ there
LAST=$CACHE/last-versions       # "srcpkg version" lines of the last good build

# Our patches on top of Debian's: scripts/patches/<srcpkg>/NNNN-*.patch, applied
# in name order right after the source is unpacked (see scripts/patches/README).
PATCHES=$HERE/patches

# The key: exact source versions + this script + our patches + the wrapper + musl + arch.
key_of() { # $1: file of "srcpkg version" lines
	{
		echo "build-deps $(sha256sum <"$SELF" | cut -c1-64)"
		echo "patches $(cd "$PATCHES" 2>/dev/null && find . -name '*.patch' -type f | LC_ALL=C sort |
			xargs -r sha256sum | sha256sum | cut -c1-64)"
		echo "musl-cc $(sha256sum <"$WRAPPER" | cut -c1-64)"
		echo "musl $(dpkg-query -W -f='${Version}' musl-dev 2>/dev/null || echo none)"
		echo "arch $(uname -m)"
		cat "$1"
	} | sha256sum | cut -c1-16
}

finish() { # $1: prefix
	if [ -n "$mkfile" ]; then
		line="DEPS_PREFIX := $1"
		if [ "$(cat "$mkfile" 2>/dev/null)" != "$line" ]; then
			mkdir -p "$(dirname "$mkfile")"
			echo "$line" >"$mkfile.tmp.$$" && mv -f "$mkfile.tmp.$$" "$mkfile"
		fi
	fi
	echo "$1"
	exit 0
}

# Fast path: nothing to do when the last resolved versions still hold (no
# apt list changed since) and their prefix exists.
apt_lists_changed() {
	[ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*Sources*' -newer "$LAST" -print -quit 2>/dev/null)" ]
}
if [ $refresh = 0 ] && [ $rebuild = 0 ] && [ -s "$LAST" ] && ! apt_lists_changed; then
	key=$(key_of "$LAST")
	if [ -f "$CACHE/$key/VERSIONS" ]; then
		say "up to date: $CACHE/$key"
		finish "$CACHE/$key"
	fi
fi

# Slow path: one resolver/builder at a time per cache.
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
	say "waiting for another build-deps run (lock $CACHE/.lock)"
	flock -w "${PISTIS_DEPS_LOCK_TIMEOUT:-3600}" 9 || die "gave up waiting for $CACHE/.lock"
fi

apt_update() {
	[ "$(id -u)" = 0 ] || die "apt-get update needs root"
	say "apt-get update"
	for _ in 1 2 3 4 5 6; do
		apt-get update -qq -o DPkg::Lock::Timeout=120 >&2 && return 0
		sleep 10
	done
	die "apt-get update failed"
}

have_deb_src() {
	grep -qsE '^[[:space:]]*(Types:.*deb-src|deb-src[[:space:]])' /etc/apt/sources.list \
		/etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources
}

# Add a deb-src twin of every enabled "deb" source (deb822 and one-line).
add_deb_src() {
	[ "$(id -u)" = 0 ] || die "no deb-src entry in apt's sources; run as root to add one"
	local dir=/etc/apt/sources.list.d f
	local out822=$dir/pistis-deb-src.sources outlist=$dir/pistis-deb-src.list
	for f in "$dir"/*.sources; do
		if [ ! -f "$f" ] || [ "$f" = "$out822" ]; then continue; fi
		awk '
		function flush() {
			if (st != "" && types ~ /(^|[ \t])deb([ \t]|$)/ && tolower(enabled) != "no")
				printf "Types: deb-src\n%s\n", st
			st = ""; types = ""; enabled = ""
		}
		/^[ \t]*#/ { next }
		/^[ \t]*$/ { flush(); next }
		/^Types:/ { types = $0; sub(/^Types:[ \t]*/, "", types); next }
		/^Enabled:/ { enabled = $2 }
		{ st = st $0 "\n" }
		END { flush() }' "$f"
	done >"$out822.new"
	for f in /etc/apt/sources.list "$dir"/*.list; do
		if [ ! -f "$f" ] || [ "$f" = "$outlist" ]; then continue; fi
		sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f"
	done >"$outlist.new"
	for f in "$out822" "$outlist"; do
		if [ -s "$f.new" ]; then mv -f "$f.new" "$f"; say "added deb-src entries: $f"; else rm -f "$f.new"; fi
	done
	have_deb_src || die "could not derive a deb-src entry from apt's sources"
}

# apt-get update only when asked to or when apt knows no source packages.
if [ $refresh = 1 ] || [ -z "$(apt-cache showsrc --only-source libseccomp 2>/dev/null)" ]; then
	have_deb_src || add_deb_src
	apt_update
fi

# All versions apt knows for a source package, newest first.
versions_of() {
	local vs best v rest out=""
	vs=$(apt-cache showsrc --only-source "$1" 2>/dev/null | sed -n 's/^Version: //p' | sort -u)
	while [ -n "$vs" ]; do
		best=""
		for v in $vs; do
			if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
		done
		out="$out $best" rest=""
		for v in $vs; do [ "$v" = "$best" ] || rest="$rest $v"; done
		vs=$rest
	done
	echo "${out# }"
}

declare -A CANDS VER
want=$(mktemp)
trap 'rm -f "$want"' EXIT
for p in "${SRCPKGS[@]}"; do
	CANDS[$p]=$(versions_of "$p")
	[ -n "${CANDS[$p]}" ] || die "apt knows no source package '$p' (try --refresh)"
	echo "$p ${CANDS[$p]%% *}"
done >"$want"

record() { # $1: versions file that was built
	cp "$1" "$LAST.new" && chmod 644 "$LAST.new" && mv -f "$LAST.new" "$LAST"
}

key=$(key_of "$want")
if [ $rebuild = 0 ] && [ -f "$CACHE/$key/VERSIONS" ]; then
	record "$want"
	say "up to date: $CACHE/$key"
	finish "$CACHE/$key"
fi

# Fetch the sources (kept in $CACHE/src/), newest version that downloads.
SRC=$CACHE/src
mkdir -p "$SRC"
fetch() { # $1 pkg; sets VER[pkg]
	local p=$1 v d why
	for v in ${CANDS[$p]}; do
		d=$SRC/${p}_${v//:/%}
		if ! ls "$d"/*.dsc >/dev/null 2>&1; then
			rm -rf "$d.part"; mkdir -p "$d.part"; chmod 755 "$d.part"
			if ! (cd "$d.part" && apt-get source --only-source --download-only -qq "$p=$v" >&2 2>"$d.part/.err"); then
				# The reason without URLs (they name the mirror).
				why=$(grep -m1 '^E:' "$d.part/.err" 2>/dev/null |
					sed -E 's#[a-z]+://[^ ]*##g; s/\[IP:[^]]*\]//g; s/ +/ /g; s/^E: //' || true)
				say "$p $v: download failed (${why:-apt-get source failed}), trying an older version"
				rm -rf "$d.part"
				continue
			fi
			rm -f "$d.part/.err"; rm -rf "$d"; mv "$d.part" "$d"
		fi
		VER[$p]=$v
		return 0
	done
	die "no version of source package '$p' could be downloaded (${CANDS[$p]})"
}
for p in "${SRCPKGS[@]}"; do fetch "$p"; done
for p in "${SRCPKGS[@]}"; do echo "$p ${VER[$p]}"; done >"$want"
key=$(key_of "$want")
if [ $rebuild = 0 ] && [ -f "$CACHE/$key/VERSIONS" ]; then
	record "$want"
	say "up to date: $CACHE/$key"
	finish "$CACHE/$key"
fi

# ---- build ---------------------------------------------------------------
FINAL=$CACHE/$key
TMPP=$FINAL.tmp
B=$(mktemp -d "${TMPDIR:-/tmp}/pistis-deps.XXXXXX")
STAGE=$CACHE/$key.stage        # DESTDIR: files land in $STAGE$FINAL
S=$STAGE$FINAL                 # the staged prefix that later builds use
trap 'rm -f "$want"; rm -rf "$B" "$STAGE" "$TMPP"' EXIT
rm -rf "$STAGE" "$TMPP"
mkdir -p "$S/include" "$S/lib/pkgconfig"

JOBS=${PISTIS_DEPS_JOBS:-$(nproc 2>/dev/null || echo 2)}
export CC=$WRAPPER AR=ar RANLIB=ranlib
# -fPIE: the binaries are static PIEs (docs/building.md). Debian's gcc makes PIE code by
# default, but the archives must not depend on that, and check_pic below verifies them.
export CFLAGS="-Os -fPIE -fstack-protector-strong -ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables -fno-unwind-tables"
export CPPFLAGS="-I$S/include" LDFLAGS="-L$S/lib"
export PKG_CONFIG_LIBDIR=$S/lib/pkgconfig PKG_CONFIG_PATH="" PKG_CONFIG_SYSROOT_DIR=$STAGE
t0=$(date +%s)

srcdir() { echo "$SRC/${1}_${VER[$1]//:/%}"; }
# Debian source, patches applied.
unpack_debian() { # $1 pkg -> $B/$1
	dpkg-source --no-check -x "$(srcdir "$1")"/*.dsc "$B/$1"
	[ -d "$B/$1/debian" ] || { echo "dpkg-source left no $B/$1/debian" >&2; exit 1; }
}
# Upstream tarball only (Debian's patches touch autotools files).
unpack_orig() { # $1 pkg -> $B/$1
	local t
	for t in "$(srcdir "$1")"/*.orig.tar.*; do
		case "$t" in *.asc) ;; *) break ;; esac
	done
	mkdir -p "$B/$1"
	tar -xf "$t" -C "$B/$1" --strip-components=1
	[ -x "$B/$1/configure" ] || { echo "no configure in $t" >&2; exit 1; }
}
unla() { find "$S/lib" -name '*.la' -delete; }
apply_patches() { # $1 pkg, unpacked in $B/$1
	local f
	for f in "$PATCHES/$1"/*.patch; do
		[ -f "$f" ] || continue
		echo "applying $f"
		patch -d "$B/$1" -p1 --forward --batch --no-backup-if-mismatch <"$f"
	done
}

build_libseccomp() {
	unpack_debian libseccomp
	cd "$B/libseccomp"
	./configure --prefix="$FINAL" --libdir="$FINAL/lib" --enable-static --disable-shared --disable-python
	make -j"$JOBS"
	make install DESTDIR="$STAGE"
}
build_libcap2() {
	local opts=(CC="$CC" BUILD_CC=gcc AR=ar RANLIB=ranlib SHARED=no PTHREADS=no GOLANG=no
		PAM_CAP=no LIBATTR=no prefix="$FINAL" lib=lib DESTDIR="$STAGE"
		COPTS="$CFLAGS" RAISE_SETFCAP=no)
	unpack_debian libcap2
	cd "$B/libcap2"
	make -C libcap -j"$JOBS" "${opts[@]}" libcap.a
	make -C libcap "${opts[@]}" install-static-cap
}
build_attr() {
	unpack_orig attr
	cd "$B/attr"
	./configure --prefix="$FINAL" --libdir="$FINAL/lib" --sysconfdir=/etc \
		--enable-static --disable-shared --disable-nls
	make -j"$JOBS"
	make install DESTDIR="$STAGE"
	unla
}
build_acl() {
	unpack_orig acl
	cd "$B/acl"
	./configure --prefix="$FINAL" --libdir="$FINAL/lib" --sysconfdir=/etc \
		--enable-static --disable-shared --disable-nls
	make -j"$JOBS"
	make install DESTDIR="$STAGE"
	unla
}
build_cjson() {
	unpack_debian cjson
	cd "$B/cjson"
	# shellcheck disable=SC2086 # CFLAGS is a list
	$CC $CFLAGS -std=c89 -c cJSON.c -o cJSON.o
	ar rcs libcjson.a cJSON.o
	install -D -m 644 cJSON.h "$S/include/cjson/cJSON.h"
	install -D -m 644 libcjson.a "$S/lib/libcjson.a"
}
# TLS for the static binaries (issue 7: pistisd <= 2 MiB). They only ever dial out
# (pistisd serve, pistis), so: a TLS 1.2 client with ECDHE, AES-GCM and
# ChaCha20-Poly1305, RSA and ECDSA certificates, X.509 chain and host name
# verification; mbedtls 2.28 has no TLS 1.3 (only an experimental prototype, left off).
MBEDTLS_OFF=(
	# protocol versions and features a TLS 1.2 client does not use
	MBEDTLS_SSL_PROTO_TLS1 MBEDTLS_SSL_PROTO_TLS1_1 MBEDTLS_SSL_PROTO_DTLS
	MBEDTLS_SSL_DTLS_ANTI_REPLAY MBEDTLS_SSL_DTLS_HELLO_VERIFY
	MBEDTLS_SSL_DTLS_CLIENT_PORT_REUSE MBEDTLS_SSL_DTLS_BADMAC_LIMIT
	MBEDTLS_SSL_CBC_RECORD_SPLITTING MBEDTLS_SSL_TRUNCATED_HMAC
	MBEDTLS_SSL_RENEGOTIATION MBEDTLS_SSL_CONTEXT_SERIALIZATION
	MBEDTLS_SSL_SRV_C MBEDTLS_SSL_CACHE_C MBEDTLS_SSL_COOKIE_C MBEDTLS_SSL_TICKET_C
	# key exchanges without forward secrecy, with finite-field DH, or with PSKs
	MBEDTLS_KEY_EXCHANGE_PSK_ENABLED MBEDTLS_KEY_EXCHANGE_DHE_PSK_ENABLED
	MBEDTLS_KEY_EXCHANGE_ECDHE_PSK_ENABLED MBEDTLS_KEY_EXCHANGE_RSA_PSK_ENABLED
	MBEDTLS_KEY_EXCHANGE_RSA_ENABLED MBEDTLS_KEY_EXCHANGE_DHE_RSA_ENABLED
	MBEDTLS_KEY_EXCHANGE_ECDH_ECDSA_ENABLED MBEDTLS_KEY_EXCHANGE_ECDH_RSA_ENABLED
	MBEDTLS_DHM_C
	# legacy ciphers and hashes, VIA Padlock, CCM
	MBEDTLS_ARC4_C MBEDTLS_DES_C MBEDTLS_BLOWFISH_C MBEDTLS_CAMELLIA_C
	MBEDTLS_XTEA_C MBEDTLS_RIPEMD160_C MBEDTLS_PADLOCK_C MBEDTLS_CCM_C
	# curves: P-256, P-384, P-521 and X25519 stay
	MBEDTLS_ECP_DP_SECP192R1_ENABLED MBEDTLS_ECP_DP_SECP224R1_ENABLED
	MBEDTLS_ECP_DP_SECP192K1_ENABLED MBEDTLS_ECP_DP_SECP224K1_ENABLED
	MBEDTLS_ECP_DP_SECP256K1_ENABLED MBEDTLS_ECP_DP_BP256R1_ENABLED
	MBEDTLS_ECP_DP_BP384R1_ENABLED MBEDTLS_ECP_DP_BP512R1_ENABLED
	MBEDTLS_ECP_DP_CURVE448_ENABLED
	# no private keys, CRLs, CSRs, PSA or self tests in the binaries
	MBEDTLS_PKCS12_C MBEDTLS_PKCS5_C MBEDTLS_X509_CRL_PARSE_C MBEDTLS_X509_CSR_PARSE_C
	MBEDTLS_PSA_CRYPTO_C MBEDTLS_PSA_CRYPTO_STORAGE_C MBEDTLS_PSA_ITS_FILE_C
	MBEDTLS_SELF_TEST MBEDTLS_CERTS_C MBEDTLS_DEBUG_C MBEDTLS_TIMING_C
	MBEDTLS_VERSION_FEATURES
)
build_mbedtls() {
	local o
	unpack_debian mbedtls
	cd "$B/mbedtls"
	for o in "${MBEDTLS_OFF[@]}"; do
		grep -q "^#define $o\$" include/mbedtls/config.h ||
			{ echo "mbedtls config.h: no '#define $o' to turn off" >&2; exit 1; }
		sed -i "s|^#define $o\$|//#define $o /* off: scripts/build-deps.sh */|" include/mbedtls/config.h
	done
	# scripts/patches/mbedtls: iPAddress SAN matching (see its header)
	apply_patches mbedtls
	make -C library -j"$JOBS" CC="$CC" AR=ar CFLAGS="$CFLAGS" static
	install -d "$S/include/mbedtls" "$S/include/psa" "$S/lib"
	install -m 644 include/mbedtls/*.h "$S/include/mbedtls/"
	install -m 644 include/psa/*.h "$S/include/psa/"
	install -m 644 library/libmbedtls.a library/libmbedx509.a library/libmbedcrypto.a "$S/lib/"
}
build_libwebsockets() {
	unpack_debian libwebsockets
	apply_patches libwebsockets
	mkdir -p "$B/libwebsockets/build"
	cd "$B/libwebsockets/build"
	cmake .. -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_C_COMPILER="$CC" \
		-DCMAKE_C_FLAGS="$CFLAGS -Wno-error=deprecated-declarations" \
		-DCMAKE_C_FLAGS_RELEASE="-Os" -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
		-DCMAKE_INSTALL_PREFIX="$FINAL" -DCMAKE_INSTALL_LIBDIR=lib \
		-DCMAKE_POLICY_DEFAULT_CMP0056=NEW -DCMAKE_EXE_LINKER_FLAGS="-L$S/lib" \
		-DCMAKE_FIND_ROOT_PATH="$S" \
		-DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY \
		-DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY \
		-DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY \
		-DLWS_WITH_STATIC=ON -DLWS_WITH_SHARED=OFF \
		-DLWS_WITH_SSL=ON -DLWS_WITH_MBEDTLS=ON \
		-DLWS_MBEDTLS_INCLUDE_DIRS="$S/include" \
		-DLWS_MBEDTLS_LIBRARIES="$S/lib/libmbedtls.a;$S/lib/libmbedx509.a;$S/lib/libmbedcrypto.a" \
		-DLWS_WITHOUT_CLIENT=OFF -DLWS_WITHOUT_SERVER=OFF \
		-DLWS_WITHOUT_TESTAPPS=ON -DLWS_WITH_MINIMAL_EXAMPLES=OFF \
		-DLWS_WITHOUT_EXTENSIONS=ON -DLWS_WITH_ZLIB=OFF -DLWS_WITH_ZIP_FOPS=OFF \
		-DLWS_WITH_LIBUV=OFF -DLWS_WITH_LIBEV=OFF -DLWS_WITH_LIBEVENT=OFF \
		-DLWS_WITH_GLIB=OFF -DLWS_WITH_SQLITE3=OFF \
		-DLWS_WITH_HTTP2=OFF -DLWS_WITH_HTTP_BASIC_AUTH=OFF \
		-DLWS_WITH_HTTP_UNCOMMON_HEADERS=OFF -DLWS_WITH_CUSTOM_HEADERS=OFF \
		-DLWS_WITH_LEJP=OFF -DLWS_WITH_SYS_SMD=OFF -DLWS_WITH_DIR=OFF
	make -j"$JOBS"
	make install DESTDIR="$STAGE"
}

for p in "${SRCPKGS[@]}"; do
	say "${LIBNAME[$p]} ${VER[$p]} (source package $p)"
	log=$B/$p.log
	# Not "if ! (...)": that context would switch set -e off inside.
	set +e
	(set -e; cd "$B"; "build_$p") >"$log" 2>&1
	rc=$?
	set -e
	if [ $rc != 0 ]; then
		tail -n 40 "$log" >&2
		trap 'rm -f "$want"' EXIT # keep the build tree for a look
		die "${LIBNAME[$p]} ${VER[$p]} failed; log: $log"
	fi
done

# Every archive must go into a static PIE. ld refuses an absolute relocation in a PIE
# only when the member holding it is pulled into a link, maybe long after this build;
# say so now, naming the library. x86_64's absolute 32-bit relocations are what code
# built without -fPIE/-fPIC has (other architectures: the link is the check).
check_pic() {
	local a bad
	[ "$(uname -m)" = x86_64 ] || return 0
	for a in "$S"/lib/*.a; do
		bad=$(readelf -rW "$a" | awk '($3 == "R_X86_64_32" || $3 == "R_X86_64_32S") && n++ < 3')
		[ -z "$bad" ] || die "$(basename "$a") has code that cannot go into a static PIE" \
			"(absolute relocations, built without -fPIE?): $bad"
	done
}
check_pic

# Fix up the staged prefix, then move it into place atomically.
mv "$S" "$TMPP"
rm -rf "$STAGE"
rm -rf "${TMPP:?}/bin" "${TMPP:?}/sbin" "${TMPP:?}/share" "${TMPP:?}/etc"
# Text files (cmake exports) that name the staging path get the final one.
grep -rlIF -- "$STAGE" "$TMPP" | while read -r f; do
	sed -i "s|$STAGE||g" "$f"
done || true
{
	for p in "${SRCPKGS[@]}"; do echo "${LIBNAME[$p]} ${VER[$p]}"; done
} >"$TMPP/VERSIONS.new"
vs=$(awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }' "$TMPP/VERSIONS.new")
cat >"$TMPP/include/pistis-deps-versions.h" <<EOF
/* Generated by scripts/build-deps.sh: Debian source versions of the static deps. */
#ifndef PISTIS_DEPS_VERSIONS_H
#define PISTIS_DEPS_VERSIONS_H
#define PISTIS_DEP_VERSIONS "$vs"
#endif
EOF
mv "$TMPP/VERSIONS.new" "$TMPP/VERSIONS" # marks the prefix complete
if [ -e "$FINAL" ]; then
	mv "$FINAL" "$FINAL.old.$$" && rm -rf "$FINAL.old.$$"
fi
mv -T "$TMPP" "$FINAL"
record "$want"
rm -rf "$B"
trap 'rm -f "$want"' EXIT
say "built in $(($(date +%s) - t0)) s: $FINAL"
finish "$FINAL"
}
