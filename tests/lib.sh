# Shell TAP helpers for integration tests. Source it: `. "$(dirname "$0")/lib.sh"`.
# Binaries come from $PISTIS_BUILD/bin (default build/bin); tests run as root and never
# touch the host's /etc, /data or sudoers: use throwaway roots (tests/roots.sh) and
# mount namespaces (unshare -m).
set -u
PISTIS_BUILD=${PISTIS_BUILD:-build}
case "$PISTIS_BUILD" in /*) ;; *) PISTIS_BUILD=$(pwd)/$PISTIS_BUILD ;; esac
BIN=$PISTIS_BUILD/bin
TESTBIN=$PISTIS_BUILD/tests
_tap_n=0
_tap_failed=0

_tap_result() { # status desc [detail]
	_tap_n=$((_tap_n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $_tap_n - $2"
	else
		echo "not ok $_tap_n - $2"
		_tap_failed=$((_tap_failed + 1))
		[ -n "${3:-}" ] && printf '%s\n' "$3" | sed 's/^/#   /' | head -n 40
	fi
	return 0
}

plan() { echo "1..$1"; }

# ok DESC CMD...   passes when CMD exits 0; shows CMD's output when it fails
ok() {
	_d=$1; shift
	_out=$("$@" 2>&1); _rc=$?
	_tap_result "$([ $_rc -eq 0 ] && echo 0 || echo 1)" "$_d" "exit $_rc: $_out"
}

# fails DESC CMD...   passes when CMD exits non-zero
fails() {
	_d=$1; shift
	_out=$("$@" 2>&1); _rc=$?
	_tap_result "$([ $_rc -ne 0 ] && echo 0 || echo 1)" "$_d" "expected failure, got exit 0: $_out"
}

# exits CODE DESC CMD...   passes when CMD exits with exactly CODE
exits() {
	_c=$1; _d=$2; shift 2
	_out=$("$@" 2>&1); _rc=$?
	_tap_result "$([ $_rc -eq "$_c" ] && echo 0 || echo 1)" "$_d" "expected exit $_c, got $_rc: $_out"
}

# is DESC GOT WANT
is() {
	_tap_result "$([ "$2" = "$3" ] && echo 0 || echo 1)" "$1" "got:  '$2'
want: '$3'"
}

# like DESC GOT REGEX (grep -E)
like() {
	if printf '%s\n' "$2" | grep -Eq -- "$3"; then _tap_result 0 "$1"; else
		_tap_result 1 "$1" "got: '$2'
does not match: '$3'"; fi
}

# unlike DESC GOT REGEX
unlike() {
	if printf '%s\n' "$2" | grep -Eq -- "$3"; then _tap_result 1 "$1" "got: '$2'
matches: '$3'"; else _tap_result 0 "$1"; fi
}

skip() { _tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $1 # SKIP ${2:-}"; }

done_testing() {
	echo "1..$_tap_n"
	[ "$_tap_failed" -eq 0 ]
}

need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "1..0 # SKIP needs root"
		exit 0
	fi
}

# A scratch directory removed on exit.
scratch() {
	_scratch=$(mktemp -d "${TMPDIR:-/tmp}/pistis-test.XXXXXX")
	trap 'rm -rf "$_scratch"' EXIT
	echo "$_scratch"
}
