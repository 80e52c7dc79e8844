#!/bin/bash
# Red team, promise 3 (SECURITY.md), from the network namespace agents share with pistisd: a
# listener an agent binds on a loopback port while the server that port belongs to is away.
# pistisd serve's side (its relay and the sandbox token) is in redteam-cross.sh; here the
# client's: `pistis` and server-min's client token, which opens every sandbox, where
# server-min, pistisd and pistis share one machine. Root; its own network and mount
# namespaces (every listener here is on a loopback no other test sees).
. "$(dirname "$0")/../lib.sh"
need_root
if [ "${PISTIS_NET_NS:-}" != "$(readlink /proc/self/ns/net)" ]; then
	exec unshare -n sh -c 'ip link set lo up &&
		PISTIS_NET_NS=$(readlink /proc/self/ns/net) && export PISTIS_NET_NS && exec "$@"' \
		sh bash "$0" "$@"
fi
need_mount_ns "$@"
need_bins pistisd server-min pistis
command -v setpriv >/dev/null || missing "no setpriv"
W=$(scratch)
cleanup() {
	[ -n "${SQ:-}" ] && kill "$SQ" 2>/dev/null
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	wait 2>/dev/null
	root_cleanup
}
trap cleanup EXIT
field() { sed -n "s/^$1=//p" | head -n 1; }

# squat UID PORT [defer]: tests/probe's listener on 127.0.0.1:PORT as UID (no groups), in the
# background (SQ), its output in $W/sq.out; returns once it listens.
squat() {
	: >"$W/sq.out"
	setpriv --reuid "$1" --regid "$1" --clear-groups "$TESTBIN/probe" listen "$2" 20 ${3:-} \
		>"$W/sq.out" 2>&1 &
	SQ=$!
	for _ in $(seq 100); do grep -q '^listening' "$W/sq.out" && break; sleep 0.05; done
}
squat_end() { # what the listener got, once its first client is done (at most 5 s)
	for _ in $(seq 50); do grep -q '^got=' "$W/sq.out" && break; sleep 0.1; done
	kill "$SQ" 2>/dev/null; wait "$SQ" 2>/dev/null; SQ=
}

# --- 1. pistis and a listener on server-min's client port ------------------------------------
# Before, pistis wrote its upgrade request, and the client token in it, to whatever listened
# on the URL's address: an agent's listener on 127.0.0.1:7701 while server-min restarts got
# the token (and with it every agent of every sandbox). Now the socket at the other end is
# looked up by its four-tuple first, as pistisd serve does for its relay.
P=$((20000 + RANDOM % 12000))
export PISTIS_URL=ws://127.0.0.1:$P PISTIS_TOKEN=client-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
for who in "10100 an agent" "10002 pi-tools" "59999 an agent"; do
	uid=${who%% *} what=${who#* }
	for how in plain defer; do
		squat "$uid" "$P" "$how"
		out=$(timeout 10 "$BIN/pistis" ls 2>&1)
		rc=$?
		squat_end
		is "uid $uid ($what), $how listener on the client port: pistis refuses (exit 111)" "$rc" 111
		like "... saying whose the socket is, and that the token was not sent" "$out" \
			"refusing 127\\.0\\.0\\.1:$P: the socket there belongs to uid $uid \\($what\\), not to server-min; not sending the token"
		unlike "... and the listener got no token" "$(cat "$W/sq.out")" 'bearer=yes'
	done
done
# The controls: root's listener (server-min's owner), and a listener of the caller's own
# uid (an agent's own pistis talking to its own server), do get the request.
squat 0 "$P"
timeout 10 "$BIN/pistis" ls >/dev/null 2>&1
squat_end
is "root's listener gets the upgrade request with the token (the control)" \
	"$(field bearer <"$W/sq.out")" yes
squat 10100 "$P"
timeout 10 setpriv --reuid 10100 --regid 10100 --clear-groups "$BIN/pistis" ls >/dev/null 2>&1
squat_end
is "a listener of the caller's own uid gets it too" "$(field bearer <"$W/sq.out")" yes

# --- 2. the same through a server-min restart, as `pistis exec` redials -----------------------
# pistis exec redials for 120 s when server-min goes away: an agent that binds the client
# port meanwhile is refused on every attempt, and the command's output arrives once the
# real server-min is back.
R=$(root_fresh debian) || missing "no debian test root"
relay_up "$R" "$W" || { echo "Bail out! pistisd serve did not connect: $(tail -n 3 "$W/pd.log")"; exit 1; }
# server-min's listeners are where pistis.json says, 127.0.0.1: libwebsockets (with IPv6)
# put an IPv4 address into an IPv6 socket's sockaddr wrongly and bound [::], every address
# of the host, where agents (and the network) reach the client listener.
is "server-min listens on 127.0.0.1:$SP and 127.0.0.1:$CP only" \
	"$(ss -tlnH "( sport = :$SP or sport = :$CP )" | awk '{print $4}' | sort | paste -sd' ')" \
	"127.0.0.1:$SP 127.0.0.1:$CP"
ip addr add 10.231.9.9/32 dev lo
fails "... so another address of the namespace does not reach the client listener" \
	timeout 3 bash -c "exec 3<>/dev/tcp/10.231.9.9/$CP"
timeout 60 "$BIN/pistis" exec --agent alice -- sh -c 'echo started; sleep 5; echo survived' \
	>"$W/exec.out" 2>"$W/exec.err" &
EX=$!
# Until the exec itself has its command's output: it redials only once it knows the command
# (exec.start answered). serve's status showing the command running is not enough: under
# load the answer was still on its way when server-min went, and the exec ended at once (CI).
for _ in $(seq 200); do
	grep -q started "$W/exec.out" 2>/dev/null && break
	sleep 0.1
done
kill "$SM" && wait "$SM" 2>/dev/null
SM=
squat 10100 "$CP"
squat_end
like "an agent's listener on the client port, server-min away: pistis exec dials it ..." \
	"$(cat "$W/sq.out")" '^got='
is "... and sends it nothing (no token)" "$(field got <"$W/sq.out")" 0
like "... saying why, once, as it redials" "$(cat "$W/exec.err")" \
	"refusing 127\\.0\\.0\\.1:$CP: the socket there belongs to uid 10100 \\(an agent\\).*; redialling for up to 120 s"
"$BIN/server-min" --config "$W/pistis.json" >>"$W/smin.log" 2>&1 &
SM=$!
wait "$EX"
rc=$?
is "server-min back: pistis exec gets its command's output" "$(cat "$W/exec.out")" $'started\nsurvived'
is "... and its exit code" "$rc" 0

# --- 3. http_proxy, no_proxy ------------------------------------------------------------------
# libwebsockets reads http_proxy from the environment and knows no no_proxy: pistis and
# serve sent a server the operator had exempted (no_proxy=127.0.0.1) through the proxy, which
# saw the token of a ws:// one. A proxy of root's here (tests/probe's listener, which
# answers nothing): it must not even be dialled for an exempted host.
PX=$((CP + 2))
squat 0 "$PX"
out=$(http_proxy=http://127.0.0.1:$PX no_proxy=localhost,127.0.0.1 timeout 10 "$BIN/pistis" ls 2>&1)
like "pistis, http_proxy set and no_proxy naming the server: connects directly" "$out" 's1 +connected'
sleep 0.3
unlike "... the proxy is not dialled" "$(cat "$W/sq.out")" '^got='
kill "$PD" && wait "$PD" 2>/dev/null
(in_root_exec "$R" http_proxy=http://127.0.0.1:$PX NO_PROXY=127.0.0.1 pistisd serve \
	--relay "ws://127.0.0.1:$SP" --token-file /etc/pistis/token --name s1 \
	${ALLOW:+--allow $ALLOW}) >"$W/pd.log" 2>&1 &
PD=$!
for _ in $(seq 100); do "$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
like "serve, http_proxy set and NO_PROXY naming the relay: connects directly" "$("$BIN/pistis" ls 2>&1)" 's1 +connected'
unlike "... the proxy is not dialled" "$(cat "$W/sq.out")" '^got='
like "... and says so (a loopback relay is never proxied)" "$(cat "$W/pd.log")" \
	'Dialling the relay directly, not through http_proxy \(a loopback address\)'
# A loopback server, no no_proxy: never through a proxy either. A proxy of this namespace
# reaches the same loopback, and pistis would see only the proxy's socket, not whose
# listener the proxy reached: an agent's, on the server's port while it is away.
out=$(http_proxy=http://127.0.0.1:$PX timeout 10 "$BIN/pistis" ls 2>&1)
like "pistis, http_proxy set, a loopback server, no no_proxy: connects directly" "$out" 's1 +connected'
sleep 0.3
unlike "... the proxy is not dialled" "$(cat "$W/sq.out")" '^got='
# Not exempted: through the proxy (the operator's), with a warning that it sees the token.
out=$(PISTIS_URL=ws://10.231.9.9:$CP http_proxy=http://127.0.0.1:$PX timeout 10 "$BIN/pistis" ls 2>&1)
squat_end
like "pistis, the server neither loopback nor exempted: dials the proxy (the control)" \
	"$(cat "$W/sq.out")" '^got=[1-9]'
like "... warning that the proxy sees the client token" "$out" \
	"Dialling ws://10\\.231\\.9\\.9:$CP through the proxy http_proxy names: the proxy sees the client token"

# --- 4. plain ws:// to a relay outside the namespace ------------------------------------------
# The owner check cannot see a peer in another namespace: there only the network vouches, and
# agents are on the sandbox's side of it (a resolver on a local address whose port they can
# take, a name in no_proxy). serve said nothing; now it warns once, before the token goes.
unlike "a relay on loopback: no warning about plain ws://" "$(cat "$W/pd.log")" 'outside this network namespace'
kill "$PD" && wait "$PD" 2>/dev/null
PD=
if unshare -n sleep 60 & NS2=$! && sleep 0.2 &&
	ip link add vrn0 type veth peer name vrn1 netns "$NS2" 2>/dev/null &&
	ip addr add 10.231.7.1/24 dev vrn0 && ip link set vrn0 up &&
	nsenter -t "$NS2" -n sh -c 'ip addr add 10.231.7.2/24 dev vrn1 && ip link set vrn1 up'; then
	: >"$W/far.out"
	nsenter -t "$NS2" -n python3 -c '
import socket, sys
s = socket.socket(); s.bind(("10.231.7.2", int(sys.argv[1]))); s.listen(1)
print("listening", flush=True)
c, _ = s.accept(); c.settimeout(3); d = b""
try:
    while b"\r\n\r\n" not in d:
        b = c.recv(4096)
        if not b: break
        d += b
except Exception: pass
print("got=%d" % len(d), flush=True)' "$P" >"$W/far.out" 2>&1 &
	FAR=$!
	for _ in $(seq 50); do grep -q listening "$W/far.out" && break; sleep 0.1; done
	(in_root_exec "$R" pistisd serve --relay "ws://10.231.7.2:$P" --token-file /etc/pistis/token \
		--name s1 ${ALLOW:+--allow $ALLOW}) >"$W/pd.log" 2>&1 &
	PD=$!
	for _ in $(seq 100); do grep -q '^got=' "$W/far.out" && break; sleep 0.1; done
	like "ws:// to a relay in another namespace: serve dials it ..." "$(cat "$W/far.out")" '^got=[1-9]'
	like "... warning that the token crosses the network in clear, to whoever answers" \
		"$(cat "$W/pd.log")" "The relay at 10\\.231\\.7\\.2:$P is outside this network namespace and dialled over plain ws://"
	kill "$FAR" "$NS2" 2>/dev/null; wait "$FAR" "$NS2" 2>/dev/null
else
	kill "$NS2" 2>/dev/null
	skip "ws:// elsewhere" "no veth pair here"
	skip "ws:// elsewhere, warning" "no veth pair here"
fi

done_testing
