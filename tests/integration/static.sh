#!/bin/bash
# The static binaries are static PIEs (ASLR for their own code and data, RELRO in force),
# and the very same files run on a glibc base (Debian) and a musl base (busybox + musl)
# with nothing else from the image.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
export LC_ALL=C

bins=""
for b in pistisd pi-env pistisd-entry pistis; do
	[ -x "$BIN/$b" ] && bins="$bins $b"
done
[ -x "$BIN/pistisd" ] || { echo "Bail out! $BIN/pistisd is not built"; exit 1; }
[ -x "$BIN/pistisd-entry" ] || { echo "Bail out! $BIN/pistisd-entry is not built"; exit 1; }

for b in $bins; do
	like "$b: file says static-pie linked" "$(file -L "$BIN/$b")" 'static-pie linked'
	# glibc's ldd: "statically linked" for a static PIE ("not a dynamic executable" for
	# a non-PIE one, a list of libraries for a dynamic one).
	out=$(ldd "$BIN/$b" 2>&1)
	like "$b: ldd says statically linked" "$out" '^[[:space:]]*statically linked$'
	unlike "$b: no interpreter" "$(file -L "$BIN/$b")" 'interpreter'
	out=$(readelf -hlW "$BIN/$b" 2>&1)
	like "$b: ELF type ET_DYN (the kernel picks its load address)" "$out" '^ +Type: +DYN '
	unlike "$b: no PT_INTERP" "$out" '^ +INTERP '
	like "$b: a PT_GNU_RELRO segment" "$out" '^ +GNU_RELRO '
	out=$(readelf -dW "$BIN/$b" 2>&1)
	unlike "$b: no DT_NEEDED" "$out" '\(NEEDED\)'
	unlike "$b: no text relocations" "$out" 'TEXTREL'
	like "$b: DF_1_PIE" "$out" '\(FLAGS_1\).* PIE'
done

# Where the binary is mapped in a running pistisd-entry, and whether its RELRO range is
# read-only (lib/relro.c: musl leaves it writable). Its child reads the parent's maps, so
# nothing has to be caught running. Flags: no /data, no mount changes, one run.
entry_maps() { # root
	# shellcheck disable=SC2016 # $PPID is the child shell's
	in_root "$1" pistisd-entry --no-prepare --no-harden-mounts --no-restart -- \
		/bin/sh -c 'cat /proc/$PPID/maps' 2>/dev/null
}
# The start of the mapping of file offset 0 of pistisd-entry, in hex without 0x.
map_base() { # maps
	printf '%s\n' "$1" | awk '$6 ~ /\/pistisd-entry$/ && $3 == "00000000" {
		split($1, a, "-"); print a[1]; exit }'
}
load0=$(readelf -lW "$BIN/pistisd-entry" | awk '$1 == "LOAD" && $2 ~ /^0x0+$/ { print $3; exit }')
relro=$(readelf -lW "$BIN/pistisd-entry" | awk '$1 == "GNU_RELRO" { print $3, $6 }')
page=$(getconf PAGESIZE)
# "ok" when the pages of PT_GNU_RELRO lie in read-only mappings, else what is wrong.
relro_state() { # maps base-hex
	local base=$((0x$2 - ${load0:-0})) va=${relro% *} sz=${relro#* } s e lo hi seen=0 bad=""
	local range perms rest
	[ -n "$relro" ] || { echo "no PT_GNU_RELRO"; return; }
	s=$(((base + va) & ~(page - 1)))
	e=$(((base + va + sz) & ~(page - 1)))
	[ "$s" -lt "$e" ] || { echo "PT_GNU_RELRO covers no whole page"; return; }
	while read -r range perms rest; do
		lo=$((0x${range%-*})) hi=$((0x${range#*-}))
		if [ "$lo" -ge "$e" ] || [ "$hi" -le "$s" ]; then continue; fi
		seen=$((seen + (hi < e ? hi : e) - (lo > s ? lo : s)))
		[ "$perms" = r--p ] || bad="$bad $range $perms"
	done <<<"$1"
	if [ -n "$bad" ]; then echo "writable:$bad"
	elif [ "$seen" != $((e - s)) ]; then echo "not all mapped ($seen of $((e - s)) bytes)"
	else echo ok; fi
}

# TLS is mbedtls (issue 7: size, and no libcrypto CPUID probe at every start)
out=$("$BIN/pistisd" --version)
like "pistisd --version: linked mbedtls" "$out" '^linked: .*mbedtls [0-9]'
unlike "pistisd --version: no OpenSSL" "$out" 'openssl'
ok "pistisd: no OpenSSL symbol in the binary" sh -c "! grep -qa 'OPENSSL_ia32cap\|OpenSSL 3' '$BIN/pistisd'"

is "pistisd-musl is the same inode as pistisd" \
	"$(stat -c '%d:%i' "$BIN/pistisd-musl")" "$(stat -c '%d:%i' "$BIN/pistisd")"
ok "pistisd-musl has the same content as pistisd" cmp "$BIN/pistisd" "$BIN/pistisd-musl"

S=$(scratch)
for kind in debian musl; do
	R=$(root_fresh "$kind") || { echo "Bail out! no $kind root"; exit 1; }
	# The musl base has no glibc at all; the Debian one has no musl loader: a binary
	# that needed either would fail on one of them.
	if [ "$kind" = musl ]; then
		ok "$kind root: no glibc loader present" test ! -e "$R/lib64/ld-linux-x86-64.so.2"
	else
		ok "$kind root: no musl loader present" test ! -e "$R/lib/ld-musl-x86_64.so.1"
	fi
	out=$(in_root "$R" pistisd --version 2>&1)
	is "$kind root: pistisd --version exits 0" "$?" 0
	like "$kind root: pistisd --version names itself" "$out" '^pistisd [0-9]+\.[0-9]+\.[0-9]+'
	out=$(in_root "$R" pistisd-musl --version 2>&1)
	like "$kind root: pistisd-musl --version runs" "$out" '^pistisd [0-9]'

	m1=$(entry_maps "$R")
	m2=$(entry_maps "$R")
	b1=$(map_base "$m1")
	b2=$(map_base "$m2")
	ok "$kind root: pistisd-entry runs and its maps show it (got '$b1')" test -n "$b1"
	# A non-PIE binary sits at its link address (0x400000 here), every run.
	ok "$kind root: pistisd-entry is relocated (mapped at 0x$b1, linked at ${load0:-?})" \
		test -n "$b1" -a -n "$load0" -a "$((0x${b1:-0}))" != "$((${load0:-0}))"
	if [ "$(cat /proc/sys/kernel/randomize_va_space)" = 0 ]; then
		skip "$kind root: two runs of pistisd-entry load at different addresses" \
			"ASLR is off on this host (kernel.randomize_va_space=0)"
	else
		ok "$kind root: two runs of pistisd-entry load at different addresses (0x$b1, 0x$b2)" \
			test -n "$b1" -a -n "$b2" -a "$b1" != "$b2"
	fi
	is "$kind root: pistisd-entry's RELRO range is read-only while it runs" \
		"$(relro_state "$m1" "${b1:-0}")" ok
	in_root "$R" pistisd check --json >"$S/$kind.json" 2>"$S/$kind.err"
	rc=$?
	ok "$kind root: pistisd check exits 0 or 1 (a verdict, not an error; got $rc)" \
		test "$rc" = 0 -o "$rc" = 1
	ok "$kind root: pistisd check --json is valid JSON" python3 -m json.tool "$S/$kind.json"
	is "$kind root: the check looked at / inside the root" \
		"$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["root"])' "$S/$kind.json")" /
	if [ -x "$BIN/pi-env" ]; then
		out=$(in_root "$R" pi-env -- /bin/sh -c 'echo ran' 2>&1)
		is "$kind root: pi-env chain-loads a command" "$out" ran
		out=$(in_root "$R" pi-env --version 2>&1)
		like "$kind root: pi-env --version" "$out" '^pi-env [0-9]'
	fi
done

done_testing
