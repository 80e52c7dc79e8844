#!/bin/bash
# Relay benchmark: the round trip of `true` through pistis -> server-min -> pistisd against
# the local `pistisd run` of the same command (median and p99 of 100), 1 GiB of output through
# the relay against the local run, pistisd's idle RSS, its size and what dominates it.
# docker exec is compared only where dockerd runs (not started here: see the message).
# Run as root from the tree: PISTIS_BUILD=build bash bench/relay.sh
. "$(dirname "$0")/../tests/lib.sh"
need_mount_ns "$@"
R=$(root_fresh debian) || exit 1
mkdir -p "$R/etc/pistis"
head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$R/etc/pistis/token"
chmod 600 "$R/etc/pistis/token"
ALLOW=$(in_root "$R" pistisd check --no-walk 2>/dev/null |
	awk '$3 == "yes" && ($2 == "fail" || $2 == "missing") {print $1}' | paste -sd, -)
ct=clienttoken-0123456789abcdef
W=$(mktemp -d)
SP=$((20000 + RANDOM % 12000)); CP=$((SP + 1))
echo "{\"listen\":{\"sandbox\":\"127.0.0.1:$SP\",\"client\":\"127.0.0.1:$CP\"},\"client_token\":\"$ct\",\"sandboxes\":[{\"name\":\"s1\",\"token\":\"$(cat "$R/etc/pistis/token")\"}]}" >"$W/pistis.json"
"$BIN/server-min" --config "$W/pistis.json" >"$W/smin.log" 2>&1 &
SM=$!
in_root "$R" pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1 \
	${ALLOW:+--allow $ALLOW} >"$W/pd.log" 2>&1 &
export PISTIS_URL=ws://127.0.0.1:$CP PISTIS_TOKEN=$ct
for _ in $(seq 100); do "$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
PD=$(pgrep -n -f 'pistisd serve --relay ws://127.0.0.1:'"$SP")
"$BIN/pistis" exec --agent alice -- true
echo "pistisd idle RSS (connected, one command run): $(awk '/VmRSS/ {print $2, $3}' /proc/$PD/status)"
local_run() { chroot "$R" /usr/local/bin/pistisd run --agent alice -- "$@"; }
local_run /bin/true

# median and p99 in microseconds of 100 runs of "$@"
times() {
	for _ in $(seq 100); do
		s=$(date +%s%N)
		"$@" >/dev/null
		echo $((($(date +%s%N) - s) / 1000))
	done | sort -n >"$W/t"
	echo "$(sed -n 50p "$W/t") $(sed -n 99p "$W/t")"
}
read -r rm rp <<<"$(times "$BIN/pistis" exec --agent alice -- /bin/true)"
read -r lm lp <<<"$(times local_run /bin/true)"
echo "round trip of true, us (median p99): relay $rm $rp; local pistisd run $lm $lp"
echo "  relay / local = $(echo "scale=2; $rm / $lm" | bc) (target <= 1.5)"

GIB=1073741824
s=$(date +%s%N); n=$("$BIN/pistis" exec --agent alice -- head -c $GIB /dev/zero | wc -c); e=$(date +%s%N)
rt=$(((e - s) / 1000000))
s=$(date +%s%N); m=$(local_run head -c $GIB /dev/zero | wc -c); e=$(date +%s%N)
lt=$(((e - s) / 1000000))
echo "1 GiB of output: relay $n bytes in $rt ms = $((1024 * 1000 / rt)) MiB/s; local run $m bytes in $lt ms = $((1024 * 1000 / lt)) MiB/s"
echo "pistisd RSS after the runs (1 GiB through it): $(awk '/VmRSS/ {print $2, $3}' /proc/$PD/status)"
echo "pistisd stripped size: $(stat -c %s "$BIN/pistisd") bytes"
if [ -f "$PISTIS_BUILD/musl/pistisd" ]; then
	size "$PISTIS_BUILD/musl/pistisd" | sed 's/^/  /'
	echo "  largest symbols:"
	nm --size-sort -S -r "$PISTIS_BUILD/musl/pistisd" | head -n 8 | sed 's/^/    /'
	echo "  by origin (text+data bytes of symbols whose names start with…):"
	nm -S -t d "$PISTIS_BUILD/musl/pistisd" | awk 'NF == 4 { n = $4; sz = $2 + 0; k = "other"
		if (n ~ /^(lws|_lws|__lws)/) k = "libwebsockets"
		else if (n ~ /^(seccomp|_seccomp|arch_|db_|gen_bpf)/) k = "libseccomp"
		else if (n ~ /^cJSON/) k = "cjson"
		else if (n ~ /^(EVP|X509|SSL|ssl|tls|OPENSSL|ossl|OSSL|BN_|bn_|EC_|ec_|ecp_|RSA|rsa|ASN1|asn1|CRYPTO|ERR_|OBJ_|PEM|PKCS|evp|x509|aes|AES|sha|SHA|ChaCha|Poly|poly|DH_|dh_|DSA|dsa|CMS|cms|HMAC|RAND|rand|OCSP|CT_|SCT|BIO|bio|UI_|DES|des|camellia|aria|ARIA|gcm|x25519|X25519|ED25519|ED448|k25519|curve448|nid_objs|param_group|ssl3_)/) k = "openssl"
		t[k] += sz } END { for (k in t) printf "    %-14s %8d\n", k, t[k] }' | sort -k2 -nr
fi
if command -v dockerd >/dev/null && docker info >/dev/null 2>&1; then
	echo "docker: a daemon is running, but this bench does not drive it yet"
else
	echo "docker exec: skipped (no running dockerd here; comparing needs docker.io installed, dockerd started with --bridge=none --iptables=false and an image imported from the test root)"
fi
kill "$PD" "$SM"
wait
