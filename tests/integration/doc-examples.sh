#!/bin/bash
# The examples of docs/ as a new operator pastes them, run against the binaries: the
# registry of docs/users.md, server-min's pistis.json, entry's serve.conf and the
# Kubernetes fragment's args (docs/entry.md), the rules file of docs/policy.md, and the
# Dockerfile at the top of the tree against entry.md's copy of it and the build's binaries.
# Each example is read from the page itself, so an edit that breaks one fails here.
# Placeholders (`3f0c…`) are filled in; nothing else is changed. Scratch directories only.
. "$(dirname "$0")/../lib.sh"
need_root
need_bins pistisd pistisd-entry server-min
export LC_ALL=C

SRC=$(cd "$(dirname "$0")/../.." && pwd)
if [ ! -f "$SRC/Dockerfile" ] || [ ! -d "$SRC/docs" ]; then
	echo "Bail out! no source tree (Dockerfile, docs/) beside the test"
	exit 1
fi
S=$(scratch)
trap 'rm -rf "$S"' EXIT

# block FILE REGEX: the fenced block of FILE whose first line matches REGEX (the first such)
block() {
	awk -v re="$2" '
		/^```/ { if (on) { if (keep) exit; on = 0; next } on = 1; first = 1; next }
		on && first { first = 0; keep = ($0 ~ re) }
		on && keep { print }' "$SRC/$1"
}

# --- docs/users.md: the registry example is one `pistisd users` reads -----------------------
R=$S/users-root
mkdir -p "$R/etc" "$R/data/pistis"
chmod 0700 "$R/data/pistis"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$R/etc/passwd"
printf 'root:x:0:\n' >"$R/etc/group"
block docs/users.md '^pistis-users-registry ' >"$R/data/pistis/users.registry"
chmod 0600 "$R/data/pistis/users.registry"
like "users.md has a registry example" "$(cat "$R/data/pistis/users.registry")" '^[0-9]+:pi-agent-'
out=$("$BIN/pistisd" users list --root "$R" 2>"$S/err")
is "users.md's registry example: pistisd users list reads it" "$?" 0
is "... and lists each record (uid, name, state, id)" "$out" \
	"$(sed 1d "$R/data/pistis/users.registry" | tr ':' '\t')"
unlike "... without refusing a line" "$(cat "$S/err")" 'users\.registry:[0-9]'
while IFS=: read -r uid name state id; do
	[ "$state" = active ] || continue
	out=$("$BIN/pistisd" users show "$id" --root "$R" 2>&1)
	like "users show '$id' of the example: its name" "$out" "^name=$name\$"
	like "users show '$id' of the example: its uid" "$out" "^uid=$uid\$"
done < <(sed 1d "$R/data/pistis/users.registry")

# --- docs/server-min.md: the pistis.json example passes --check ------------------------------
C=$S/conf
mkdir -m 0755 "$C"
block docs/server-min.md '^\{' >"$C/pistis.json"
chmod 0600 "$C/pistis.json"
like "server-min.md has a pistis.json example" "$(cat "$C/pistis.json")" '"sandboxes"'
exits 0 "server-min.md's pistis.json, its variables set: server-min --check" \
	env PISTIS_CLIENT_TOKEN=client-token-0123456789 S1_TOKEN=sandbox-token-0123456789 \
	"$BIN/server-min" --check --config "$C/pistis.json"

# --- docs/entry.md: serve.conf, as entry hands it to pistisd serve ---------------------------
# A stand-in for pistisd (root's, in a root-only directory, as entry insists) that prints
# the argv entry gives it.
D=$S/data
mkdir -p "$D/pistis" "$S/bin"
chmod 0755 "$D" "$S/bin"
chmod 0700 "$D/pistis"
printf '#!/bin/sh\nfor a; do printf "%%s\\n" "$a"; done\n' >"$S/bin/pistisd"
printf '#!/bin/sh\nenv\n' >"$S/bin/env-of"
chmod 0755 "$S/bin/pistisd" "$S/bin/env-of"
pin=$(printf 'relay certificate' | sha256sum | cut -d' ' -f1)
block docs/entry.md '^# /data/pistis/serve.conf' | sed "s/3f0c…/$pin/" >"$D/pistis/serve.conf"
like "entry.md has a serve.conf example" "$(cat "$D/pistis/serve.conf")" '^relay = '
out=$(env -u PISTIS_RELAY -u PISTIS_TOKEN_FILE "$BIN/pistisd-entry" --no-prepare \
	--no-harden-mounts --no-restart --data "$D" --pistisd "$S/bin/pistisd" 2>"$S/err")
is "entry.md's serve.conf: entry starts serve with it" "$?" 0
is "... serve's argv: one --key=value each, verbose = no and share-abstract-sockets = no left out" \
	"$out" "serve
--relay=wss://relay.example.com/sandbox
--token-file=/data/pistis/token
--ca=/etc/ssl/certs/ca-certificates.crt
--pin=$pin
--name=build-box-7
--log-format=json
--pids-max=4096
--max-buffered=128
--memory-max=4G
--cpu-weight=100"

out=$(PISTIS_ALLOW=protected_fifos "$BIN/pistisd-entry" --no-prepare --no-harden-mounts \
	--no-restart --data "$D" --pistisd "$S/bin/env-of" 2>&1)
like "... and serve inherits entry's environment: PISTIS_ALLOW reaches it" "$out" \
	'^PISTIS_ALLOW=protected_fifos$'

# The Kubernetes fragment's args are entry options as written.
args=$(block docs/entry.md '^# the pod.s spec' | sed -n 's/^ *args: \[\(.*\)\]$/\1/p' | tr -d '",')
like "entry.md's Kubernetes fragment gives entry args" "$args" '^--grace [0-9]+$'
# shellcheck disable=SC2086 # the args are words, as the kubelet hands them over
exits 0 "... which entry takes: $args" "$BIN/pistisd-entry" $args --no-prepare \
	--no-harden-mounts --no-restart -- true

# --- docs/policy.md: the rules file example is valid rules -----------------------------------
P=$S/policy-root
mkdir -p "$P/workspaces/repo/.git/hooks" "$P/data/.secrets"
mark_key "$P"
block docs/policy.md '^\[' >"$S/rules.json"
chmod 0644 "$S/rules.json"
like "policy.md has a rules example" "$(cat "$S/rules.json")" '"access"'
out=$("$BIN/pistisd" policy plan --root "$P" --rules "$S/rules.json" 2>&1)
is "policy.md's rules example: policy plan takes it" "$?" 0
like "... and plans the changes its rules name" "$out" '^plan: .* 0 errors'

# --- the top Dockerfile: what entry.md shows of it, and the files it COPYs -------------------
is "entry.md's Dockerfile is the top Dockerfile without its comments" \
	"$(block docs/entry.md '^FROM debian:')" "$(grep -v '^#' "$SRC/Dockerfile" | sed '/^$/d')"
copies=$(sed -n '/^COPY /,/[^\\]$/p' "$SRC/Dockerfile" | grep -oE 'build/bin/[a-z-]+')
like "the Dockerfile COPYs the build's binaries (pistisd among them)" "$copies" '^build/bin/pistisd$'
for f in $copies; do
	ok "the Dockerfile COPYs $f, which the build makes" test -x "$PISTIS_BUILD/bin/${f#build/bin/}"
done

done_testing
