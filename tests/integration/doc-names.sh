#!/bin/bash
# shellcheck disable=SC2016 # the backquotes in patterns are Markdown's, not expansions
# The names the documentation lists against the names the code knows, both ways: pistisd
# check's results (its --help, docs/check.md's table), the protocol's error codes and
# exec.exit's end values (lib/proto.c, pistisd/spawn.c, docs/protocol.md), server-min's
# pistis.json keys (server-min/config.c, docs/server-min.md) and pistisd-entry's serve.conf
# keys (pistisd-entry/conf.c, docs/entry.md). Reads the source tree beside the test.
. "$(dirname "$0")/../lib.sh"
need_bins pistisd
export LC_ALL=C

SRC=$(cd "$(dirname "$0")/../.." && pwd)
if [ ! -f "$SRC/pistisd/check.c" ] || [ ! -d "$SRC/docs" ]; then
	missing "no source tree beside the test"
fi

# same DESC GOT WANT: two lists of names, one a line, equal as sets
same() {
	local got want
	got=$(printf '%s\n' "$2" | sed '/^$/d' | sort -u)
	want=$(printf '%s\n' "$3" | sed '/^$/d' | sort -u)
	is "$1" "$got" "$want"
}

# The comma-separated names after TITLE in `pistisd check --help`, up to the full stop.
help_names() {
	"$BIN/pistisd" check --help | awk -v t="$1" '
		index($0, t) == 1 { on = 1; $0 = substr($0, length(t) + 1) }
		on { s = s " " $0; if ($0 ~ /\.$/) exit }
		END { print s }' | tr -d ' .' | tr ',' '\n'
}
all=$(help_names "All checks:")
hard=$(help_names "Hard requirements:")
like "pistisd check --help lists its checks" "$all" '^seccomp$'
doc_all=$(grep -oE '^\| `[a-z0-9_]+` \|' "$SRC/docs/check.md" | tr -d '|` ')
doc_hard=$(grep -oE '^\| `[a-z0-9_]+` \| \*\*yes' "$SRC/docs/check.md" | cut -d'`' -f2)
same "docs/check.md's table has every check of pistisd check --help, and no other" \
	"$doc_all" "$all"
same "docs/check.md marks hard exactly the hard requirements of pistisd check --help" \
	"$doc_hard" "$hard"

# Error codes: lib/proto.c's table of names; protocol.md's "Error codes:" paragraph.
codes=$(sed -n '/\[PROTO_E_[A-Z_]*\] *=/s/.*"\([a-z_]*\)".*/\1/p' "$SRC/lib/proto.c" | grep -vx ok)
like "lib/proto.c names its error codes" "$codes" '^bad_request$'
doc_codes=$(awk '/^Error codes:/ { on = 1 } on && /^$/ { exit } on' "$SRC/docs/protocol.md" |
	grep -oE '`[a-z_]+`' | tr -d '`')
same "docs/protocol.md lists every error code lib/proto.c sends, and no other" \
	"$doc_codes" "$codes"

# exec.exit's end: spawn_end_name's values but "running" (never in an exec.exit).
ends=$(awk '/^const char \*spawn_end_name/ { on = 1 } on && /^}/ { exit }
	on && /return "/' "$SRC/pistisd/spawn.c" | cut -d'"' -f2 | grep -vxE 'running|\?')
like "spawn_end_name's values" "$ends" '^exited$'
doc_ends=$(grep -oE '`exec\.exit` event: `\{cmd, end: [a-z|-]+' "$SRC/docs/protocol.md" |
	sed 's/.*end: //' | tr '|' '\n')
same "docs/protocol.md's exec.exit end values are spawn_end_name's" "$doc_ends" "$ends"

# pistis.json: every key config.c reads is on server-min.md's "pistis.json" section, quoted.
keys=$(grep -oE '(get_str|get_count)\(c, [a-z]+, "[a-z_]+"|CaseSensitive\(root, "[a-z_]+"' \
	"$SRC/server-min/config.c" | cut -d'"' -f2 | sort -u)
like "server-min/config.c's keys" "$keys" '^client_token$'
section=$(awk '/^## pistis.json/ { on = 1; next } on && /^## / { exit } on' \
	"$SRC/docs/server-min.md")
for k in $keys; do
	like "docs/server-min.md names pistis.json's \"$k\"" "$section" "[\"\`.]${k}[\"\`:]"
done

# serve.conf: the keys of conf.c's two tables are the "Keys:" sentence of entry.md.
ckeys=$(grep -oE '^\s*\{"[a-z-]+", offsetof\(struct entry_serve_conf' \
	"$SRC/pistisd-entry/conf.c" | cut -d'"' -f2)
like "pistisd-entry/conf.c's serve.conf keys" "$ckeys" '^relay$'
doc_ckeys=$(awk '/^Keys: / { on = 1 } on { print } on && /\)\.?$/ { exit }' \
	"$SRC/docs/entry.md" | sed 's/(.*//' | grep -oE '`[a-z-]+`' | tr -d '`' |
	grep -vxE 'yes|no') # "the `yes`/`no` keys verbose and ..."
same "docs/entry.md's serve.conf keys are conf.c's" "$doc_ckeys" "$ckeys"

done_testing
