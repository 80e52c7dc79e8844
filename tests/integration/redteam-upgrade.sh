#!/bin/bash
# Red team: upgrades, downgrades and replacing the binaries under a live sandbox. A pistisd
# others may write (its file or a directory on its way) is refused by pistisd-entry, which
# runs it as root, and failed by `pistisd check` (pistisd_binary); server-min cuts a sandbox
# whose hello speaks another protocol version; state files of another version are refused
# and left as they are (registry, rules); pistisd moved to another path in a new image:
# the wrappers follow at the install entry runs, a trusted-interp script naming the old
# path keeps the trusted commands off with one line; a sudoers drop-in another release
# wrote is not believed until install rewrites it (entry does). Scratch dirs, Debian roots,
# server-min and tests/integration/wsfake.py on loopback ports.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
E=$BIN/pistisd-entry
[ -x "$P" ] && [ -x "$E" ] || missing "pistisd or pistisd-entry not built"
S=$(scratch)

# --- pistisd-entry runs --pistisd as root: refused where others may change it ------------------
# Before: entry ran each of these as root (ensure-base, serve) without a word. A stand-in
# pistisd that only notes it ran: entry's ensure-base has no --root, so the real one would
# write this machine's /etc and /data.
printf '#!/bin/sh\necho "$*" >>%s/ran\n' "$S" >"$S/fake"
mkdir -m 0777 "$S/open"
install -m 0755 "$S/fake" "$S/open/pistisd"
mkdir "$S/d1"
out=$("$E" --no-harden-mounts --data "$S/d1" --pistisd "$S/open/pistisd" --no-restart -- /bin/true 2>&1)
is "entry: a pistisd in a 0777 directory: refused (111)" "$?" 111
like "... naming the directory, its owner and mode" "$out" \
	"Refusing to start: $S/open is owned by 0:0 with mode 0777: a directory on the way to the pistisd that entry runs as root must be root's"
[ ! -e "$S/ran" ] && [ ! -e "$S/d1/pistis" ]
is "... before anything is prepared or run" "$?" 0
mkdir "$S/bin"
install -m 0777 "$S/fake" "$S/bin/pistisd"
out=$("$E" --no-harden-mounts --data "$S/d1" --pistisd "$S/bin/pistisd" --no-restart -- /bin/true 2>&1)
is "entry: a pistisd others may write: refused (111)" "$?" 111
like "... naming the file" "$out" "$S/bin/pistisd is owned by 0:0 with mode 0777: the pistisd that entry runs as root must be root's and writable by no one else"
chmod 0755 "$S/bin/pistisd"
chown 10100 "$S/bin/pistisd"
out=$("$E" --no-harden-mounts --data "$S/d1" --pistisd "$S/bin/pistisd" --no-restart -- /bin/true 2>&1)
is "entry: a pistisd an agent's uid owns: refused (111)" "$?" 111
chown 0 "$S/bin/pistisd"
ln -s open "$S/via"
out=$("$E" --no-harden-mounts --data "$S/d1" --pistisd "$S/via/pistisd" --no-restart -- /bin/true 2>&1)
is "entry: through a root's link into a 0777 directory: refused (111)" "$?" 111
[ ! -e "$S/ran" ]
is "... none of them was run" "$?" 0
exits 0 "entry: --no-prepare with a CMD does not run pistisd: not looked at" \
	"$E" --no-harden-mounts --no-prepare --data "$S/d1" --pistisd "$S/open/pistisd" --no-restart -- /bin/true
out=$("$E" --no-harden-mounts --data "$S/d1" --pistisd "$S/none/pistisd" --no-restart -- /bin/true 2>&1)
like "entry: a missing pistisd is still only skipped" "$out" "not found: skipping 'users ensure-base'"
exits 0 "entry: a root's pistisd in root's directories runs" \
	"$E" --no-harden-mounts --data "$S/d1" --pistisd "$S/bin/pistisd" --no-restart -- /bin/true
like "... (it ran)" "$(cat "$S/ran" 2>/dev/null)" "users ensure-base"

# --- pistisd check: pistisd_binary ---------------------------------------------------------
row() { # FILE NAME FIELD
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([c for c in d["checks"] if c["name"]==sys.argv[2]][0][sys.argv[3]])' "$@"
}
"$P" check --no-walk --json >"$S/c1.json" 2>/dev/null
is "check: pistisd_binary ok for the build's pistisd" "$(row "$S/c1.json" pistisd_binary status)" ok
is "... a hard check" "$(row "$S/c1.json" pistisd_binary hard)" True
like "... naming the path and the version" "$(row "$S/c1.json" pistisd_binary value)" "^$BIN/pistisd \\(pistisd [0-9]"
mkdir -m 0777 "$S/open2"
cp "$P" "$S/open2/pistisd"
"$S/open2/pistisd" check --no-walk --json >"$S/c2.json" 2>/dev/null
is "check: a pistisd in a 0777 directory: fail" "$(row "$S/c2.json" pistisd_binary status)" fail
like "... naming the directory" "$(row "$S/c2.json" pistisd_binary value)" "^$S/open2 is owned by 0:0 with mode 0777"
cp "$P" "$S/gone"
(exec 3<"$S/gone" && rm "$S/gone" && exec /proc/self/fd/3 check --no-walk --json) >"$S/c3.json" 2>/dev/null
is "check: a pistisd replaced since it started: warn" "$(row "$S/c3.json" pistisd_binary status)" warn
like "... saying the next start runs what is there now" "$(row "$S/c3.json" pistisd_binary value)" \
	"^$S/gone was replaced or removed since this pistisd started"

# --- server-min: a hello of another protocol version ----------------------------------------
if [ -x "$BIN/server-min" ] && command -v python3 >/dev/null; then
	. "$(dirname "$0")/wsfake-lib.sh"
	if smin_start "[{\"name\": \"evil\", \"token\": \"$EVIL\"}]"; then
		# Before: any hello was answered ok and the sandbox served by version 1's rules.
		for v in 2 none '"1"'; do
			$FAKE sandbox-version "$SP" "$EVIL" "$CP" "$CT" "$v" >"$W/v.out" 2>&1
			[ -z "$(val exception "$W/v.out")" ] || sed 's/^/# /' "$W/v.out"
			is "server-min: hello version $v: cut, 1008 with the reason" "$(val close "$W/v.out")" \
				"1008:unsupported protocol version"
			is "... a client's request to it is answered unavailable" "$(val client "$W/v.out")" unavailable
			is "... and the sandbox may redial with version 1" "$(val redial "$W/v.out")" ok
			sleep 1.1 # the cut lines' rate
		done
		like "server-min: the log says which version and what to do" "$(cat "$W/smin.log")" \
			"Disconnected sandbox 'evil': its hello speaks protocol version 2, this relay version 1 only .*run a server-min that speaks its version"
		is "server-min still running" "$(alive)" yes
		stop
	else
		untested "server-min: hello versions" "server-min did not listen"
	fi
else
	untested "server-min: hello versions" "no server-min or python3"
fi

# --- state files of another version: refused, left as they are -----------------------------
R=$(root_fresh debian) || { echo "Bail out! no debian root"; exit 1; }
"$P" users ensure-base --root "$R" >/dev/null
"$P" users ensure agent/a --root "$R" >/dev/null
REG=$R/data/pistis/users.registry
cp -p "$REG" "$S/reg.orig"
refused_untouched() { # DESC EXPECT-IN-OUTPUT
	local out rc
	out=$("$P" users ensure agent/b --root "$R" 2>&1)
	rc=$?
	is "registry, $1: ensure exits 1" "$rc" 1
	like "... saying why ($2)" "$out" "$2"
	cmp -s "$REG" "$S/reg.mut"
	is "... the file left as it was" "$?" 0
	grep -q 'agent/b' "$R/etc/passwd" "$R/etc/group" 2>/dev/null
	is "... nothing written to /etc" "$?" 1
}
sed '1s/ 1$/ 2/' "$S/reg.orig" >"$S/reg.mut"
cp "$S/reg.mut" "$REG"
refused_untouched "a newer version's header" "users.registry:1: unsupported registry version; nothing written"
{ cat "$S/reg.orig"; echo "10150:pi-agent-0123456789:active:agent/x:since=2027"; } >"$S/reg.mut"
cp "$S/reg.mut" "$REG"
refused_untouched "a record with a field more" "users.registry:3: "
{ cat "$S/reg.orig"; echo "10150:pi-agent-0123456789:suspended:agent/x"; } >"$S/reg.mut"
cp "$S/reg.mut" "$REG"
refused_untouched "a record of a new state" "users.registry:3: "
{ cat "$S/reg.orig"; echo "quota 10150 2G"; } >"$S/reg.mut"
cp "$S/reg.mut" "$REG"
refused_untouched "a new kind of line" "users.registry:3: "
cp -p "$S/reg.orig" "$REG"
exits 0 "registry: the version-1 file is read again" "$P" users ensure agent/b --root "$R"

# rules.json of a newer release: a key this one does not know is an error, never a default.
printf '[{"path": "/srv", "access": "write", "expires": "2027-01-01"}]\n' >"$R/data/pistis/rules.json"
chmod 0600 "$R/data/pistis/rules.json"
cp -p "$R/data/pistis/rules.json" "$S/rules.mut"
out=$("$P" policy apply --root "$R" 2>&1)
is "rules: a key of a newer release: apply exits 1" "$?" 1
like "... naming the key's line" "$out" "Invalid rules in '/data/pistis/rules.json', line 1"
cmp -s "$R/data/pistis/rules.json" "$S/rules.mut"
is "... the file left as it was" "$?" 0
rm "$R/data/pistis/rules.json"

# --- pistisd at another path in a new image, over the same /data ---------------------------------
AGENT=$("$P" users ensure t1 --root "$R" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')
AUID=$(awk -F: -v u="$AGENT" '$1 == u { print $3 }' "$R/etc/passwd")
echo "127.0.1.1 $(hostname)" >>"$R/etc/hosts"
agent() {
	chroot --userspec="$AUID:$AUID" --groups=10010 "$R" /usr/bin/env -i \
		PATH=/data/bin:/usr/bin:/bin HOME=/tmp "$@"
}
printf '#!/bin/sh\necho "hello as $(id -un)"\n' >"$S/hello"
printf '#!/usr/local/bin/pistisd trusted-interp /bin/sh\necho "clean as $(id -un)"\n' >"$S/clean"
chmod 0755 "$S/hello" "$S/clean"
"$P" trusted add hello "$S/hello" --root "$R" >/dev/null 2>&1
is "old image: hello works" "$(agent hello 2>&1)" "hello as pi-tools"
# The new image: pistisd in /usr/bin, nothing in /usr/local/bin; a container made afresh
# (no drop-in), so entry runs trusted install.
umount "$R/usr/local/bin"
install -m 0755 "$P" "$R/usr/bin/pistisd"
rm "$R/etc/sudoers.d/pistis-trusted"
exits 0 "new image: install (entry's restore) succeeds" "$P" trusted install --root "$R"
is "... and rewrites the wrapper to the new path" "$(head -n 1 "$R/data/bin/hello")" '#!/usr/bin/pistisd trusted-exec'
is "... which works" "$(agent hello 2>&1)" "hello as pi-tools"
# A script whose clean start names the old path: pinned by its digest, not rewritten; the
# install refuses with the interpreter named and leaves no drop-in (fail closed).
mkdir -p "$R/usr/local/bin"
install -m 0755 "$P" "$R/usr/local/bin/pistisd"
"$P" trusted add clean "$S/clean" --root "$R" >/dev/null 2>&1
is "clean start: added while /usr/local/bin/pistisd was there" "$(agent clean 2>&1)" "clean as pi-tools"
rm "$R/usr/local/bin/pistisd" "$R/etc/sudoers.d/pistis-trusted"
out=$("$P" trusted install --root "$R" 2>&1)
is "clean start, old path gone: install exits 1" "$?" 1
like "... naming the interpreter" "$out" "/data/trusted/clean: interpreter '/usr/local/bin/pistisd' does not exist in the image"
[ ! -e "$R/etc/sudoers.d/pistis-trusted" ]
is "... no drop-in: trusted commands off" "$?" 0
agent hello >/dev/null 2>&1
isnt_zero=$?
ok "... the agent's hello does not run ($isnt_zero)" test "$isnt_zero" -ne 0

# --- a drop-in another release wrote (a plain machine's /etc outlives the upgrade) --------------
# Its Defaults line is that release's: here without !env_check, as before that red team.
# Before: believed as it was (agents without no_new_privs, sudo by the old Defaults) until
# someone ran install; now the trusted commands stay off, check says why, entry rewrites it.
R2=$(root_fresh debian) || { echo "Bail out! no debian root"; exit 1; }
harden_shared "$R2"
"$P" users ensure-base --root "$R2" >/dev/null
A2=$("$P" users ensure agent/t --root "$R2" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')
U2=$(awk -F: -v u="$A2" '$1 == u { print $3 }' "$R2/etc/passwd")
echo "127.0.1.1 $(hostname)" >>"$R2/etc/hosts"
printf '#!/bin/sh\necho "lang=${LANG:-unset}"\n' >"$S/lang"
chmod 0755 "$S/lang"
"$P" trusted add lang "$S/lang" --root "$R2" >/dev/null 2>&1
PROBE=/usr/local/lib/pistis-tests/probe
nnp() { in_root "$R2" pistisd run --agent agent/t -- $PROBE 2>&1 | sed -n 's/^NoNewPrivs=//p' | head -n 1; }
direct() { # an agent's command calls sudo itself, with a locale of its choosing
	in_root "$R2" pistisd run --agent agent/t --env LANG=C.agent -- \
		sudo -n -u pi-tools /data/trusted/lang 2>&1
}
if [ -x "$R2/usr/local/lib/pistis-tests/probe" ]; then
	is "current drop-in: agents run without no_new_privs (trusted commands on)" "$(nnp)" 0
	is "... the agent's LANG does not reach the script" "$(direct)" "lang=unset"
	D=$R2/etc/sudoers.d/pistis-trusted
	sed -i 's/ !env_check,//' "$D"
	chmod 0440 "$D"
	chroot "$R2" visudo -c >/dev/null 2>&1
	is "older drop-in: visudo accepts it" "$?" 0
	is "older drop-in: not believed, agents keep no_new_privs (trusted commands off)" "$(nnp)" 1
	unlike "... so the old Defaults no longer hand the agent's LANG to the script" "$(direct)" "lang=C.agent"
	like "pistisd check: trusted_caps says why" \
		"$(in_root "$R2" pistisd check --no-walk --json | python3 -c 'import json,sys; print([c for c in json.load(sys.stdin)["checks"] if c["name"]=="trusted_caps"][0]["value"])')" \
		"not in the form this pistisd writes .*run pistisd trusted install"
	out=$(in_root "$R2" /usr/local/bin/pistisd-entry --no-harden-mounts --no-restart -- /bin/true 2>&1)
	is "entry in that root: starts (0)" "$?" 0
	like "... and rewrites the drop-in" "$out" "restored the trusted commands' sudoers drop-in .*the image had one another release wrote"
	like "... now with !env_check" "$(cat "$D")" '!env_check'
	is "... trusted commands on again" "$(nnp)" 0
	out=$(in_root "$R2" /usr/local/bin/pistisd-entry --no-harden-mounts --no-restart -- /bin/true 2>&1)
	is "entry again, the drop-in now current: starts (0)" "$?" 0
	unlike "... and leaves it as it is (no install)" "$out" "restored the trusted commands' sudoers drop-in"
	# A new image with pistisd elsewhere keeps the volume's wrappers, whose shebang names
	# the old path: every agent's call failed (bad interpreter) while the drop-in was
	# current and nothing ran install. Entry now rewrites them.
	WR=$R2/data/bin/lang
	wcall() { in_root "$R2" pistisd run --agent agent/t -- /data/bin/lang 2>&1; }
	is "a wrapper through pistisd: the agent's call works" "$(wcall)" "lang=unset"
	sed -i '1s|^#![^ ]*|#!/usr/bin/pistisd-moved|' "$WR"
	unlike "a wrapper naming a pistisd that is not there: the agent's call fails" "$(wcall)" "lang="
	out=$(in_root "$R2" /usr/local/bin/pistisd-entry --no-harden-mounts --no-restart -- /bin/true 2>&1)
	is "entry with that wrapper: starts (0)" "$?" 0
	like "... and runs install, saying why" "$out" \
		"restored the trusted commands' sudoers drop-in .*the volume a wrapper whose interpreter /usr/bin/pistisd-moved is not there \\(/data/bin/lang\\)"
	like "... the wrapper names this pistisd again" "$(head -n 1 "$WR")" '^#!/usr/local/bin/pistisd trusted-exec$'
	is "... and the agent's call works again" "$(wcall)" "lang=unset"
	rm "$WR"
	out=$(in_root "$R2" /usr/local/bin/pistisd-entry --no-harden-mounts --no-restart -- /bin/true 2>&1)
	like "a wrapper deleted by hand: entry writes it again" "$out" "the volume no wrapper /data/bin/lang"
	ok "... it is there" test -f "$WR"
else
	untested "a drop-in of another release" "no probe in the test root"
fi

done_testing
