#!/bin/bash
# Every binary's and every pistisd command's --help: exits 0, writes to stdout only, and
# fits in 80 columns. The pistisd commands are read from `pistisd --help` itself, so a
# new one is covered as soon as it is listed there.
. "$(dirname "$0")/../lib.sh"
need_bins pistisd pi-env pistis pistisd-entry server-min
export LC_ALL=C

S=$(scratch)

# The command names of the "Commands:" table of `pistisd --help`: its lines that start
# with two spaces and a name (a description's further lines are indented deeper).
commands=$("$BIN/pistisd" --help | awk '
	/^Commands:/ { table = 1; next }
	table && /^$/ { exit }
	table && /^  [a-z]/ { print $1 }')
like "pistisd --help lists its commands" "$commands" '^serve$'

# The lines of stdin wider than 80 columns, each after its width: a UTF-8 character is one
# column (its continuation bytes are not counted), a tab reaches the next multiple of 8.
too_wide() {
	expand | awk '{ w = $0; gsub(/[\200-\277]/, "", w) }
		length(w) > 80 { print length(w) ": " $0 }'
}

# help_ok NAME BIN [ARG]...   $BIN/BIN ARG... --help, called NAME in the descriptions
help_ok() {
	local name=$1 out rc
	shift
	out=$("$BIN/$1" "${@:2}" --help 2>"$S/err")
	rc=$?
	is "$name --help exits 0" "$rc" 0
	is "$name --help writes nothing to stderr" "$(cat "$S/err")" ""
	like "$name --help prints a usage line" "$out" '^Usage: '
	is "$name --help fits in 80 columns" "$(printf '%s\n' "$out" | too_wide)" ""
}

for b in pistisd pi-env pistis pistisd-entry server-min; do
	help_ok "$b" "$b"
done
for c in $commands; do
	help_ok "pistisd $c" pistisd "$c"
done

done_testing
