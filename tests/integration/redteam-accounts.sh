#!/bin/bash
# Red team: accounts that live outside the files pistisd parses, and account files that are
# not plain files. A file mounted over /etc/passwd (docker run -v /etc/passwd:/etc/passwd)
# or an immutable one (chattr +i): refused before anything is written, where the registry
# and three of the four files used to name an agent /etc/passwd lacked. NIS compat lines
# ("+::::::" last): pistis's lines go before them, where glibc's compat module reads them.
# nsswitch.conf read as glibc reads it ("files # sss" loads sss; "sss[NOTFOUND=return]" is
# sss; "passwd files sss" with no colon), compat's "+" lines, and subordinate ids of a
# rootless container's user in the agents' range: pistisd check's nss_sources names them.
# A rewrite keeps the account file's ACL and xattrs (an SELinux label), and brings back
# none the operator removed.
# Debian root; root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] || missing "pistisd not built"
S=$(scratch)
fresh() { R=$(root_fresh debian) || { echo "Bail out! no debian root"; exit 1; }; }
u() { "$P" users "$@" --root "$R"; }
# The four account files and the registry, by content: "nothing written" means this holds.
sums() { (cd "$R" && cat etc/passwd etc/group etc/shadow etc/gshadow data/pistis/users.registry 2>/dev/null | md5sum); }
check_value() { # NAME: that check's status and value for the root ("none": no report in 30 s)
	timeout -s KILL 30 "$P" check --root "$R" --json --no-walk 2>/dev/null | python3 -c 'import json, sys
t = sys.stdin.read()
c = [c for c in json.loads(t)["checks"] if c["name"] == sys.argv[1]] if t else None
print("none") if c is None else print(c[0]["status"], c[0]["value"]) if c else print("absent")' "$1"
}

# --- 1. a file mounted over /etc/passwd -----------------------------------------------------
# Before: the registry and /etc/shadow, /etc/gshadow, /etc/group were committed, then the
# rename over /etc/passwd failed with EBUSY ("cannot replace /etc/passwd (Resource busy)"):
# an agent in three files and the registry but not in passwd, and every later ensure failed
# the same way (then with EXDEV). Writing into the mounted file instead would write into
# whatever shares it, often the host's own /etc/passwd.
fresh
u ensure-base >/dev/null
cp -p "$R/etc/passwd" "$S/passwd.host"
mount --bind "$S/passwd.host" "$R/etc/passwd"
before=$(sums)
host_before=$(md5sum <"$S/passwd.host")
out=$(u ensure mnt/a 2>&1)
is "ensure with a file mounted over /etc/passwd: exit 111" "$?" 111
like "... saying it is a mount point and nothing was written" "$out" \
	'/etc/passwd is a mount point .*nothing written'
is "... nothing written: passwd, group, shadow, gshadow, registry" "$(sums)" "$before"
ok "... no registry record" test ! -s "$R/data/pistis/users.registry"
is "... the mounted file untouched" "$(md5sum <"$S/passwd.host")" "$host_before"
like "pistisd check's account_files warns, naming it" "$(check_value account_files)" \
	'^warn .*/etc/passwd is a mount point'
umount "$R/etc/passwd"

# remove --forget commits /etc first: a mounted /etc/group stopped it after /etc/shadow and
# /etc/gshadow had lost the agent.
u ensure mnt/b >/dev/null
cp -p "$R/etc/group" "$S/group.host"
mount --bind "$S/group.host" "$R/etc/group"
before=$(sums)
out=$(u remove mnt/b --forget 2>&1)
is "remove --forget with a file mounted over /etc/group: exit 111" "$?" 111
like "... naming it" "$out" '/etc/group is a mount point'
is "... nothing written" "$(sums)" "$before"
umount "$R/etc/group"
like "... and the agent is still whole" "$(u show mnt/b 2>&1)" 'uid=10100'

# /etc a mount of its own (a read-only root with /etc on a tmpfs): renames stay inside it.
fresh
cp -a "$R/etc" "$S/etc.copy"
mount -t tmpfs -o mode=0755 etc-tmpfs "$R/etc" && cp -a "$S/etc.copy/." "$R/etc/"
out=$(u ensure tmpfs/a 2>&1)
is "/etc on a tmpfs of its own: ensure works" "$?" 0
like "... and account_files is ok" "$(check_value account_files)" '^ok '

# --- 2. an immutable or append-only account file --------------------------------------------
fresh
u ensure-base >/dev/null
if chattr +i "$R/etc/passwd" 2>/dev/null; then
	before=$(sums)
	out=$(u ensure imm/a 2>&1)
	is "ensure with /etc/passwd immutable: exit 111" "$?" 111
	like "... saying so, nothing written" "$out" '/etc/passwd is immutable \(chattr \+i\).*nothing written'
	is "... nothing written" "$(sums)" "$before"
	like "pistisd check's account_files warns" "$(check_value account_files)" \
		'^warn .*/etc/passwd is immutable'
	chattr -i "$R/etc/passwd"
else
	skip "immutable /etc/passwd" "chattr +i not supported here"
fi
if chattr +a "$R/etc/shadow" 2>/dev/null; then
	before=$(sums)
	out=$(u ensure imm/b 2>&1)
	is "ensure with /etc/shadow append-only: exit 111" "$?" 111
	like "... saying so" "$out" '/etc/shadow is append-only'
	is "... nothing written" "$(sums)" "$before"
	chattr -a "$R/etc/shadow"
else
	skip "append-only /etc/shadow" "chattr +a not supported here"
fi
out=$(u ensure imm/a 2>&1)
is "once cleared, ensure works" "$?" 0

# --- 3. NIS compat lines: the new lines go before them -----------------------------------------
# glibc's compat module answers a name or uid that reaches a bare "+" from NIS and reads
# no line after it. pistis appended after the classic trailing "+::::::": pi-tools and
# every agent were unknown to getent, id, sudo -u; a directory's "pi-tools" would win.
fresh
printf 'passwd: compat\ngroup: compat\nshadow: compat\n' >"$R/etc/nsswitch.conf"
printf '+::::::\n' >>"$R/etc/passwd"
printf '+:::\n' >>"$R/etc/group"
printf '+::::::::\n' >>"$R/etc/shadow"
cp "$R/etc/passwd" "$S/passwd.nis"
name=$(u ensure nis/a | sed -n 's/^name=//p')
is "the '+' line stays the last line of /etc/passwd" "$(tail -n 1 "$R/etc/passwd")" '+::::::'
is "... of /etc/group" "$(tail -n 1 "$R/etc/group")" '+:::'
is "... of /etc/shadow" "$(tail -n 1 "$R/etc/shadow")" '+::::::::'
is "every original line kept, in order" \
	"$(grep -vxE "pi-tools:.*|$name:.*" "$R/etc/passwd" | md5sum)" "$(md5sum <"$S/passwd.nis")"
like "glibc (compat) finds the agent by name" "$(chroot "$R" getent passwd "$name")" "^$name:x:10100:"
like "... by uid" "$(chroot "$R" getent passwd 10100)" "^$name:"
like "... and pi-tools" "$(chroot "$R" getent passwd pi-tools)" '^pi-tools:x:10002:'
like "... and the agent's groups" "$(chroot "$R" id -Gn "$name" 2>&1)" 'pi-sandbox'
like "pistisd check's nss_sources names compat's '+' line (NIS)" "$(check_value nss_sources)" \
	"^warn .*nis \(compat: '\+' line [0-9]+ of /etc/passwd\)"

# --- 4. nsswitch.conf as glibc reads it ---------------------------------------------------------
nss() { # CONTENT: nss_sources' status and value with that nsswitch.conf
	if [ "$1" = none ]; then rm -f "$R/etc/nsswitch.conf"; else printf '%b' "$1" >"$R/etc/nsswitch.conf"; fi
	check_value nss_sources
}
fresh
like "'passwd: files # sss': glibc loads sss (no comment inside a line)" \
	"$(nss 'passwd: files # sss\n')" "^warn .*sss \(after a '#'\).*no comment inside a line"
like "'sss[NOTFOUND=return]' is sss" "$(nss 'passwd: files sss[NOTFOUND=return]\n')" '^warn .*from sss '
like "'[NOTFOUND=continue]ldap' is ldap" "$(nss 'passwd: files [NOTFOUND=continue]ldap\n')" \
	'^warn .*from ldap '
like "'passwd<TAB>files sss' (no colon) names sss" "$(nss 'passwd\tfiles sss\n')" '^warn .*from sss '
like "a '[' where a source should start ends the line, as in glibc" \
	"$(nss 'passwd: [NOTFOUND=return] sss\ngroup: files\n')" '^ok '
like "compat without '+' lines: ok" "$(nss 'passwd: compat\ngroup: compat\n')" '^ok '
printf '+svc::::::\n' >>"$R/etc/passwd"
like "compat with '+svc': warn, naming passwd_compat's source" \
	"$(nss 'passwd: compat\npasswd_compat: sss\ngroup: files\n')" "^warn .*sss \(compat: '\+' line"
like "no nsswitch.conf and a '+' line (older glibc: compat by default): warn" "$(nss none)" \
	"^warn .*nis \(compat"
like "files with a '+' line: ok (files reads no NIS)" "$(nss 'passwd: files\ngroup: files\n')" '^ok '
sed -i '/^+svc/d' "$R/etc/passwd"
# A FIFO there (or a link to one): check opened it O_RDONLY and waited for a writer for ever,
# and serve's start-up, which runs check, with it (red team). Not read now, and said.
rm -f "$R/etc/nsswitch.conf"
mkfifo -m 0644 "$R/etc/nsswitch.conf"
like "a FIFO at /etc/nsswitch.conf: check ends, nss_sources warns naming it" \
	"$(check_value nss_sources)" '^warn /etc/nsswitch.conf is not a regular file'
rm "$R/etc/nsswitch.conf"
mkfifo -m 0644 "$R/etc/nss.fifo"
ln -s nss.fifo "$R/etc/nsswitch.conf"
like "... a link to a FIFO: the same" "$(check_value nss_sources)" \
	'^warn /etc/nsswitch.conf is not a regular file'
rm -f "$R/etc/nsswitch.conf" "$R/etc/nss.fifo"

# --- 5. subordinate ids in the agents' range --------------------------------------------------
echo 'alice:10000:65536' >"$R/etc/subuid"
like "/etc/subuid meeting 10100-59999: warn, naming the range" \
	"$(nss 'passwd: files\ngroup: files\n')" "^warn .*/etc/subuid: 'alice' 10000-75535"
# strtoull reads "-1" as 2^64-1: start + count wrapped to 999 and the range, which meets every
# agent's id, was taken for one that ends below them
echo 'alice:1000:-1' >"$R/etc/subuid"
like "a count whose end wraps (-1): warn, the range ending at 2^64-1" \
	"$(nss 'passwd: files\ngroup: files\n')" "^warn .*/etc/subuid: 'alice' 1000-18446744073709551615"
echo 'alice:100000:65536' >"$R/etc/subuid"
echo '1000:60000:65536' >"$R/etc/subgid"
like "ranges outside it (the useradd default, 100000 up): ok" "$(nss 'passwd: files\n')" '^ok '

# --- 6. what a rewrite keeps of an account file: its label, access ACL and user xattrs ----------
# A rewrite is a new inode (or the recycled backup, the version before): before, the first
# ensure dropped /etc/shadow's ACL and every xattr (an SELinux label: shadow_t became the
# directory's default), and the next one brought the old ones back from the backup.
fresh
acl() { getfacl -cn "$R/etc/shadow" 2>/dev/null | grep -c '^user:34:'; }
xa() { getfattr --absolute-names -n user.pistis-test --only-values "$R/etc/passwd" 2>/dev/null; }
if setfacl -m u:34:r "$R/etc/shadow" 2>/dev/null && setfattr -n user.pistis-test -v one "$R/etc/passwd" 2>/dev/null; then
	for a in x1 x2 x3; do
		u ensure "acl/$a" >/dev/null
		is "after ensure $a: /etc/shadow keeps its ACL entry" "$(acl)" 1
		is "... /etc/passwd keeps its xattr" "$(xa)" one
	done
	setfattr -x user.pistis-test "$R/etc/passwd"
	setfacl -b "$R/etc/shadow"
	for a in x4 x5; do
		u ensure "acl/$a" >/dev/null
		is "after ensure $a, both removed by the operator: no ACL comes back from the backup" "$(acl)" 0
		is "... nor the xattr" "$(xa)" ""
	done
	is "... and /etc/shadow keeps its mode" "$(stat -c %a "$R/etc/shadow")" 640
else
	skip "ACL and xattrs on account files" "no ACL or user xattr support here"
fi

done_testing
