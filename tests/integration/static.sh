#!/bin/bash
# The static binaries are static, and the very same files run on a glibc base (Debian) and
# a musl base (busybox + musl) with nothing else from the image.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

bins=""
for b in pistisd pi-env pistisd-entry; do
	[ -x "$BIN/$b" ] && bins="$bins $b"
done
[ -x "$BIN/pistisd" ] || { echo "Bail out! $BIN/pistisd is not built"; exit 1; }

for b in $bins; do
	like "$b: file says statically linked" "$(file -L "$BIN/$b")" 'statically linked'
	out=$(ldd "$BIN/$b" 2>&1)
	like "$b: ldd says not a dynamic executable" "$out" 'not a dynamic executable'
	unlike "$b: no interpreter" "$(file -L "$BIN/$b")" 'interpreter'
done

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
