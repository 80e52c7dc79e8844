#!/bin/bash
# The relay over a unix socket (`pistisd serve --relay /path.sock`, server-min listening on a
# path): a command end to end, and the socket's path believed only where an agent could not
# have put a socket of its own (it would be the relay: it would get the token and send
# commands as any agent). Throwaway Debian root, server-min on a socket in it.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
R=$(root_fresh debian) || missing "no debian test root"
W=$(scratch)
cleanup() {
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	wait 2>/dev/null
	root_cleanup # roots and scratch directories
}
trap cleanup EXIT

relay_config "$R" "$W"
mkdir -p "$R/run/pistis" && chmod 0755 "$R/run/pistis"
python3 - "$W/pistis.json" "$R/run/pistis/relay.sock" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["listen"]["sandbox"] = sys.argv[2]
json.dump(c, open(sys.argv[1], "w"))
EOF
"$BIN/server-min" --config "$W/pistis.json" >"$W/smin.log" 2>&1 &
SM=$!
for _ in $(seq 100); do [ -S "$R/run/pistis/relay.sock" ] && break; sleep 0.1; done
ok "server-min listens on the socket" test -S "$R/run/pistis/relay.sock"

serve() { # RELAY: pistisd serve in the root, in the background; PD its pid
	(in_root_exec "$R" pistisd serve --relay "$1" --token-file /etc/pistis/token --name s1 \
		${ALLOW:+--allow $ALLOW} >"$W/pd.log" 2>&1) &
	PD=$! # serve itself: a backgrounded in_root's subshell would outlive the kill
}
refused() { # RELAY: serve exits 111 before it dials, saying why (in $out)
	in_root "$R" timeout 10 pistisd serve --relay "$1" --token-file /etc/pistis/token \
		--name s1 ${ALLOW:+--allow $ALLOW} >"$W/pd.log" 2>&1
	rc=$?
	out=$(cat "$W/pd.log")
	[ "$rc" = 111 ] && [[ $out == *"Refusing the relay socket"* ]]
}

serve /run/pistis/relay.sock
for _ in $(seq 100); do "$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
like "serve dials the socket: s1 connected" "$("$BIN/pistis" ls 2>&1)" 's1 +connected'
is "a command over the unix socket relay" \
	"$(PISTIS_SANDBOX=s1 "$BIN/pistis" exec --agent alice -- echo over-unix 2>&1)" over-unix
kill "$PD"; wait "$PD" 2>/dev/null; PD=
# An http_proxy in serve's environment (the container's, set for apt or pip): libwebsockets
# sent the unix socket a CONNECT line, and serve never connected ("proxy conn dead").
in_root_exec "$R" http_proxy=http://127.0.0.1:9 pistisd serve --relay /run/pistis/relay.sock \
	--token-file /etc/pistis/token --name s1 ${ALLOW:+--allow $ALLOW} >"$W/pd.log" 2>&1 &
PD=$!
for _ in $(seq 100); do "$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
like "with http_proxy set, serve still dials the unix socket itself" "$("$BIN/pistis" ls 2>&1)" 's1 +connected'
kill "$PD"; wait "$PD" 2>/dev/null; PD=

# Where an agent could have put the socket: a directory anyone may write (sticky or not),
# one an agent owns, a directory of pi-sandbox's, or a link in such a directory.
chmod 1777 "$R/run/pistis"
refused /run/pistis/relay.sock
ok "a socket in a sticky world-writable directory: refused (111)" test $? = 0
like "... naming the directory, its owner and mode" "$out" \
	"/run/pistis is owned by 0:0 with mode 1777: a directory on the way to the relay socket"
chmod 0775 "$R/run/pistis" && chgrp 10010 "$R/run/pistis"
refused /run/pistis/relay.sock
ok "a socket in a directory pi-sandbox may write: refused" test $? = 0
chmod 0755 "$R/run/pistis" && chgrp 0 "$R/run/pistis"
setfacl -m u:10100:rwx "$R/run/pistis" # 0775 root:root, the group bits the ACL's mask
refused /run/pistis/relay.sock
ok "a socket in a root's directory whose ACL lets an agent write: refused" test $? = 0
setfacl -b "$R/run/pistis" && chmod 0755 "$R/run/pistis"
mkdir -p "$R/run/agent" && chown 10100:10100 "$R/run/agent"
ln -s /run/pistis/relay.sock "$R/run/agent/relay.sock"
refused /run/agent/relay.sock
ok "a link to the socket in a directory an agent owns: refused" test $? = 0
like "... naming that directory" "$out" "/run/agent is owned by 10100:10100"
ln -s /run/agent/relay.sock "$R/run/via-agent.sock"
refused /run/via-agent.sock
ok "a link (in a root's directory) through the agent's link: refused" test $? = 0
ln -sfn relay.sock "$R/run/pistis/alias.sock"
refused /etc/pistis/token
ok "not a socket at the end (a regular file): refused" test $? = 0
like "... saying so" "$out" "is not a socket"

# Trusted: a link whose every directory is root's; a socket not there yet where only root
# may make it (serve keeps redialling until it is).
serve /run/pistis/alias.sock
for _ in $(seq 100); do "$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
like "a link among root's directories: accepted, connected" "$("$BIN/pistis" ls 2>&1)" 's1 +connected'
kill "$PD"; wait "$PD" 2>/dev/null; PD=
serve /run/pistis/later/relay.sock
sleep 1
ok "a socket not there yet, in a root's directory: serve waits for it" kill -0 "$PD"
kill "$PD"; wait "$PD" 2>/dev/null; PD=
mkdir "$R/run/agent/later"
refused /run/agent/later/relay.sock
ok "a socket not there yet, in a directory an agent owns: refused" test $? = 0

# A redirect is never followed: the token would go to the Location's address, and with a
# unix-socket relay a TCP peer would never be looked up (a port an agent bound). A fake
# relay answers 302 (on a believed socket) or 301 (on TCP, where libwebsockets 4.1.6
# followed it before); a listener at the Location records whether anything dialled it.
# pistis likewise, against a "server" answering 307.
redirector() { # LISTEN STATUS TARGET_PORT TARGET_PATH SEEN; RD its pid, once it listens
	rm -f "$W/redir.out" # an earlier one's "ready" is no answer
	python3 "$(cd "$(dirname "$0")" && pwd)/redirector.py" "$@" >"$W/redir.out" 2>&1 &
	RD=$!
	for _ in $(seq 50); do grep -q ready "$W/redir.out" && return; sleep 0.1; done
}
RP=$((20000 + RANDOM % 12000))
redirector "$R/run/pistis/redir.sock" 302 "$RP" /v1/sandbox "$W/redir.seen"
serve /run/pistis/redir.sock
sleep 2
kill "$PD" "$RD" 2>/dev/null; wait "$PD" "$RD" 2>/dev/null; PD=
ok "a redirect from a unix-socket relay: serve never dials its TCP target" \
	test ! -e "$W/redir.seen"
like "... and says it refused it, and where it pointed" "$(cat "$W/pd.log")" \
	"Refusing the relay's redirect \\(HTTP 302\\) to \"ws://127.0.0.1:$RP/v1/sandbox\""
P1=$((20000 + RANDOM % 12000))
P2=$((P1 == 31999 ? 20000 : P1 + 1))
redirector "$P1" 301 "$P2" /v1/sandbox "$W/redir3.seen"
serve "ws://127.0.0.1:$P1"
sleep 2
kill "$PD" "$RD" 2>/dev/null; wait "$PD" "$RD" 2>/dev/null; PD=
ok "a redirect from a TCP relay: serve never dials its target either" \
	test ! -e "$W/redir3.seen"
like "... saying so" "$(cat "$W/pd.log")" "Refusing the relay's redirect \\(HTTP 301\\)"
redirector "$P1" 307 "$P2" /v1/client "$W/redir2.seen"
out=$(PISTIS_URL=ws://127.0.0.1:$P1 timeout 20 "$BIN/pistis" ls 2>&1)
kill "$RD" 2>/dev/null; wait "$RD" 2>/dev/null
ok "a redirect from the server: pistis never dials its target" test ! -e "$W/redir2.seen"
like "... and says it refused it" "$out" "refusing the server's redirect \\(HTTP 307\\)"

done_testing
