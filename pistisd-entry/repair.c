/* Before ensure-base: pistis' own state in the data directory, as a Kubernetes fsGroup walk
 * leaves it. With `securityContext.fsGroup: G` the kubelet walks the whole volume at every
 * pod start: every node's group becomes G, every file gains 0660 and every directory 0770
 * and setgid. /data/pistis (2770) then made `users ensure-base` refuse the registry and
 * entry exit 111 at every start, until someone fixed the volume by hand; /data/.secrets,
 * the agents' homes and mark.key were readable and writable by G meanwhile, an agent's
 * own gid or pi-sandbox when G was one of them. Entry runs before any agent command, so
 * what it finds loose was made so by root (only root chowns and chmods root's nodes)
 * while no agent ran: it takes back what pistis owns, one level down. */
#include "pistisd-entry/supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "sandbox-users/users.h"

#define REPAIR_ENTRIES_MAX 100000u /* per directory: a home per agent at most */

/* Root, pi-tools and the agents: each has a group of its own with its uid as gid. */
static bool pistis_owner(uid_t uid)
{
	return uid == 0 || uid == USERS_TOOLS_UID || users_uid_is_agent(uid);
}

/* What a walk leaves: the group changed, or group write, or setgid; never other write. */
static bool walked(const struct stat *st)
{
	return !(st->st_mode & 0002) && (st->st_gid != st->st_uid || (st->st_mode & 02020));
}

/* Gives the node behind fd its owner's group and at most MAX as its mode, through the fd,
 * where it looks walked. 1 when something changed, 0 when nothing had to (or it is not
 * ours to change), or -errno. Other-writable is not the walk's doing: anyone could have
 * planted something there, so it stays as it is for its reader to refuse (docs/users.md).
 * A non-directory with more than one link is left alone: its other names may be anywhere
 * (never change the owner or mode of a file one could have linked). */
static int repair_fd(int fd, mode_t max, struct stat *ret_st)
{
	struct stat st;
	mode_t mode;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (ret_st)
		*ret_st = st;
	if (!pistis_owner(st.st_uid) || (!S_ISDIR(st.st_mode) && st.st_nlink > 1) || !walked(&st))
		return 0;
	mode = st.st_mode & max; /* setuid, setgid and sticky go: MAX holds none */
	/* chown first: it clears setuid/setgid on a file, the chmod after it sets the mode */
	if (st.st_gid != st.st_uid && fchown(fd, (uid_t)-1, st.st_uid) < 0)
		return -errno;
	if (fchmod(fd, mode) < 0)
		return -errno;
	return 1;
}

/* Opens NAME in dfd, not following a link, only when it is a directory or (FILES) a
 * regular file: FIFOs and devices are never opened. -ENOENT for anything else. */
static int open_node(int dfd, const char *name, bool files)
{
	struct stat st;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	else if (files && S_ISREG(st.st_mode))
		fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	else
		return -ENOENT;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !(S_ISDIR(st.st_mode) || (files && S_ISREG(st.st_mode)))) {
		close(fd);
		return -ENOENT; /* swapped meanwhile */
	}
	return fd;
}

/* The entries of the directory behind dfd (DIR_PATH in messages), each failure logged and
 * passed over. Returns how many were changed, or -errno when it cannot be read. */
static int repair_entries(int dfd, const char *dir_path, const struct users_state_dir *sd)
{
	_cleanup_close_ int lfd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	DIR *d = lfd < 0 ? NULL : fdopendir(lfd);
	struct dirent *de;
	unsigned seen = 0;
	int changed = 0, r;

	if (!d)
		return log_warning_errno(-errno, "Failed to read '%s' to repair it: %m", dir_path);
	lfd = -1; /* the DIR has it */
	while ((de = readdir(d)) && seen++ < REPAIR_ENTRIES_MAX) {
		_cleanup_close_ int fd = -1, tfd = -1;
		struct stat st, tst;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		fd = open_node(dfd, de->d_name, sd->files);
		if (fd == -ENOENT)
			continue;
		r = fd < 0 ? fd : repair_fd(fd, sd->entry_max, &st);
		if (r < 0) {
			log_warning_errno(r, "Failed to repair '%s/%s': %m", dir_path, de->d_name);
			continue;
		}
		changed += r;
		if (!sd->homes || !S_ISDIR(st.st_mode) || !pistis_owner(st.st_uid))
			continue;
		tfd = open_node(fd, "tmp", false);
		if (tfd == -ENOENT)
			continue;
		/* Only the home's owner's own tmp: the home is the agent's to write, so in an
		 * earlier life it could have moved in a directory of root's that agents share
		 * (root:pi-sandbox 2770 on the same file system, which a walk looks like), and
		 * taking that "back" to root:root 0700 would close it to everyone. */
		if (tfd >= 0 && (fstat(tfd, &tst) < 0 || tst.st_uid != st.st_uid))
			continue;
		r = tfd < 0 ? tfd : repair_fd(tfd, sd->entry_max, NULL);
		if (r < 0)
			log_warning_errno(r, "Failed to repair '%s/%s/tmp': %m", dir_path,
					  de->d_name);
		else
			changed += r;
	}
	closedir(d);
	return changed;
}

int entry_repair_state(int data_fd, const char *data_dir)
{
	/* Each with the most its mode and its entries' modes may hold: bits are only taken
	 * away, never added, so a stricter mode an operator chose stays. */
	size_t n_dirs;
	const struct users_state_dir *dirs = users_state_dirs(&n_dirs);

	for (size_t i = 0; i < n_dirs; i++) {
		const struct users_state_dir *sd = &dirs[i];
		_cleanup_close_ int fd = open_node(data_fd, sd->name, false);
		char path[4096];
		struct stat st;
		int r, n;

		if (fd == -ENOENT)
			continue;
		snprintf(path, sizeof(path), "%s/%s", data_dir, sd->name);
		if (fd < 0) {
			log_warning_errno(fd, "Failed to open '%s' to repair it: %m", path);
			continue;
		}
		r = repair_fd(fd, sd->dir_max, &st);
		if (r < 0) {
			log_warning_errno(r, "Failed to repair '%s': %m", path);
			continue;
		}
		if (!pistis_owner(st.st_uid))
			continue; /* not ours: its readers refuse it and say so */
		n = repair_entries(fd, path, sd);
		if (n < 0)
			continue; /* each failure logged; its reader refuses what is loose */
		if (r > 0 || n > 0)
			log_notice("'%s' was %u:%u %04o; now %u:%u %04o, and %d entr%s in it "
				   "given back their owner's group and no more than %04o (a "
				   "Kubernetes fsGroup walk? docs/entry.md)",
				   path, (unsigned)st.st_uid, (unsigned)st.st_gid,
				   (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
				   (unsigned)st.st_uid, (unsigned)(st.st_mode & sd->dir_max), n,
				   n == 1 ? "y" : "ies", (unsigned)sd->entry_max);
	}
	return 0;
}
