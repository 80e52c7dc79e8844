#!/bin/bash
# Red team: pi-env (and the builder pistisd links) against names that load files or code
# but were not refused, secret-looking PI_* names the seatbelt missed, and the inherited
# environment a hostile parent hands it. The static binary on the host.
. "$(dirname "$0")/../lib.sh"

E=$BIN/pi-env
[ -x "$E" ] || missing "pi-env not built"

# A refused name is quoted escaped once; a long one is cut with a mark, never silently.
long=$(printf "x'%.0s" $(seq 150))
like "a refused --set name: escaped once, cut with a mark" "$("$E" --set "$long=1" --print 2>&1)" \
	"refused --set '(x\\\\'){66}x'\\[cut: 300 bytes\\]: "
like "a refused --keep name: the same" "$("$E" --keep "$long" --print 2>&1)" \
	"refused --keep '(x\\\\'){66}x'\\[cut: 300 bytes\\]: "

# Names whose value names a file or code to load: refused for --set and --keep, like
# LOCPATH, GCONV_PATH and a TERM with a '/'.
for n in MUSL_LOCPATH TERMINFO TERMINFO_DIRS TERMCAP OPENSSL_CONF OPENSSL_ENGINES \
	OPENSSL_MODULES GETCONF_DIR INPUTRC LOCPATH GCONV_PATH LD_PRELOAD LD_AUDIT BASH_ENV; do
	exits 100 "--set $n=/tmp/x refused" "$E" --set "$n=/tmp/x" --print
	exits 100 "--keep $n refused" "$E" --keep "$n" --print
done
# Secret-looking PI_* names are not copied from the inherited environment.
out=$(env -i PI_RELAY_BEARER=b1 PI_SERVER_JWT=j2 PI_RELAY_CRED=c3 PI_HMAC_KEY=h4 \
	PI_DB_DSN=postgres://u:p@h PI_RELAY_TOKEN=t5 PI_OK=fine "$E" --print)
unlike "no bearer, JWT, CRED, HMAC, DSN, TOKEN names pass" "$out" 'BEARER|JWT|CRED|HMAC|DSN|TOKEN'
like "... an ordinary PI_* does" "$out" '^PI_OK=fine$'
exits 100 "--keep PI_RELAY_BEARER refused" "$E" --keep PI_RELAY_BEARER --print
# Hostile inherited entries: invalid values drop the name, never the run.
out=$(env -i "PI_X=$(printf 'a\033]52;c;Zm9v\007')" "PI_Y=$(printf '\xc0\xaf')" \
	"LANG=C.UTF-8/../../x" "TERM=../../tmp/t" "COLUMNS=080" "LC_FOO=x" "BASH_FUNC_ls%%=() { id; }" \
	"$E" --print)
is "escape sequences, overlong UTF-8, paths in LANG/TERM, odd numbers, unknown LC_, functions: all dropped" \
	"$out" "PATH=/data/bin:/usr/local/bin:/usr/bin:/bin"
big=$(head -c 5000 /dev/zero | tr '\0' a)
is "a 5000-byte PI_* value is dropped" "$(env -i "PI_BIG=$big" "$E" --print | grep -c '^PI_BIG=')" 0
# C1 controls (U+0080-U+009F) are control characters too: UTF-8-encoded U+009B is a CSI
# that the Linux console and xterm act on, U+0085 (NEL) a line break in some loggers.
csi=$(printf '\302\2332J')
nel=$(printf 'a\302\205b')
out=$(env -i "PI_CSI=x${csi}y" "PI_NEL=$nel" "PI_OK2=caf$(printf '\303\251')" "$E" --print)
is "C1 controls in inherited PI_* values drop the names" "$(echo "$out" | grep -c '^PI_\(CSI\|NEL\)=')" 0
like "... a value with an ordinary non-ASCII letter passes" "$out" '^PI_OK2=caf'
exits 100 "--set with a UTF-8 CSI (U+009B) refused" "$E" --set "PI_X=a${csi}b" --print
exits 100 "--set with NEL (U+0085) refused" "$E" --set "PI_X=$nel" --print
exits 100 "--home with a C1 control refused" "$E" --home "/h${csi}" --print
# Unicode line and paragraph separators (U+2028, U+2029) end a line for some readers, and
# the bidirectional controls reorder what a terminal shows (CVE-2021-42574, "Trojan Source"):
# U+202E RLO, U+2066 LRI, U+2069 PDI, U+200F RLM, U+061C ALM.
ls_=$(printf '\342\200\250') ps_=$(printf '\342\200\251') rlo=$(printf '\342\200\256')
lri=$(printf '\342\201\246') pdi=$(printf '\342\201\251') rlm=$(printf '\342\200\217')
alm=$(printf '\330\234')
out=$(env -i "PI_LS=a${ls_}b" "PI_PS=a${ps_}b" "PI_RLO=${rlo}txt.exe" "PI_LRI=a${lri}b${pdi}" \
	"PI_RLM=a${rlm}" "PI_ALM=a${alm}" "PI_DASH=a$(printf '\342\200\224')b" \
	"PI_ARABIC=$(printf '\330\243\331\207\331\204\330\247')" "$E" --print)
is "U+2028, U+2029 and bidi controls in inherited PI_* values drop the names" \
	"$(echo "$out" | grep -c '^PI_\(LS\|PS\|RLO\|LRI\|RLM\|ALM\)=')" 0
like "... an em dash (E2 80 94, next to them) passes" "$out" '^PI_DASH=a'
like "... Arabic letters without controls pass" "$out" '^PI_ARABIC='
for c in ls_ ps_ rlo lri pdi rlm alm; do
	exits 100 "--set with ${c%_} refused" "$E" --set "PI_X=a${!c}b" --print
done
exits 100 "--home with U+202E refused" "$E" --home "/h${rlo}" --print

# fds: pi-env closes everything above 2 before CMD.
out=$(exec 5</etc/hostname; "$E" -- /bin/sh -c 'ls /proc/self/fd | sort -n | tr "\n" " "')
is "a caller fd 5 does not reach CMD" "$out" "0 1 2 3 "

done_testing
