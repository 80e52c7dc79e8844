#include "lib/mountinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/macro.h"

/* The kernel escapes space, tab, newline and backslash as \ooo (mangle()). */
static void unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else
			*w++ = *s;
	}
	*w = '\0';
}

static int parse_uint(const char *s, unsigned *ret)
{
	unsigned long v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*s - '0');
		if (v > 0xffffffffUL)
			return -ERANGE;
	}
	*ret = (unsigned)v;
	return 0;
}

int mountinfo_parse_line(char *line, struct mountinfo_entry *ret)
{
	char *f[10], *p = line;
	unsigned n = 0;
	bool dash = false;

	/* Fields are separated by single spaces; escaped fields hold none. */
	while (p && n < ELEMENTSOF(f)) {
		char *sp = strchr(p, ' ');

		if (sp)
			*sp++ = '\0';
		if (n >= 6 && !dash) {
			/* Optional fields ("shared:1", "master:2"…) until the lone "-". */
			if (!strcmp(p, "-"))
				dash = true;
			p = sp;
			continue;
		}
		f[n++] = p;
		p = sp;
		if (dash && n == 9)
			break;
	}
	if (!dash || n != 9)
		return -EINVAL;
	/* Super options are the rest of the line (they hold no unescaped space either). */
	if (p)
		return -EINVAL;
	if (parse_uint(f[0], &ret->id) < 0 || parse_uint(f[1], &ret->parent) < 0)
		return -EINVAL;
	if (f[3][0] != '/' || f[4][0] != '/')
		return -EINVAL;
	unescape(f[3]);
	unescape(f[4]);
	unescape(f[7]);
	ret->root = f[3];
	ret->mount_point = f[4];
	ret->mount_opts = f[5];
	ret->fstype = f[6];
	ret->source = f[7];
	ret->super_opts = f[8];
	return 0;
}

bool mountinfo_opt(const char *opts, const char *name, const char **ret_value, size_t *ret_len)
{
	size_t n = strlen(name);

	for (const char *p = opts; p && *p;) {
		size_t len = strcspn(p, ",");

		if (len >= n && !strncmp(p, name, n) && (len == n || p[n] == '=')) {
			if (ret_value)
				*ret_value = len == n ? p + len : p + n + 1;
			if (ret_len)
				*ret_len = len == n ? 0 : len - n - 1;
			return true;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return false;
}

bool mountinfo_path_under(const char *path, const char *mount_point)
{
	size_t n = strlen(mount_point);

	if (!strcmp(mount_point, "/"))
		return path[0] == '/';
	return !strncmp(path, mount_point, n) && (path[n] == '\0' || path[n] == '/');
}

int mountinfo_read(char **ret)
{
	_cleanup_close_ int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return -errno;
	return fd_read_all(fd, MOUNTINFO_MAX_BYTES, ret, NULL);
}

int mountinfo_read_at(int proc_fd, const char *name, char **ret)
{
	_cleanup_close_ int fd = openat(proc_fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return -errno;
	return fd_read_all(fd, MOUNTINFO_MAX_BYTES, ret, NULL);
}

/* The id at the start of each line, in order; false at the end. */
static bool next_id(const char **p, unsigned *ret)
{
	const char *s = *p;

	while (*s) {
		unsigned long v = 0;
		const char *start = s;

		while (*s >= '0' && *s <= '9' && v <= 0xffffffffUL)
			v = v * 10 + (unsigned long)(*s++ - '0');
		bool ok = s > start && *s == ' ' && v <= 0xffffffffUL;
		s = strchr(s, '\n');
		s = s ? s + 1 : start + strlen(start);
		if (ok) {
			*p = s;
			*ret = (unsigned)v;
			return true;
		}
	}
	*p = s;
	return false;
}

static int cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? -1 : x > y;
}

int mountinfo_ids(const char *text, unsigned **ret, size_t *ret_n)
{
	_cleanup_free_ unsigned *v = NULL;
	size_t n = 0, cap = 0;
	const char *p = text;
	unsigned id;

	while (next_id(&p, &id)) {
		if (n == cap) {
			unsigned *nv = reallocarray(v, cap ? cap * 2 : 64, sizeof(*v));

			if (!nv)
				return -ENOMEM;
			v = nv;
			cap = cap ? cap * 2 : 64;
		}
		v[n++] = id;
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_unsigned);
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

bool mountinfo_ids_disjoint(const char *text, const unsigned *ours, size_t n_ours)
{
	const char *p = text;
	bool any = false;
	unsigned id;

	while (next_id(&p, &id)) {
		if (n_ours && bsearch(&id, ours, n_ours, sizeof(id), cmp_unsigned))
			return false;
		any = true;
	}
	return any;
}

bool mountinfo_pid_elsewhere(int proc_fd, struct mountinfo_ours *ours, pid_t pid)
{
	_cleanup_free_ char *text = NULL, *theirs = NULL;
	char name[32];

	if (!ours->read) {
		ours->read = true;
		if (mountinfo_read_at(proc_fd, "self/mountinfo", &text) < 0 ||
		    mountinfo_ids(text, &ours->ids, &ours->n) < 0)
			ours->n = 0;
	}
	if (!ours->n)
		return false; /* cannot tell */
	snprintf(name, sizeof(name), "%d/mountinfo", (int)pid);
	return mountinfo_read_at(proc_fd, name, &theirs) == 0 &&
	       mountinfo_ids_disjoint(theirs, ours->ids, ours->n);
}

void mountinfo_ours_done(struct mountinfo_ours *ours)
{
	free(ours->ids);
	*ours = (struct mountinfo_ours){0};
}
