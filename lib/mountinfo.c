#include "lib/mountinfo.h"

#include <errno.h>
#include <fcntl.h>
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
