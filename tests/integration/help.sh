#!/bin/bash
# Every binary's, every pistisd command's and verb's and every pistis command's --help:
# exits 0, writes to stdout only, and fits in 80 columns. The commands and verbs are read
# from the --help texts themselves, so a new one is covered as soon as it is listed there.
# Then every long option a binary accepts, read from its source, must be in its --help and
# in docs/.
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
	out=$("$BIN/$b" --version 2>&1); rc=$?
	is "$b --version exits 0" "$rc" 0
	like "$b --version names the binary and its version" "$out" "^$b [0-9]+\\.[0-9]+"
done
for c in $commands; do
	help_ok "pistisd $c" pistisd "$c"
done

# The verbs a pistisd command names in its line of `pistisd --help` (the list after the
# description's last ": ", e.g. "path rules: apply, plan, check, explain, save"): each has
# a --help of its own, and is in the command's own --help too.
verbs_of() {
	"$BIN/pistisd" --help | awk -v cmd="$1" '
		/^Commands:/ { table = 1; next }
		table && /^$/ { exit }
		table && /^  [a-z]/ { cur = $1; sub(/^  [^ ]+ */, ""); d[cur] = $0; next }
		table && cur != "" { sub(/^ +/, ""); d[cur] = d[cur] " " $0 }
		END { n = split(d[cmd], p, ": "); if (n > 1) print p[n] }' | tr -d ' ' | tr ',' '\n'
}
for c in users policy trusted; do
	verbs=$(verbs_of "$c")
	like "pistisd --help names the verbs of $c" "$verbs" '^[a-z]'
	own=$("$BIN/pistisd" "$c" --help)
	for v in $verbs; do
		like "pistisd $c --help describes '$v'" "$own" "^  $v( |\$)"
		help_ok "pistisd $c $v" pistisd "$c" "$v"
	done
	# A verb that is none: --help after it is no success (a script that checks a verb
	# by asking for its help must not be told it exists), and nothing goes to stdout.
	out=$("$BIN/pistisd" "$c" no-such-verb --help 2>"$S/err"); rc=$?
	is "pistisd $c no-such-verb --help: usage error (100)" "$rc" 100
	is "... nothing on stdout" "$out" ""
	like "... naming the verb on stderr" "$(cat "$S/err")" "'no-such-verb'"
done

# pistis COMMAND --help, for the commands of pistis --help's table.
pcmds=$("$BIN/pistis" --help | awk '/^  [a-z]+( |$)/ { print $1 }' | sort -u)
like "pistis --help lists its commands" "$pcmds" '^call$'
for c in $pcmds; do
	help_ok "pistis $c" pistis "$c"
done

# Every long option a binary accepts (its getopt table, or the names its hand-written
# parser compares) is in its --help and somewhere in docs/. Needs the source tree.
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# getopt_opts FILE: the names of FILE's struct option table(s), as --NAME
getopt_opts() {
	grep -oE '\{"[a-z0-9-]+", *(no|required|optional)_argument' "$SRC/$1" |
		sed -E 's/^\{"([^"]*)".*/--\1/' | sort -u
}
# literal_opts FILE: the "--NAME" string literals of a hand-written parser
literal_opts() {
	grep -oE '"--[a-z0-9-]+"' "$SRC/$1" | tr -d '"' | sort -u
}
if [ -f "$SRC/pistisd/main.c" ] && [ -d "$SRC/docs" ]; then
	while read -r how file cmd; do
		opts=$($how "$file")
		like "$file: options found for $cmd" "$opts" '^--help$'
		# shellcheck disable=SC2086 # cmd is the binary and its command word
		out=$("$BIN/"$cmd --help 2>&1)
		for o in $opts; do
			like "$cmd --help names $o" "$out" "(^|[^a-z0-9-])$o([^a-z0-9-]|\$)"
			ok "docs/ name $cmd's $o" grep -qE -- "(^|[^a-z0-9-])$o([^a-z0-9-]|\$)" \
				"$SRC"/README.md "$SRC"/docs/*.md
		done
	done <<-EOF
		getopt_opts pistisd/serve.c pistisd serve
		getopt_opts pistisd/check.c pistisd check
		getopt_opts policy/cli.c pistisd policy
		getopt_opts trusted/cli.c pistisd trusted
		getopt_opts pistisd/run-cli.c pistisd run
		literal_opts sandbox-users/cli.c pistisd users
		getopt_opts pistis/main.c pistis
		getopt_opts server-min/relay.c server-min
		literal_opts pi-env/main.c pi-env
		literal_opts pistisd-entry/entry.c pistisd-entry
	EOF
else
	untested "options named in --help and docs/" "no source tree beside the test"
fi

done_testing
