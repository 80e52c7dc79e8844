# Helpers for the policy integration tests (sourced, not run).

# snap DIR...   one line per node: path (repr), type, mode, uid, gid, nlink, and every
# xattr (ACLs included) with its value, sorted; symlinks are not followed. Python copes
# with names holding newlines or invalid UTF-8.
snap() {
	python3 - "$@" <<'EOF'
import os, sys, stat
out = []
for top in sys.argv[1:]:
    if not os.path.lexists(top):
        out.append(repr(top) + " missing")
        continue
    stack = [top]
    while stack:
        p = stack.pop()
        st = os.lstat(p)
        xs = []
        try:
            for n in sorted(os.listxattr(p, follow_symlinks=False)):
                xs.append(n + "=" + os.getxattr(p, n, follow_symlinks=False).hex())
        except OSError:
            pass
        link = os.readlink(p) if stat.S_ISLNK(st.st_mode) else ""
        out.append("%r %o %d:%d n%d %s %r" % (os.fsencode(p), st.st_mode, st.st_uid,
                                              st.st_gid, st.st_nlink, ",".join(xs), link))
        if stat.S_ISDIR(st.st_mode) and not os.path.ismount(p) or p == top and stat.S_ISDIR(st.st_mode):
            for e in os.listdir(os.fsencode(p)):
                stack.append(os.path.join(os.fsencode(p), e).decode("utf-8", "surrogateescape"))
for l in sorted(out):
    print(l)
EOF
}

# mode_of PATH   -> "MODE UID:GID" (octal mode without type)
mode_of() { stat -c '%a %u:%g' -- "$1"; }
