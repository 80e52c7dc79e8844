#!/bin/bash
# pi-env, the static binary: hostile environment in, clean environment out; fds above 2
# closed; PATH search in the new PATH only; the exit code of every bad input.
# Touches nothing outside a scratch directory; needs no root.
. "$(dirname "$0")/../lib.sh"
PE=$BIN/pi-env
[ -x "$PE" ] || missing "$PE not built"
tmp=$(scratch)
DEFPATH=/data/bin:/usr/local/bin:/usr/bin:/bin

like "pi-env is a static PIE" "$(file "$PE")" 'static-pie linked'

# --- hostile environment in, clean environment out ---------------------------------------
# (duplicate names cannot be made with env(1), which replaces; test-env covers them)
got=$(env -i \
	LD_PRELOAD=/tmp/evil.so LD_LIBRARY_PATH=/tmp GCONV_PATH=/tmp GLIBC_TUNABLES=glibc.x=1 \
	BASH_ENV=/tmp/x ENV=/tmp/x SHELLOPTS=xtrace PS4='$(id)' 'BASH_FUNC_ls%%=() { id; }' \
	PYTHONPATH=/tmp NODE_OPTIONS='--require /tmp/x' PERL5OPT=-d GIT_SSH_COMMAND=id \
	TZ=/etc/shadow GITHUB_TOKEN=ghp_x AWS_SECRET_ACCESS_KEY=x PI_RELAY_TOKEN=secret \
	PATH=/tmp/evil HOME=/root USER=root SHELL=/tmp/sh TMPDIR=/tmp/evil \
	HTTPS_PROXY=http://evil LC_FOO=x LANG=../../tmp/x LC_ALL=C.UTF-8 \
	TERM=xterm-256color COLUMNS=080 LINES=24 NO_COLOR=1 \
	PI_AGENT=a1 PI_lower=x "PI_BAD=$(printf 'a\nb')" "PI_UTF=$(printf '\xff')" \
	"$PE" --agent-user pi-agent-1 --home /data/sandbox-home/pi-agent-1 \
	--tmpdir /data/sandbox-home/pi-agent-1/.tmp -- env | sort)
want=$(sort <<EOF
PATH=$DEFPATH
HOME=/data/sandbox-home/pi-agent-1
TMPDIR=/data/sandbox-home/pi-agent-1/.tmp
USER=pi-agent-1
LOGNAME=pi-agent-1
SHELL=/bin/sh
LC_ALL=C.UTF-8
TERM=xterm-256color
LINES=24
NO_COLOR=1
PI_AGENT=a1
EOF
)
is "hostile environment: only the allowlist comes out (env as CMD)" "$got" "$want"

got=$(env -i LANG=C PI_X=1 "$PE" --print -0 | tr '\0' '\n')
is "--print -0 separates with NUL" "$got" "PATH=$DEFPATH
LANG=C
PI_X=1"
is "--print -0 emits exactly 3 NULs" "$(env -i LANG=C PI_X=1 "$PE" --print -0 | tr -cd '\0' | wc -c)" 3

got=$(env -i EDITOR=vim TERM=xterm "$PE" --keep EDITOR --set TERM=dumb --set PI_MODE=test \
	--proxy http://127.0.0.1:3128 --print | sort)
want=$(sort <<EOF
PATH=$DEFPATH
HTTP_PROXY=http://127.0.0.1:3128
HTTPS_PROXY=http://127.0.0.1:3128
http_proxy=http://127.0.0.1:3128
https_proxy=http://127.0.0.1:3128
NO_PROXY=localhost,127.0.0.1
no_proxy=localhost,127.0.0.1
TERM=dumb
PI_MODE=test
EDITOR=vim
EOF
)
is "--keep, --set (overrides inherited) and --proxy" "$got" "$want"

big=$(head -c 100000 /dev/zero | tr '\0' a)
got=$(env -i "PI_BIG=$big" PI_SMALL=1 "$PE" --print)
is "a 100 KB inherited value is dropped, the rest kept" "$got" "PATH=$DEFPATH
PI_SMALL=1"

# --- file descriptors --------------------------------------------------------------------
fds=$(exec 7</dev/null 8>"$tmp/f"; "$PE" -- /bin/ls /proc/self/fd | sort -n | tr '\n' ' ')
is "fds above 2 are closed before exec (ls opens only its own 3)" "$fds" "0 1 2 3 "
fds=$(exec 7</dev/null 8>"$tmp/f"; /bin/ls /proc/self/fd | sort -n | tr '\n' ' ')
like "(control: without pi-env, fds 7 and 8 are inherited)" "$fds" ' 7 8 '
fds=$(exec 0<&-; "$PE" -- /bin/ls /proc/self/fd | sort -n | tr '\n' ' ')
is "a closed stdin is reopened on /dev/null, so nothing lands on fd 0" "$fds" "0 1 2 3 "

# --- PATH search uses the new PATH, never the inherited one ------------------------------
mkdir -p "$tmp/evil" "$tmp/mine"
printf '#!/bin/sh\ntouch %s/pwned\n' "$tmp" >"$tmp/evil/true"
printf '#!/bin/sh\necho mine "$PATH"\n' >"$tmp/mine/mycmd"
chmod 755 "$tmp/evil/true" "$tmp/mine/mycmd"
PATH="$tmp/evil:$PATH" "$PE" true
ok "CMD is looked up in the new PATH, not the inherited one" test ! -e "$tmp/pwned"
exits 127 "a command only on the inherited PATH is not found" env PATH="$tmp/mine:$PATH" "$PE" mycmd
is "--path is searched" "$("$PE" --path "$tmp/mine:/bin" mycmd)" "mine $tmp/mine:/bin"
exits 7 "CMD's exit status comes back" "$PE" -- sh -c 'exit 7'
is "arguments reach CMD unchanged" "$("$PE" -- printf '%s|' a 'b c' '--set' '')" "a|b c|--set||"

# --- bad input: one clear line and the documented exit code ------------------------------
check_bad() { # code desc args...
	local code=$1 desc=$2; shift 2
	local err rc
	err=$("$PE" "$@" 2>&1 >/dev/null); rc=$?
	is "$desc: exit $code" "$rc" "$code"
	is "$desc: one line on stderr" "$(printf '%s\n' "$err" | wc -l | tr -d ' ')" 1
	like "$desc: message names pi-env" "$err" '^pi-env: '
}
check_bad 100 "unknown option" --frobnicate -- true
check_bad 100 "--set without =" --set FOO -- true
check_bad 100 "--set name with a space" --set 'A B=1' -- true
check_bad 100 "--keep name with =" --keep A=B -- true
check_bad 100 "--keep name with a space" --keep 'A B' -- true
check_bad 100 "--keep LD_PRELOAD refused" --keep LD_PRELOAD -- true
check_bad 100 "--keep BASH_FUNC_ refused" --keep BASH_FUNC_x -- true
check_bad 100 "--keep a token refused" --keep GITHUB_TOKEN -- true
check_bad 100 "--set LD_PRELOAD refused" --set LD_PRELOAD=/x.so -- true
check_bad 100 "--set PATH refused (use --path)" --set PATH=/tmp -- true
check_bad 100 "--set a 100 KB value" --set "PI_X=$big" -- true
check_bad 100 "--set invalid UTF-8" --set "PI_X=$(printf 'a\xffb')" -- true
check_bad 100 "--set a newline" --set "PI_X=$(printf 'a\nb')" -- true
check_bad 100 "--set the same name twice" --set A=1 --set A=2 -- true
check_bad 100 "--set TZ with a path" --set TZ=/etc/shadow -- true
check_bad 100 "relative --path" --path bin:/usr/bin -- true
check_bad 100 "--path with an empty entry" --path /bin::/usr/bin -- true
check_bad 100 "relative --home" --home home -- true
check_bad 100 "bad --agent-user" --agent-user '-rf' -- true
check_bad 100 "--proxy that is not a URL" --proxy 127.0.0.1:3128 -- true
check_bad 100 "--no-proxy without --proxy" --no-proxy x -- true
check_bad 100 "option given twice" --path /bin --path /usr/bin -- true
check_bad 100 "option missing its value" --path
check_bad 100 "-0 without --print" -0 -- true
check_bad 100 "no command" --
check_bad 127 "a command that does not exist" -- no-such-command-pistis
check_bad 127 "a path that does not exist" -- "$tmp/no/such"
check_bad 127 "an empty command" -- ''
printf 'data' >"$tmp/plain"
check_bad 126 "a file that is not executable" -- "$tmp/plain"
check_bad 126 "a directory" -- "$tmp"
printf 'no shebang\n' >"$tmp/noexec" && chmod 755 "$tmp/noexec"
check_bad 126 "an executable without #! (no /bin/sh fallback)" -- "$tmp/noexec"

# --- help and version --------------------------------------------------------------------
like "--help" "$("$PE" --help)" '^Usage: pi-env'
exits 0 "--help exits 0" "$PE" --help
like "--version" "$("$PE" --version)" '^pi-env [0-9]+\.[0-9]+\.[0-9]+'
like "--version says musl static" "$("$PE" --version)" 'musl'

done_testing
