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
	[ -x "$BIN/$1" ] || { untested "$cmd: bad option escaped" "$BIN/$1 not built"; continue; }
	b=$1 && shift
	out=$("$BIN/$b" "$@" "--$bad" 2>&1 >/dev/null)
	fails "$cmd: a bad long option has no raw control byte on stderr" raw "$out"
	like "$cmd: ... and is named escaped" "$out" 'option .--\\x1b\[31mX\\rY\\xc2\\x9bZ.'
	unlike "$cmd: ... by us, not by getopt" "$out" 'unrecognized option'
done
out=$("$BIN/pistisd" run --agent 2>&1 >/dev/null)
like "a missing value names its option" "$out" "option '--agent' is unknown or needs a value"
out=$("$BIN/pistisd" run "-'" 2>&1 >/dev/null)
like "a bad short option ' is named escaped, not ending its quotes" "$out" "^pistisd: option '-\\\\'' is unknown"
out=$("$BIN/pistisd" run "-"$'\e' 2>&1 >/dev/null)
fails "a bad short option ESC: no raw control byte" raw "$out"
like "... named escaped" "$out" "option '-\\\\x1b' is unknown"

# A hostile name in a message is escaped exactly once: in text each value's bytes once (its
# quote too, so it cannot end the '...' around it), one line a message; in JSON each byte
# once by JSON, a valid record whose msg holds the name as it was.
N=$'x\\y\'z"q\nw\e[31m\xff'
out=$("$BIN/pistisd" trusted add "$N" /bin/true 2>&1 >/dev/null)
is "text: a hostile name's message is one line" "$(printf '%s\n' "$out" | wc -l)" 1
fails "text: ... with no raw control byte" raw "$out"
is "text: ... each byte escaped once, the quote too" "$out" \
	"pistisd: invalid name 'x\\\\y\\'z\\\"q\\nw\\x1b[31m\\xff': use ^[a-z0-9][a-z0-9_-]{0,63}\$ (no '.', '~', '/' or upper case)"
out=$("$BIN/pistisd" trusted add --json "$N" /bin/true 2>&1 >/dev/null)
jsonmsg() { python3 -c 'import json, sys
lines = sys.stdin.buffer.read().split(b"\n")[:-1]
assert len(lines) == 1, lines
sys.stdout.buffer.write(json.loads(lines[0])["msg"].encode("latin-1"))'; }
is "json: one valid record whose msg holds the name once escaped" \
	"$(printf '%s\n' "$out" | jsonmsg | od -An -c | tr -s ' \n' ' ')" \
	"$(printf "invalid name '%s': use ^[a-z0-9][a-z0-9_-]{0,63}\$ (no '.', '~', '/' or upper case)" "$N" | od -An -c | tr -s ' \n' ' ')"
# a 5000-byte name: the text line is cut between escapes, with a mark, still one line
long=$(printf "%s" "$N"; head -c 4980 /dev/zero | tr '\0' "'")
out=$("$BIN/pistisd" trusted add "$long" /bin/true 2>&1 >/dev/null)
is "text: a 5000-byte name is one line" "$(printf '%s\n' "$out" | wc -l)" 1
like "... cut between escapes, with its mark" "$out" "(\\\\')+\\.\\.\\.\\[line cut: [0-9]+ bytes\\]\$"
ok "json: a 5000-byte name is one valid record" \
	bash -c "\"$BIN/pistisd\" trusted add --json \"\$1\" /bin/true 2>&1 >/dev/null | python3 -c 'import json,sys; [json.loads(l) for l in sys.stdin]'" _ "$long"

# Escaped names printed in JSON are cut with a mark, never inside an escape or a character:
# harden-setuid --json over a tree whose setuid file lies under hostile names longer than
# the 4 KiB a path may take escaped (a scratch directory, not an image: nothing is changed).
T=$(mktemp -d)
d=$T
for i in 1 2 3 4 5; do
	d="$d/$(printf '%s' "$N"; head -c 150 /dev/zero | tr '\0' '\377'; printf '\303\251')"
done
mkdir -p "$d" && touch "$d/f" && chmod 4755 "$d/f"
out=$("$BIN/pistisd" trusted harden-setuid --dry-run --json --root "$T" 2>/dev/null)
ok "harden-setuid --json: valid JSON over a 900-byte hostile path" \
	python3 -c 'import json, sys; json.loads(sys.argv[1])' "$out"
like "... the path cut with the mark inside its string" "$out" '\\u2026","mode":"4755"'
unlike "... never inside an escape" "$out" '\\(u[0-9a-f]{0,3})?\\u2026'
fails "... with no raw control byte" raw "$out"
out=$("$BIN/pistisd" trusted harden-setuid --dry-run --root "$T" 2>/dev/null)
is "harden-setuid text: one line for the file" "$(printf '%s\n' "$out" | wc -l)" 1
fails "... with no raw control byte" raw "$out"
like "... the path whole, escaped once" "$out" "/x\\\\\\\\y\\\\'z\\\\\"q\\\\nw\\\\x1b\\[31m(\\\\xff)+\\\\xc3\\\\xa9/.*/f\$"
rm -rf "$T"
done_testing
