#!/bin/bash
# Red team: upgrades, downgrades and replacing the binaries under a live sandbox. A pistisd
# others may write (its file or a directory on its way) is refused by pistisd-entry, which
# runs it as root, and failed by `pistisd check` (pistisd_binary); server-min cuts a sandbox
# whose hello speaks another protocol version. Scratch dirs, server-min and
# tests/integration/wsfake.py on loopback ports.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
E=$BIN/pistisd-entry
[ -x "$P" ] && [ -x "$E" ] || { echo "1..0 # SKIP pistisd or pistisd-entry not built"; exit 0; }
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
		skip "server-min: hello versions" "server-min did not listen"
	fi
else
	skip "server-min: hello versions" "no server-min or python3"
fi

done_testing
