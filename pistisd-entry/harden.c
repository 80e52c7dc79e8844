/* Mount hardening at start-up (docs/entry.md, "Mount hardening"): the trees agents can write
 * become nosuid,nodev, and /proc gets hidepid=invisible.
 *
 * Where trusted commands are configured, agents run without no_new_privs (sudo needs its
 * setuid bit), so a setuid file one agent plants in a shared tree would run as that agent
 * whenever another executes it; nosuid on those trees takes the bit's meaning away. nodev
 * does the same for device nodes. hidepid keeps agents from reading each other's command
 * lines and environments' neighbours in /proc. */
#include "pistisd-entry/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/macro.h"
#include "lib/mountinfo.h"
#include "trusted/trusted.h"

/* Mount points beneath one tree remounted at most (a limit on work, not a real bound). */
#define HARDEN_MAX_SUBMOUNTS 4096u
/* The inode number of the initial PID namespace (PROC_PID_INIT_INO in the kernel). */
#define HARDEN_PROC_PID_INIT_INO 0xEFFFFFFCU

/* The flags a bind remount must repeat: leaving one out clears it, and in a user namespace
 * clearing a locked one (ro, noexec, nosuid, nodev) fails with EPERM. Atime flags are left
 * out on purpose: a remount that names none keeps the mount's own. */
static unsigned long keep_flags(unsigned long f_flag)
{
	unsigned long m = 0;

	if (f_flag & ST_RDONLY)
		m |= MS_RDONLY;
	if (f_flag & ST_NOSUID)
		m |= MS_NOSUID;
	if (f_flag & ST_NODEV)
		m |= MS_NODEV;
	if (f_flag & ST_NOEXEC)
		m |= MS_NOEXEC;
	return m;
}

static bool is_mount_point(const char *path, bool *ret)
{
	_cleanup_free_ char *mi = NULL;
	int r = mountinfo_read(&mi);

	if (r < 0)
		return log_warning_errno(r, "Failed to read /proc/self/mountinfo: %m"), false;
	*ret = false;
	for (char *line = mi, *next; line && *line; line = next) {
		struct mountinfo_entry e;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (mountinfo_parse_line(line, &e) == 0 && !strcmp(e.mount_point, path)) {
			*ret = true;
			break;
		}
	}
	return true;
}

static int remount_one(const char *mp)
{
	struct statvfs sv;

	if (statvfs(mp, &sv) < 0)
		return log_warning_errno(-errno, "Failed to statvfs '%s': %m", mp);
	if ((sv.f_flag & (ST_NOSUID | ST_NODEV)) == (ST_NOSUID | ST_NODEV))
		return 0;
	if (mount(NULL, mp, NULL,
		  MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | keep_flags(sv.f_flag), NULL) < 0)
		return log_warning_errno(-errno, "Failed to remount '%s' nosuid,nodev: %m", mp);
	log_debug("remounted '%s' nosuid,nodev", mp);
	return 0;
}

/* Every mount at PATH or beneath it (a volume inside /workspaces is a tree agents write
 * too) becomes nosuid,nodev. Returns 0 or the first -errno (logged). */
static int remount_tree(const char *path)
{
	_cleanup_free_ char *mi = NULL;
	unsigned n = 0;
	int r, ret = 0;

	r = mountinfo_read(&mi);
	if (r < 0)
		return log_warning_errno(r, "Failed to read /proc/self/mountinfo: %m");
	for (char *line = mi, *next; line && *line; line = next) {
		struct mountinfo_entry e;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (mountinfo_parse_line(line, &e) < 0 ||
		    !mountinfo_path_under(e.mount_point, path))
			continue;
		if (++n > HARDEN_MAX_SUBMOUNTS) {
			log_warning("more than %u mounts beneath '%s'; the rest keep their flags",
				    HARDEN_MAX_SUBMOUNTS, path);
			return ret ?: -E2BIG;
		}
		r = remount_one(e.mount_point);
		if (r < 0 && ret == 0)
			ret = r;
	}
	return ret;
}

/* Returns 0 when PATH (and what is mounted beneath it) is nosuid,nodev or does not exist;
 * a logged -errno otherwise. */
static int harden_tree(const char *path)
{
	char real[PATH_MAX];
	struct statvfs sv;
	struct stat st;
	bool mp = false;
	int r;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT) {
			log_debug("'%s' does not exist: nothing to harden", path);
			return 0;
		}
		return log_warning_errno(-errno, "Failed to stat '%s': %m", path);
	}
	/* mount(2) follows symlinks; a tree we harden is named by the operator, never by
	 * where a link happens to point. */
	if (!S_ISDIR(st.st_mode))
		return log_warning_errno(S_ISLNK(st.st_mode) ? -ELOOP : -ENOTDIR,
					 "'%s' is not a directory (%s): not hardened", path,
					 S_ISLNK(st.st_mode) ? "a symlink" : "another file type");
	/* mountinfo names mount points canonically; compare like with like. */
	if (!realpath(path, real))
		return log_warning_errno(-errno, "Failed to resolve '%s': %m", path);
	if (!is_mount_point(real, &mp))
		return -EIO;
	if (!mp) {
		/* A plain directory of the root filesystem: give it a mount of its own to set
		 * flags on. MS_REC takes along what is mounted beneath it. */
		if (mount(real, real, NULL, MS_BIND | MS_REC, NULL) < 0)
			return log_warning_errno(-errno,
						 "Failed to bind-mount '%s' onto itself: %m", real);
		log_debug("bind-mounted '%s' onto itself", real);
	}
	r = remount_tree(real);
	if (r < 0)
		return r;
	/* Believe the kernel, not our bookkeeping. */
	if (statvfs(real, &sv) < 0)
		return log_warning_errno(-errno, "Failed to statvfs '%s': %m", real);
	if ((sv.f_flag & (ST_NOSUID | ST_NODEV)) != (ST_NOSUID | ST_NODEV))
		return log_warning_errno(-EIO, "'%s' is still not nosuid,nodev after remounting",
					 real);
	log_info("'%s' is mounted nosuid,nodev", path);
	return 0;
}

/* Whether a mount of our namespace is shared ("shared:N" among mountinfo's optional fields,
 * before the " - "): a mount made beneath it propagates to its peers, which may be in other
 * namespaces (the host's: systemd makes / shared). Cannot tell: true. */
static bool any_mount_shared(void)
{
	_cleanup_free_ char *mi = NULL;

	if (mountinfo_read(&mi) < 0)
		return true;
	for (char *line = mi, *next; line && *line; line = next) {
		char *dash;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		dash = strstr(line, " - ");
		if (dash)
			*dash = '\0';
		if (strstr(line, " shared:"))
			return true;
	}
	return false;
}

/* In the host's PID namespace (a plain machine; a --pid=host container) entry may run in the
 * host's own mount namespace, or in one whose mounts are peers of the host's: there its bind
 * mounts and remounts were the host's, and stayed after it ended (red team: /tmp, /dev/shm
 * remounted nosuid for the whole machine; /data, /workspaces, /var/tmp bind-mounted onto
 * themselves in the host's namespace). So there entry first makes a mount namespace of its
 * own, every mount a slave (the host's later mounts still come in, none of entry's goes
 * out); the child and the agents live in it. In a PID namespace of its own (a container),
 * and where no mount is shared and the namespace is not PID 1's, nothing changes. 0, or a
 * logged -errno: then nothing may be hardened. */
static int own_mount_ns(void)
{
	struct stat pid_ns, self_mnt, init_mnt;
	bool hosts;

	if (stat("/proc/self/ns/pid", &pid_ns) < 0 || pid_ns.st_ino != HARDEN_PROC_PID_INIT_INO)
		return 0; /* no /proc (harden_proc says so), or a PID namespace of our own */
	/* PID 1's namespace is the host's. One we cannot compare with (a --pid=host container
	 * without CAP_SYS_PTRACE) is decided by shared mounts alone: a container's are not,
	 * and its own namespace is where `docker exec` runs `pistisd run` too, so hardening
	 * it there keeps that path's trees nosuid. */
	hosts = getpid() != 1 && stat("/proc/self/ns/mnt", &self_mnt) == 0 &&
		stat("/proc/1/ns/mnt", &init_mnt) == 0 && self_mnt.st_dev == init_mnt.st_dev &&
		self_mnt.st_ino == init_mnt.st_ino;
	if (!hosts && !any_mount_shared())
		return 0;
	if (unshare(CLONE_NEWNS) < 0)
		return log_warning_errno(-errno,
					 "Failed to make a mount namespace of entry's own: %m; "
					 "the host's mounts are not entry's to change");
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return log_warning_errno(-errno,
					 "Failed to make entry's mounts slaves of the host's: %m; "
					 "the host's mounts are not entry's to change");
	log_notice("running in the host's PID namespace, in %s: hardening in a mount "
		   "namespace of entry's own (the child's and the agents'); the host's mounts stay "
		   "as they are",
		   hosts ? "the host's mount namespace" : "a mount namespace sharing mounts");
	return 0;
}

/* hidepid=invisible on /proc, only on a proc instance that is this container's own: in a
 * PID namespace other than the host's, and showing us as the PID we are. The options of
 * proc belong to its instance (superblock), so remounting the host's /proc would change
 * what the whole host sees. */
static int harden_proc(void)
{
	char self[32], want[32];
	struct statvfs sv;
	struct stat st;
	ssize_t n;

	if (stat("/proc/self/ns/pid", &st) < 0)
		return log_warning_errno(-errno, "/proc is not mounted (or has no "
						 "/proc/self/ns/pid): not setting hidepid: %m");
	if (st.st_ino == HARDEN_PROC_PID_INIT_INO) {
		log_notice("running in the host's PID namespace: leaving /proc alone (hidepid "
			   "there would apply to the whole host)");
		return -EPERM;
	}
	n = readlink("/proc/self", self, sizeof(self) - 1);
	if (n < 0)
		return log_warning_errno(-errno, "Failed to read /proc/self: %m");
	self[n] = '\0';
	snprintf(want, sizeof(want), "%d", (int)getpid());
	if (strcmp(self, want)) {
		log_notice("/proc belongs to another PID namespace (/proc/self is %s, we are "
			   "%s): leaving it alone",
			   self, want);
		return -EPERM;
	}
	if (statvfs("/proc", &sv) < 0)
		return log_warning_errno(-errno, "Failed to statvfs /proc: %m");
	/* A superblock remount sets the mount's flags too: repeat them. "2" and not
	 * "invisible": older kernels (< 5.8) know only the number; it means the same. */
	if (mount("proc", "/proc", NULL, MS_REMOUNT | keep_flags(sv.f_flag), "hidepid=2") < 0)
		return log_warning_errno(-errno, "Failed to remount /proc with hidepid=invisible: "
						 "%m; agents can see each other's processes");
	log_info("/proc remounted with hidepid=invisible");
	return 0;
}

/* The first tree of trusted.h's TRUSTED_SHARED_TREES (the data directory as configured) that
 * exists and is not mounted nosuid, looked at as `pistisd serve`'s start-up check looks
 * (statvfs, links followed), or NULL when every one that exists is. */
const char *entry_shared_tree_not_nosuid(const char *data_dir)
{
	static const char *trees[] = {NULL, TRUSTED_WORKSPACE_TREES, TRUSTED_SCRATCH_TREES};
	struct statvfs sv;

	trees[0] = data_dir;
	for (size_t i = 0; i < ELEMENTSOF(trees); i++) {
		if (statvfs(trees[i], &sv) < 0) {
			if (errno == ENOENT)
				continue;
			return trees[i]; /* cannot tell: serve counts it as not nosuid */
		}
		if (!(sv.f_flag & ST_NOSUID))
			return trees[i];
	}
	return NULL;
}

/* Without the sticky bit any agent removes, renames or replaces another's files in a
 * directory they all write, and the kernel's protected_symlinks, _regular and _fifos, which
 * apply to sticky directories only, hold nothing there (red team: an image made with
 * `chmod 777 /tmp`). Adding the bit only takes away: the permission bits stay as they are,
 * setuid and setgid go (a setgid directory hands its group to every file made in it). Done
 * through the fd, before any agent runs. One owned by anyone but root is left for pistisd
 * check's sticky_shared to refuse: its owner removes anyone's files, sticky or not. */
void entry_sticky_scratch(void)
{
	static const char *const trees[] = {TRUSTED_SCRATCH_TREES};

	for (size_t i = 0; i < ELEMENTSOF(trees); i++) {
		_cleanup_close_ int fd =
			open(trees[i], O_RDONLY | O_DIRECTORY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		struct stat st;

		if (fd < 0) {
			if (errno != ENOENT)
				log_warning_errno(-errno,
						  "Failed to open '%s' to check its sticky "
						  "bit: %m",
						  trees[i]);
			continue;
		}
		if (fstat(fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & S_ISVTX))
			continue;
		if (!trusted_others_write(st.st_mode, st.st_gid))
			continue;
		mode_t mode = S_ISVTX | (st.st_mode & 0777);
		if (fchmod(fd, mode) < 0)
			log_warning_errno(
				-errno,
				"'%s' is writable by others without the sticky bit, and "
				"adding it failed: %m; pistisd serve refuses to start on it "
				"(sticky_shared): chmod 1777 it in the image",
				trees[i]);
		else
			log_notice(
				"'%s' was mode %04o, writable by others without the sticky bit: "
				"made %04o, so that no agent removes or replaces another's files "
				"there",
				trees[i], (unsigned)(st.st_mode & 07777), (unsigned)mode);
	}
}

/* The separators of PISTIS_ALLOW's names, as serve reads them (check_allow_parse). */
#define ALLOW_SEPARATORS ", \t\n"

/* Whether PISTIS_ALLOW (serve's opt-outs) names check NAME. Split exactly as serve splits it:
 * with commas only, "protected_symlinks, nosuid_shared" (which serve accepts) did not name
 * nosuid_shared here, and entry refused a start that serve would have made. */
bool entry_serve_allows(const char *name)
{
	const char *p = getenv("PISTIS_ALLOW");
	size_t n = strlen(name);

	while (p && *(p += strspn(p, ALLOW_SEPARATORS))) {
		size_t len = strcspn(p, ALLOW_SEPARATORS);

		if (len == n && !strncmp(p, name, n))
			return true;
		p += len;
	}
	return false;
}

static bool is_workspace(const char *path)
{
	static const char *const workspaces[] = {TRUSTED_WORKSPACE_TREES};

	for (size_t i = 0; i < ELEMENTSOF(workspaces); i++)
		if (!strcmp(path, workspaces[i]))
			return true;
	return false;
}

int entry_harden_mounts(const char *data_dir)
{
	/* trusted.h's TRUSTED_SHARED_TREES (with the data directory as configured): agents
	 * get setuid (trusted commands) only while each that exists is nosuid. */
	const char *const trees[] = {data_dir, TRUSTED_WORKSPACE_TREES, TRUSTED_SCRATCH_TREES};
	struct stat st;
	bool trusted;

	/* With trusted commands agents run without no_new_privs: a setuid file in a tree they
	 * share is then a way from one agent to another, and entry refuses to start. A
	 * sudoers file that cannot be ruled out counts as there. */
	trusted = lstat(ENTRY_TRUSTED_SUDOERS, &st) == 0 || errno != ENOENT;
	int ns = own_mount_ns();
	for (size_t i = 0; i < ELEMENTSOF(trees); i++) {
		int r = ns < 0 ? ns : harden_tree(trees[i]);

		if (r >= 0)
			continue;
		if (trusted && (i == 0 || is_workspace(trees[i]))) {
			log_error(
				"Refusing to start: trusted commands are configured (%s), so "
				"agents run without no_new_privs, and '%s' could not be made "
				"nosuid,nodev. Mount it nosuid,nodev, give entry CAP_SYS_ADMIN, or "
				"opt out with --no-harden-mounts",
				ENTRY_TRUSTED_SUDOERS, trees[i]);
			return -EPERM;
		}
		log_warning("'%s' stays without nosuid,nodev", trees[i]);
	}
	/* The rest only warn above, but with trusted commands configured pistisd serve refuses
	 * to start on any of them without nosuid (nosuid_shared is hard then, as nosuid_data
	 * and nosuid_workspaces are): it was started, refused and restarted until entry gave
	 * up, minutes later (red team: a /var/tmp linked to a directory on the root file
	 * system). Said now, once, unless serve was told to accept it by name. */
	const char *suid = trusted ? entry_shared_tree_not_nosuid(data_dir) : NULL;
	const char *check = !suid		      ? NULL
			    : !strcmp(suid, data_dir) ? "nosuid_data"
			    : is_workspace(suid)      ? "nosuid_workspaces"
						      : "nosuid_shared";
	if (check && !entry_serve_allows(check)) {
		log_error(
			"Refusing to start: trusted commands are configured (%s), and '%s' is not "
			"mounted nosuid, so pistisd serve would refuse to start too (its hard "
			"check %s). Mount it nosuid,nodev, or allow %s by name "
			"(PISTIS_ALLOW=%s: serve then starts with trusted commands off)",
			ENTRY_TRUSTED_SUDOERS, suid, check, check, check);
		return -EPERM;
	}
	if (ns >= 0)
		(void)harden_proc();
	return 0;
}
