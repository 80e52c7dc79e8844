#!/bin/bash
# Red team, output injection: bytes an agent may control (names, argv, values) never reach
# the operator's terminal or a log raw. getopt printed a bad option itself, unescaped:
# `pistisd run --$'\e[31m…'` put ESC, CR and a C1 CSI on stderr as they were.
. "$(dirname "$0")/../lib.sh"
export LC_ALL=C
bad=$'\033[31mX\rY\xc2\x9bZ'
raw() { grep -qaP '[\x00-\x08\x0b-\x1f\x7f-\xff]' <<<"$1"; }
for cmd in "pistisd run" "pistisd check" "pistisd serve" "pistisd policy plan" \
	"pistisd trusted list" "pistis" "server-min"; do
	set -- $cmd
	[ -x "$BIN/$1" ] || { skip "$cmd: bad option escaped" "$BIN/$1 not built"; continue; }
	b=$1 && shift
	out=$("$BIN/$b" "$@" "--$bad" 2>&1 >/dev/null)
	fails "$cmd: a bad long option has no raw control byte on stderr" raw "$out"
	like "$cmd: ... and is named escaped" "$out" 'option .--\\x1b\[31mX\\rY\\xc2\\x9bZ.'
	unlike "$cmd: ... by us, not by getopt" "$out" 'unrecognized option'
done
out=$("$BIN/pistisd" run --agent 2>&1 >/dev/null)
like "a missing value names its option" "$out" "option '--agent' is unknown or needs a value"
done_testing
