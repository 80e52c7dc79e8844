/* trusted: what the dynamic loader maps into a trusted program or interpreter, and from
 * where. sudo runs a trusted command without AT_SECURE, so glibc's and musl's loaders
 * honour the program's DT_RPATH and DT_RUNPATH ($ORIGIN, relative and empty entries: the
 * last two mean the working directory, which our rule pins to / with CWD=/ but which
 * nothing in the file pins) and a DT_NEEDED with a '/' (relative: from the working
 * directory). Whoever can write a
 * directory on such a path picks code that runs as pi-tools (the insecure-RPATH class of
 * CVEs). See docs/trusted.md, "The libraries a binary loads". */
#include "trusted/trusted.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/macro.h"
#include "trusted/internal.h"

#define LIB_DEPTH 8	  /* libraries loading libraries */
#define LIB_DIRS 64	  /* distinct RPATH/RUNPATH directories per program */
#define LIB_NAMES 256	  /* distinct library names per program */
#define PRELOAD_MAX 65536 /* bytes of /etc/ld.so.preload */

struct lib_obj {
	int fd;
	char path[PATH_MAX];   /* for messages: where it was found */
	char origin[PATH_MAX]; /* what $ORIGIN stands for */
	int depth;
	dev_t dev;
	ino_t ino;
	off_t size;
};

struct lib_name {
	char *name;
	int depth; /* of the first object that named it, plus one */
};

struct lib_walk {
	int root_fd;
	const char *what; /* text (a reason's start, names escaped) */
	char *why;
	size_t why_size;
	char *dirs[LIB_DIRS];
	size_t n_dirs;
	size_t probed[LIB_DIRS]; /* names already looked up in dirs[i] */
	struct lib_name names[LIB_NAMES];
	size_t n_names;
	struct lib_obj *objs[TRUSTED_ELF_LOADS_MAX]; /* the libraries (the program is not one) */
	size_t n_objs;
};

/* The reason, each name escaped once (escape_vformat): a nested reason (a chain walk's) goes
 * in as %-s. */
_printf_(3, 4) static int refuse(struct lib_walk *w, const struct lib_obj *o, const char *fmt, ...)
{
	char msg[PATH_MAX + 256];
	va_list ap;

	va_start(ap, fmt);
	escape_vformat(msg, sizeof(msg), "cut", 0, fmt, ap);
	va_end(ap);
	if (o && o->depth > 0)
		escape_format(w->why, w->why_size, "%-s: library '%s': %-s", w->what, o->path, msg);
	else
		escape_format(w->why, w->why_size, "%-s: %-s", w->what, msg);
	return 1;
}

static int pread_exact(void *userdata, uint64_t off, void *buf, size_t len)
{
	int fd = *(int *)userdata;

	while (len > 0) {
		ssize_t n = pread(fd, buf, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* shorter than fstat said: changed under us */
		buf = (uint8_t *)buf + n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* One RPATH/RUNPATH element with $ORIGIN expanded, into out (PATH_MAX). The loaders
 * disagree on everything else with a '$' (glibc expands $LIB and $PLATFORM from its build
 * and the CPU, keeps other names as they are; musl drops the whole list), so it is refused. */
static int expand_entry(struct lib_walk *w, const struct lib_obj *o, const char *kind,
			const char *e, size_t len, char *out)
{
	size_t n = 0;

	for (size_t i = 0; i < len;) {
		const char *add = NULL;
		size_t skip = 0, l = 0;

		if (e[i] != '$') {
			add = e + i;
			l = skip = 1;
		} else if (len - i >= 9 && !memcmp(e + i, "${ORIGIN}", 9)) {
			add = o->origin, skip = 9;
		} else if (len - i >= 7 && !memcmp(e + i, "$ORIGIN", 7) &&
			   (len - i == 7 ||
			    !(e[i + 7] == '_' || (e[i + 7] >= 'a' && e[i + 7] <= 'z') ||
			      (e[i + 7] >= 'A' && e[i + 7] <= 'Z') ||
			      (e[i + 7] >= '0' && e[i + 7] <= '9')))) {
			add = o->origin, skip = 7;
		}
		if (!add) {
			bool lib = (len - i >= 4 && !memcmp(e + i, "$LIB", 4)) ||
				   (len - i >= 6 && !memcmp(e + i, "${LIB}", 6));
			bool plat = (len - i >= 9 && !memcmp(e + i, "$PLATFORM", 9)) ||
				    (len - i >= 11 && !memcmp(e + i, "${PLATFORM}", 11));

			return refuse(
				w, o, "%s entry '%.*s': %-s: name the directory itself", kind,
				(int)len, e,
				lib    ? "$LIB is what the loader was built with (lib, lib64, "
					 "lib/x86_64-linux-gnu...), not something the image pins"
				: plat ? "$PLATFORM is the CPU's (x86_64, haswell...), not "
					 "something the image pins"
				       : "a '$' other than $ORIGIN, which glibc and musl read "
					 "differently");
		}
		if (add != e + i)
			l = strlen(add);
		if (n + l >= PATH_MAX)
			return refuse(w, o, "%s entry '%.*s' is too long once expanded", kind,
				      (int)len, e);
		memcpy(out + n, add, l);
		n += l;
		i += skip;
	}
	out[n] = '\0';
	return 0;
}

/* Each element of an RPATH or RUNPATH: absolute once $ORIGIN is expanded, and the directory,
 * every directory on the way and the nearest existing parent of a missing one root's alone.
 * Both lists are checked whatever the loader uses: glibc still searches the DT_RPATH of the
 * objects that loaded an object without DT_RUNPATH, musl uses RUNPATH or RPATH of each of
 * them; the union is what can be searched. */
static int check_path_list(struct lib_walk *w, const struct lib_obj *o, const char *kind,
			   const char *list)
{
	const char *p = list;

	if (strchr(list, '\n'))
		return refuse(w, o, "%s '%s' holds a newline (musl splits there, glibc does not)",
			      kind, list);
	for (;;) {
		size_t l = strcspn(p, ":");
		char dir[PATH_MAX], msg[PATH_MAX + 128];
		int r;

		if (l == 0)
			return refuse(w, o,
				      "%s '%s' has an empty entry, which glibc's loader reads as "
				      "the working directory: remove it",
				      kind, list);
		r = expand_entry(w, o, kind, p, l, dir);
		if (r != 0)
			return r;
		if (dir[0] != '/')
			return refuse(w, o,
				      "%s entry '%.*s' is relative: the loader resolves it from "
				      "the working directory, not the program's (use an absolute "
				      "path or $ORIGIN)",
				      kind, (int)l, p);
		r = trusted_chain_walk(w->root_fd, dir, true, NULL, NULL, msg, sizeof(msg));
		if (r == -ENAMETOOLONG || r == -ELOOP)
			return refuse(w, o, "%s entry '%.*s' -> '%s': too long or too deep", kind,
				      (int)l, p, dir);
		if (r < 0 && r != -ENOENT && r != -ENOTDIR)
			return r;
		if (r > 0)
			return refuse(w, o, "%s entry '%.*s' -> %-s", kind, (int)l, p, msg);
		if (r == 0) {
			bool seen = false;

			for (size_t i = 0; i < w->n_dirs && !seen; i++)
				seen = !strcmp(w->dirs[i], dir);
			if (!seen) {
				if (w->n_dirs >= LIB_DIRS)
					return refuse(w, o,
						      "more than %d library search directories",
						      LIB_DIRS);
				w->dirs[w->n_dirs] = strdup(dir);
				if (!w->dirs[w->n_dirs])
					return -ENOMEM;
				w->probed[w->n_dirs++] = 0;
			}
		}
		if (!p[l])
			return 0;
		p += l + 1;
	}
}

/* Queue the file opened as fd (checked root's alone by trusted_chain_walk) unless the same
 * file with the same origin is queued already. Takes fd. */
static int add_obj(struct lib_walk *w, int fd, const char *path, const char *origin, int depth)
{
	_cleanup_close_ int f = fd;
	struct lib_obj *o;
	struct stat st;

	if (fstat(f, &st) < 0)
		return -errno;
	for (size_t i = 0; i < w->n_objs; i++)
		if (w->objs[i]->dev == st.st_dev && w->objs[i]->ino == st.st_ino &&
		    !strcmp(w->objs[i]->origin, origin))
			return 0;
	if (depth > LIB_DEPTH)
		return refuse(w, NULL, "library '%s': libraries nested more than %d deep", path,
			      LIB_DEPTH);
	if (w->n_objs >= ELEMENTSOF(w->objs))
		return refuse(w, NULL, "more than %d libraries to check", TRUSTED_ELF_LOADS_MAX);
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->fd = TAKE_FD(f);
	snprintf(o->path, sizeof(o->path), "%s", path);
	snprintf(o->origin, sizeof(o->origin), "%s", origin);
	o->depth = depth;
	o->dev = st.st_dev;
	o->ino = st.st_ino;
	o->size = st.st_size;
	w->objs[w->n_objs++] = o;
	return 0;
}

/* A library named by path (a DT_NEEDED with a '/', an ld.so.preload entry): absolute, and
 * root's alone like an interpreter; its origin is the directory as named (the loaders take
 * it from the name, not from the file's real place). */
static int add_by_path(struct lib_walk *w, const struct lib_obj *from, const char *kind,
		       const char *name, int depth)
{
	_cleanup_close_ int fd = -1;
	char msg[PATH_MAX + 128], origin[PATH_MAX];
	int r;

	if (name[0] != '/')
		return refuse(w, from,
			      "%s '%s' is a relative path: the loader opens it from the working "
			      "directory (link the library by an absolute path or a soname)",
			      kind, name);
	r = trusted_chain_walk(w->root_fd, name, false, &fd, NULL, msg, sizeof(msg));
	if (r == -ENOENT || r == -ENOTDIR)
		return 0; /* nothing there to load: the program does not start */
	if (r == -ENAMETOOLONG || r == -ELOOP)
		return refuse(w, from, "%s '%s': too long or too deep", kind, name);
	if (r < 0)
		return r;
	if (r > 0)
		return refuse(w, from, "%s library %-s", kind, msg);
	snprintf(origin, sizeof(origin), "%s", name);
	trusted_path_to_dir(origin);
	return add_obj(w, TAKE_FD(fd), name, origin, depth);
}

static int add_name(struct lib_walk *w, const char *name, int depth)
{
	for (size_t i = 0; i < w->n_names; i++)
		if (!strcmp(w->names[i].name, name))
			return 0;
	if (w->n_names >= LIB_NAMES)
		return refuse(w, NULL, "more than %d library names to look up", LIB_NAMES);
	w->names[w->n_names].name = strdup(name);
	if (!w->names[w->n_names].name)
		return -ENOMEM;
	w->names[w->n_names++].depth = depth;
	return 0;
}

/* The names an object makes the loader map, and where it searches for them. */
static int scan_obj(struct lib_walk *w, struct lib_obj *o, const void *buf, size_t len)
{
	struct trusted_elf_dyn d;
	char why[256];
	int r;

	if (o->fd >= 0) {
		r = trusted_elf_dynamic(pread_exact, &o->fd, (uint64_t)o->size, &d, why,
					sizeof(why));
	} else {
		r = trusted_elf_dynamic_buf(buf, len, &d, why, sizeof(why));
	}
	if (r == -EINVAL)
		r = refuse(w, o, "its dynamic section cannot be read as the loader reads it: %-s",
			   why);
	if (r == 1 && !d.dynamic)
		r = 0; /* a static program (ET_EXEC without PT_DYNAMIC): nothing to load */
	if (r <= 0)
		goto out;
	r = 0;
	if (d.rpath)
		r = check_path_list(w, o, "RPATH", d.rpath);
	if (r == 0 && d.runpath)
		r = check_path_list(w, o, "RUNPATH", d.runpath);
	for (size_t i = 0; r == 0 && i < d.n; i++) {
		const char *name = d.loads[i].name;
		bool audit =
			!strcmp(d.loads[i].tag, "AUDIT") || !strcmp(d.loads[i].tag, "DEPAUDIT");
		char one[TRUSTED_ELF_STR_MAX + 1];

		/* glibc expands $ORIGIN in these too, musl opens them as they are. */
		if (strchr(name, '$')) {
			r = refuse(w, o,
				   "%s '%s' holds a '$', which glibc and musl read differently",
				   d.loads[i].tag, name);
			break;
		}
		/* DT_AUDIT and DT_DEPAUDIT are ':'-separated lists (glibc: empty names skipped). */
		for (const char *p = name; r == 0 && *p;) {
			size_t l = audit ? strcspn(p, ":") : strlen(p);

			memcpy(one, p, l);
			one[l] = '\0';
			p += l + (p[l] == ':');
			if (l == 0)
				continue;
			if (strchr(one, '/'))
				r = add_by_path(w, o, d.loads[i].tag, one, o->depth + 1);
			else
				r = add_name(w, one, o->depth + 1);
		}
	}
out:
	trusted_elf_dyn_done(&d);
	return r;
}

/* Every name looked up in every search directory not yet paired with it: any match (not only
 * the first, which depends on which object asks and on the file's class) must be root's
 * alone and is scanned in turn. Libraries found only in the system directories are not. */
static int probe_dirs(struct lib_walk *w)
{
	for (size_t i = 0; i < w->n_dirs; i++)
		for (; w->probed[i] < w->n_names; w->probed[i]++) {
			const struct lib_name *nm = &w->names[w->probed[i]];
			_cleanup_close_ int fd = -1;
			char path[PATH_MAX], msg[PATH_MAX + 128];
			int r;

			if (snprintf(path, sizeof(path), "%s/%s", w->dirs[i], nm->name) >=
			    (int)sizeof(path))
				return refuse(w, NULL, "library '%s' in '%s': path too long",
					      nm->name, w->dirs[i]);
			r = trusted_chain_walk(w->root_fd, path, false, &fd, NULL, msg,
					       sizeof(msg));
			if (r == -ENOENT || r == -ENOTDIR)
				continue;
			if (r == -ENAMETOOLONG || r == -ELOOP)
				return refuse(w, NULL, "library '%s': too long or too deep", path);
			if (r < 0)
				return r;
			if (r > 0)
				return refuse(
					w, NULL,
					"library '%s', found in the search directory '%s': %-s",
					nm->name, w->dirs[i], msg);
			r = add_obj(w, TAKE_FD(fd), path, w->dirs[i], nm->depth);
			if (r != 0)
				return r;
		}
	return 0;
}

/* glibc's loader maps every library /etc/ld.so.preload lists into every dynamic program
 * (musl has no such file). Absent, or root's alone and every entry an absolute path to a
 * library root's alone. */
static int check_preload(struct lib_walk *w)
{
	static const char path[] = "/etc/ld.so.preload";
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *text = NULL;
	char msg[PATH_MAX + 128], one[PATH_MAX];
	const char *name;
	size_t len = 0, pos = 0, l;
	int r;

	r = trusted_chain_walk(w->root_fd, path, false, &fd, NULL, msg, sizeof(msg));
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (r > 0)
		return refuse(w, NULL, "%s (every dynamic program loads what it lists): %-s", path,
			      msg);
	r = fd_read_all(fd, PRELOAD_MAX, &text, &len);
	if (r == -EFBIG)
		return refuse(w, NULL, "%s is larger than %d bytes", path, PRELOAD_MAX);
	if (r < 0)
		return r;
	if (memchr(text, '\0', len))
		return refuse(w, NULL, "%s holds a NUL byte", path);
	while ((l = trusted_preload_next(text, len, &pos, &name)) > 0) {
		if (l >= sizeof(one))
			return refuse(w, NULL, "%s: an entry longer than %d bytes", path,
				      PATH_MAX - 1);
		memcpy(one, name, l);
		one[l] = '\0';
		if (one[0] != '/' || strchr(one, '$'))
			return refuse(w, NULL,
				      "%s entry '%s': not an absolute path (the loader would "
				      "search for it, or expand it)",
				      path, one);
		r = add_by_path(w, NULL, path, one, 1);
		if (r != 0)
			return r;
	}
	return 0;
}

int trusted_elf_libs_check(int root_fd, const char *what, int fd, const void *buf, size_t len,
			   const char *origin, bool has_interp, char *why, size_t why_size)
{
	struct lib_walk w = {.root_fd = root_fd, .what = what, .why = why, .why_size = why_size};
	struct lib_obj prog = {.fd = fd, .path = "", .depth = 0};
	struct stat st;
	int r;

	snprintf(prog.origin, sizeof(prog.origin), "%s", origin);
	if (fd >= 0) {
		if (fstat(fd, &st) < 0)
			return -errno;
		prog.size = st.st_size;
	}
	r = scan_obj(&w, &prog, buf, len);
	if (r == 0 && has_interp)
		r = check_preload(&w);
	/* Scanning a library may add names and directories: probe until nothing is new. */
	for (size_t done = 0; r == 0;) {
		r = probe_dirs(&w);
		if (r != 0 || done == w.n_objs)
			break;
		while (r == 0 && done < w.n_objs) {
			r = scan_obj(&w, w.objs[done], NULL, 0);
			done++;
		}
	}
	for (size_t i = 0; i < w.n_objs; i++) {
		safe_close(w.objs[i]->fd);
		free(w.objs[i]);
	}
	for (size_t i = 0; i < w.n_dirs; i++)
		free(w.dirs[i]);
	for (size_t i = 0; i < w.n_names; i++)
		free(w.names[i].name);
	return r;
}
