#!/bin/bash
# Relay benchmark (partial): round trip of `true` via pistis -> server-min -> pistisd (median, p99),
# cat of 256 MiB through the relay, pistisd RSS and size. Not yet: the local `pistisd run`
# baseline, docker exec, 1 GiB. Run as root from the tree: PISTIS_BUILD=build bash bench/relay.sh
. "$(dirname "$0")/../tests/lib.sh"
need_mount_ns "$@"
R=$(root_fresh debian) || exit 1
mkdir -p $R/etc/pistis; head -c 24 /dev/urandom | base64 | tr -d '/+=' > $R/etc/pistis/token; chmod 600 $R/etc/pistis/token
tok=$(cat $R/etc/pistis/token); ct=clienttoken-0123456789abcdef; W=$(mktemp -d)
echo "{\"listen\":{\"sandbox\":\"127.0.0.1:17710\",\"client\":\"127.0.0.1:17711\"},\"client_token\":\"$ct\",\"sandboxes\":[{\"name\":\"s1\",\"token\":\"$tok\"}]}" > $W/pistis.json
$BIN/server-min --config $W/pistis.json > $W/smin.log 2>&1 & SM=$!
in_root $R pistisd serve --relay ws://127.0.0.1:17710 --token-file /etc/pistis/token --name s1 > $W/pd.log 2>&1 & PD=$!
sleep 1
export PISTIS_URL=ws://127.0.0.1:17711 PISTIS_TOKEN=$ct
$BIN/pistis exec --agent alice -- true
for i in $(seq 100); do s=$(date +%s%N); $BIN/pistis exec --agent alice -- true; e=$(date +%s%N); echo $(( (e-s)/1000 )); done | sort -n > $W/rt
echo "relay round trip us: median $(sed -n 50p $W/rt) p99 $(sed -n 99p $W/rt)"
head -c 256M /dev/zero > $R/tmp/big
s=$(date +%s%N); $BIN/pistis exec --agent alice -- cat /tmp/big | wc -c; e=$(date +%s%N)
echo "cat 256 MiB: $(( (e-s)/1000000 )) ms -> $(( 256*1000000000/(e-s) )) MiB/s"
echo "pistisd idle RSS: $(grep VmRSS /proc/$PD/status)"
ls -l $BIN/pistisd
kill $PD $SM; wait
