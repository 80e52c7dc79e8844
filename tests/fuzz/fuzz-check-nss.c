/* libFuzzer: `pistisd check`'s readers of the image's account files (pistisd/check.c, the
 * real code, compiled into this target): nsswitch.conf as glibc reads it (nss_line), the
 * '+' lines of compat, and /etc/subuid and /etc/subgid ranges. The image is the operator's,
 * but what it holds decides whether an agent may share a uid with a directory service's
 * user, and these files come from base images nobody here wrote.
 *
 * Input: nsswitch.conf, NUL, subuid, NUL, passwd, written into a private root's etc/.
 * Invariants:
 *  - nss_sources says ok or warn (never fail: these are warnings), within its buffer;
 *  - subid_in_range finds a range exactly when a line of the file, read as it reads it
 *    (owner:start:count, strtoull), meets 10100-59999 in whole numbers (no wrap). */
#include "pistisd/check.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/pistis-fuzz-check.XXXXXX", root[64];
static int root_fd = -1;

static void cleanup(void)
{
	static const char *const files[] = {"etc/nsswitch.conf", "etc/subuid", "etc/passwd"};

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		(void)unlinkat(root_fd, files[i], 0);
	(void)unlinkat(root_fd, "etc", AT_REMOVEDIR);
	(void)rmdir(dir);
}

static void setup(void)
{
	char etc[80];

	if (root_fd >= 0)
		return;
	if (!mkdtemp(dir))
		abort();
	snprintf(root, sizeof(root), "%s", dir);
	snprintf(etc, sizeof(etc), "%s/etc", dir);
	if (mkdir(etc, 0755) < 0)
		abort();
	root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		abort();
	atexit(cleanup);
	log_set_level(LOG_LVL_ERROR);
}

static void put(const char *name, const uint8_t *p, size_t n)
{
	int fd = openat(root_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n) || close(fd) < 0)
		abort();
}

/* The same lines read the same way, the overlap in 128-bit arithmetic. */
static bool subid_oracle(const uint8_t *p, size_t n)
{
	char *text = strndup((const char *)p, n), *next;
	bool found = false;

	if (!text)
		abort();
	for (char *line = text; line && *line && !found; line = next) {
		unsigned long long start, count;
		char *colon, *end;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		colon = strchr(line, ':');
		if (line[0] == '#' || !colon)
			continue;
		errno = 0;
		start = strtoull(colon + 1, &end, 10);
		if (errno || *end != ':')
			continue;
		count = strtoull(end + 1, &end, 10);
		if (errno || !count)
			continue;
		found = (unsigned __int128)start <= USERS_AGENT_UID_MAX &&
			(unsigned __int128)start + count > USERS_AGENT_UID_MIN;
	}
	free(text);
	return found;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t none[1];
	const uint8_t *part[3] = {data, none, none}, *stop = data + size;
	size_t len[3] = {size, 0, 0};
	struct check_report r;
	char found[160] = "";
	const char *v;

	setup();
	for (int i = 1; i < 3; i++) {
		const uint8_t *nul = memchr(part[i - 1], '\0', len[i - 1]);
		if (!nul)
			break;
		len[i - 1] = (size_t)(nul - part[i - 1]);
		part[i] = nul + 1;
		len[i] = (size_t)(stop - part[i]);
	}
	put("etc/nsswitch.conf", part[0], len[0]);
	put("etc/subuid", part[1], len[1]);
	put("etc/passwd", part[2], len[2]);

	memset(&r, 0, sizeof(r));
	probe_nss_sources(&r, root_fd);
	v = r.results[CHECK_NSS_SOURCES].value;
	if (!memchr(v, '\0', sizeof(r.results[0].value)) || !v[0] ||
	    r.results[CHECK_NSS_SOURCES].status == CHECK_STATUS_FAIL)
		abort();

	if (subid_in_range(root_fd, "etc/subuid", found, sizeof(found)) !=
	    subid_oracle(part[1], len[1]))
		abort();
	return 0;
}
