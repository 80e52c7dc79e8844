/* trusted: installing the sudoers drop-in. Written under a name sudo ignores, checked by
 * the root's own visudo, renamed into place, then confirmed with the root's own sudo -l. */
#include "trusted/trusted.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "sandbox-users/fs.h"
#include "sandbox-users/users.h"
#include "trusted/internal.h"

#define AGENTS_CHECKED_MAX 64

/* msg, then what the error e is, on stderr, with write(2) only (strerror and stdio are not
 * async-signal-safe in every libc): for a forked child of a process with threads. */
static void child_say(const char *msg, int e)
{
	char num[24], *p = num + sizeof(num);
	const char *name;

	switch (e) {
	case ENOENT:
		name = "No such file or directory (ENOENT)";
		break;
	case EACCES:
		name = "Permission denied (EACCES)";
		break;
	case EPERM:
		name = "Operation not permitted (EPERM)";
		break;
	case ENOEXEC:
		name = "Exec format error (ENOEXEC)";
		break;
	case ENOTDIR:
		name = "Not a directory (ENOTDIR)";
		break;
	default:
		*--p = '\0';
		do
			*--p = (char)('0' + e % 10);
		while ((e /= 10) > 0 && p > num + 7);
		memcpy(p -= 6, "errno ", 6);
		name = p;
	}
	(void)!write(2, msg, strlen(msg));
	(void)!write(2, name, strlen(name));
	(void)!write(2, "\n", 1);
}

int trusted_run_in_root(const char *root, char *const argv[], char **ret_output)
{
	/* visudo and sudo read their configuration, NSS and locale from the environment and
	 * the filesystem they run in: give them nothing of ours, and the root's own files. */
	static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C",
				     "COLUMNS=4096", NULL};
	_cleanup_free_ char *out = NULL;
	_cleanup_close_ int rd = -1;
	size_t len = 0;
	int p[2], status = 0;
	pid_t pid;

	if (!argv || !argv[0] || argv[0][0] != '/')
		return -EINVAL;
	out = malloc(TRUSTED_OUTPUT_MAX + 1);
	if (!out)
		return -ENOMEM;
	/* The child's messages are made here: after fork in a process with threads (pistisd
	 * serve) only async-signal-safe calls, so the child only write()s them. */
	char no_chroot[PATH_MAX + 32], no_exec[2 * PATH_MAX + 32];
	snprintf(no_chroot, sizeof(no_chroot), "chroot into '%s' failed: ", root);
	snprintf(no_exec, sizeof(no_exec), "cannot run '%s' in '%s': ", argv[0], root);
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		safe_close(p[0]);
		safe_close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		sigset_t none;
		int null;

		sigemptyset(&none);
		(void)sigprocmask(SIG_SETMASK, &none, NULL);
		if (dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0)
			_exit(EXIT_FAILURE);
		if (strcmp(root, "/") && chroot(root) < 0) {
			child_say(no_chroot, errno);
			_exit(111);
		}
		if (chdir("/") < 0)
			_exit(111);
		null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (null >= 0 && null != 0)
			(void)dup2(null, 0);
		else if (null < 0)
			close(0);
		(void)close_all_fds_from(3);
		execve(argv[0], argv, envp);
		child_say(no_exec, errno);
		_exit(127);
	}
	safe_close(p[1]);
	rd = p[0];
	for (;;) {
		char sink[4096];
		ssize_t n;

		/* Past the limit, keep draining so the child never blocks on a full pipe. */
		n = len < TRUSTED_OUTPUT_MAX ? read(rd, out + len, TRUSTED_OUTPUT_MAX - len)
					     : read(rd, sink, sizeof(sink));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (len < TRUSTED_OUTPUT_MAX)
			len += (size_t)n;
	}
	out[len] = '\0';
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (ret_output)
		*ret_output = TAKE_PTR(out);
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* The members of pi-sandbox, from the root's /etc/group (parsed, never through NSS). */
static int sandbox_members(int root_fd, char ***ret, size_t *ret_n)
{
	_cleanup_close_ int etc_fd = -1;
	_cleanup_free_ char *text = NULL;
	char **v = NULL;
	size_t len = 0, n = 0;
	char *line, *save = NULL;
	int r;

	r = trusted_open_dir(root_fd, "etc", false, 0755, 0, 0, false, &etc_fd);
	if (r < 0)
		return r;
	r = trusted_read_file(etc_fd, "group", 4 * 1024 * 1024, &text, &len);
	if (r < 0)
		return r;
	v = calloc(AGENTS_CHECKED_MAX + 1, sizeof(char *));
	if (!v)
		return -ENOMEM;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f = line, *m, *msave = NULL;
		int i;

		if (strncmp(line, USERS_SANDBOX_GROUP ":", strlen(USERS_SANDBOX_GROUP ":")))
			continue;
		for (i = 0; i < 3 && f; i++) {
			f = strchr(f, ':');
			if (f)
				f++;
		}
		if (!f)
			break;
		for (m = strtok_r(f, ",", &msave); m && n < AGENTS_CHECKED_MAX;
		     m = strtok_r(NULL, ",", &msave)) {
			/* Only names sudo -U can take as they are. */
			if (!*m || strlen(m) > USERS_NAME_MAX || m[0] == '-' || m[0] == '#' ||
			    strpbrk(m, " \t\r:\\"))
				continue;
			v[n] = strdup(m);
			if (!v[n])
				break;
			n++;
		}
		break;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* A program's output without the newlines and blanks it ends with. */
static int trimmed_len(const char *text)
{
	size_t l = text ? strlen(text) : 0;

	while (l > 0 && (text[l - 1] == '\n' || text[l - 1] == ' '))
		l--;
	return l > INT_MAX ? INT_MAX : (int)l;
}

/* The message: prefix (text, names in it escaped), then visudo's or sudo's output as it
 * came, each byte escaped once: one line, whatever names in sudoers it quotes. */
static void set_message(struct trusted_install_report *rep, const char *prefix, const char *text)
{
	escape_format(rep->message, sizeof(rep->message), "%-s%.*s", prefix, trimmed_len(text),
		      text ? text : "");
}

/* visudo -c over the whole configuration the root's sudo reads. */
static int check_all(const char *root, const char *visudo, char **ret_out)
{
	char *argv[] = {(char *)visudo, "-c", NULL};

	return trusted_run_in_root(root, argv, ret_out);
}

/* sudo -l showed an agent more than the trusted commands: the drop-in goes, whichever is
 * in place (any drop-in turns no_new_privs off, which makes such a rule live). */
static int withdraw(int dir_fd, struct trusted_install_report *rep)
{
	if (unlinkat(dir_fd, TRUSTED_DROPIN_NAME, 0) < 0 && errno != ENOENT)
		return -errno;
	(void)fsync(dir_fd);
	rep->replaced = false;
	rep->withdrawn = true;
	return 0;
}

int trusted_install(const char *root, const char *agent, struct trusted_install_report *rep)
{
	char sudo[256], visudo[256], tmp[NAME_MAX + 1], tmp_path[NAME_MAX + 32];
	_cleanup_close_ int root_fd = -1, etc_fd = -1, dir_fd = -1;
	_cleanup_free_ struct trusted_entry *entries = NULL;
	_cleanup_free_ char *text = NULL, *out = NULL, *main_cf = NULL, *old = NULL;
	size_t n = 0, i, main_len = 0, old_len = 0;
	bool had_old;
	int r;

	memset(rep, 0, sizeof(*rep));
	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	if (trusted_find_sudo(root, sudo, sizeof(sudo), visudo, sizeof(visudo)) < 0)
		return -ENOPKG;
	r = trusted_list(root, &entries, &n, NULL);
	if (r < 0)
		return r;
	rep->n = n;
	for (i = 0; i < n; i++)
		if (entries[i].uid != 0 || entries[i].mode != 0755) {
			escape_format(
				rep->message, sizeof(rep->message),
				"/data/trusted/%s is not root-owned 0755 (owner %u, mode %04o): "
				"re-add it with 'pistisd trusted add'",
				entries[i].name, (unsigned)entries[i].uid,
				(unsigned)entries[i].mode);
			return 1;
		}
	/* The digest pins each script, not its interpreter: that must be root's alone too. */
	r = trusted_scripts_interp_check(root, entries, n, rep->message, sizeof(rep->message));
	if (r != 0)
		return r;
	/* ... nor the programs the scripts run by name, from secure_path. */
	if (n > 0) {
		r = trusted_secure_path_check(root, rep->message, sizeof(rep->message));
		if (r != 0)
			return r;
	}
	/* Wrappers of an older form (the /bin/sh one) or another pistisd path: rewritten. */
	r = trusted_wrappers_refresh(root);
	if (r < 0)
		return r;
	r = trusted_dropin_render(entries, n, &text);
	if (r < 0)
		return r;

	r = trusted_open_dir(root_fd, "etc", false, 0755, 0, 0, false, &etc_fd);
	if (r < 0)
		return r;
	r = trusted_read_file(etc_fd, "sudoers", 4 * 1024 * 1024, &main_cf, &main_len);
	if (r < 0 && r != -ENOENT)
		return r;
	rep->includedir = r >= 0 && trusted_sudoers_has_includedir(main_cf, main_len);
	r = trusted_open_dir(root_fd, TRUSTED_SUDOERS_DIR, true, 0755, 0, 0, false, &dir_fd);
	if (r < 0)
		return r;

	r = trusted_read_file(dir_fd, TRUSTED_DROPIN_NAME, 4 * 1024 * 1024, &old, &old_len);
	if (r < 0 && r != -ENOENT)
		return r;
	had_old = r >= 0;

	if (n == 0) {
		if (had_old && unlinkat(dir_fd, TRUSTED_DROPIN_NAME, 0) < 0)
			return -errno;
		rep->removed = true;
		return 0;
	}

	/* 1. Under a name with a '.', which sudo's includedir skips: never live unchecked. */
	r = trusted_write_file(dir_fd, TRUSTED_DROPIN_NAME, text, strlen(text), 0440, true, tmp,
			       sizeof(tmp));
	if (r < 0)
		return r;
	snprintf(tmp_path, sizeof(tmp_path), "/etc/sudoers.d/%s", tmp);

	/* 2. The root's visudo checks the very file that will be renamed. */
	{
		char *argv[] = {visudo, "-cf", tmp_path, NULL};

		r = trusted_run_in_root(root, argv, &out);
	}
	if (r != 0) {
		(void)unlinkat(dir_fd, tmp, 0);
		if (r < 0)
			return r;
		set_message(rep, "visudo -cf rejected the generated drop-in: ", out);
		return 1;
	}
	free(out);
	out = NULL;

	/* 3. Into place, atomically. */
	if (renameat(dir_fd, tmp, dir_fd, TRUSTED_DROPIN_NAME) < 0) {
		r = -errno;
		(void)unlinkat(dir_fd, tmp, 0);
		return r;
	}
	rep->replaced = true;
	(void)fsync(dir_fd);

	/* 4. The whole configuration must still parse; if not, put back what was there. */
	r = check_all(root, visudo, &out);
	if (r != 0) {
		int k;

		if (had_old)
			k = trusted_write_file(dir_fd, TRUSTED_DROPIN_NAME, old, old_len, 0440,
					       false, NULL, 0);
		else
			k = unlinkat(dir_fd, TRUSTED_DROPIN_NAME, 0) < 0 ? -errno : 0;
		rep->replaced = k < 0;
		if (r < 0)
			return r;
		if (k < 0)
			return k;
		set_message(
			rep,
			"visudo -c failed with the drop-in in place; restored the previous one: ",
			out);
		return 1;
	}
	free(out);
	out = NULL;

	if (!rep->includedir) {
		set_message(rep,
			    "/etc/sudoers does not include /etc/sudoers.d, so sudo ignores the "
			    "drop-in: "
			    "add the line '@includedir /etc/sudoers.d' to /etc/sudoers",
			    NULL);
		return 1;
	}

	/* 5. Ask the root's sudo what each agent may now run. More than the trusted commands
	 * (a rule of the machine's for %pi-sandbox, ALL, an agent by name; a Defaults that
	 * reaches them) and the drop-in goes, the previous one too: with any drop-in in place
	 * agents run without no_new_privs (trusted_configured), which makes that rule live. An
	 * install that failed here used to leave it, and an image's or a plain machine's
	 * "%pi-sandbox ALL=(ALL) NOPASSWD: ALL" ran `sudo -n id` as uid 0 for every agent. */
	r = trusted_verify_agents(root, agent, rep);
	if (r == 1) {
		int k = withdraw(dir_fd, rep);
		if (k < 0)
			return k;
	}
	return r;
}

int trusted_confirm_new_agent(const char *root, const char *agent)
{
	struct trusted_install_report rep = {0};
	_cleanup_close_ int root_fd = -1, dir_fd = -1, lock_fd = -1;
	char abs[PATH_MAX];
	int r, k;

	/* Opened as pistisd run and serve open it to decide no_new_privs (trusted_configured):
	 * what they would find configured is what is confirmed. */
	root = root ? root : "/";
	root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0 || !trusted_configured(root_fd))
		return 0;
	/* One add, remove or install at a time (trusted_lock): one renaming its drop-in into
	 * place beside this would undo the withdrawal. Waited for a bounded while (serve asks
	 * from its loop); not had, the check goes on all the same: it can only take away. */
	(void)trusted_lock(root_fd, 15 * 1000u, &lock_fd);
	if (root[0] != '/' && realpath(root, abs)) /* --root DIR relative: trusted's are not */
		root = abs;
	r = trusted_verify_agents(root, agent, &rep);
	if (r == 0 || r == -ENOPKG) /* no sudo: nothing it could grant */
		return 0;
	/* More than the trusted commands, or sudo -l could not tell: fail closed. */
	k = trusted_open_dir(root_fd, TRUSTED_SUDOERS_DIR, false, 0755, 0, 0, false, &dir_fd);
	if (k >= 0)
		k = withdraw(dir_fd, &rep);
	if (r < 0)
		escape_format(rep.message, sizeof(rep.message),
			      "sudo -l -U %s could not be run (%s)", agent, strerror(-r));
	if (k < 0) {
		log_error("%-s; and the sudoers drop-in could not be removed (%s): agents run "
			  "without no_new_privs with that rule live; remove "
			  "/etc/sudoers.d/" TRUSTED_DROPIN_NAME " by hand",
			  rep.message, strerror(-k));
		return k;
	}
	log_error("%-s; sudoers drop-in removed: with it agents would run without no_new_privs, "
		  "and sudo may grant them more than the trusted commands; trusted commands are "
		  "off until that is put right and 'pistisd trusted install' succeeds",
		  rep.message);
	return 1;
}

/* A read lock on the root's /etc/.pwd.lock, the lock `pistisd users` (and lckpwdf) take to
 * write /etc: while it is held, no agent is made or removed, so one sudo -l and the look
 * at pi-sandbox after it see the same /etc. ufs_lock's read side, with its checks (a
 * FIFO, device, socket, link or another owner's file is refused unopened), polled for up
 * to 15 s (lckpwdf's timeout); negative when it cannot be had (then the look after a
 * failed sudo -l still tells a removed agent from a real mismatch, without that
 * guarantee). */
#define PWD_READ_LOCK_MS 15000

static int pwd_read_lock(int root_fd)
{
	_cleanup_close_ int etc_fd = -1;

	if (trusted_open_dir(root_fd, "etc", false, 0755, 0, 0, false, &etc_fd) < 0)
		return -1;
	return ufs_lock(etc_fd, ".pwd.lock", PWD_READ_LOCK_MS, UFS_LOCK_READ);
}

/* Whether name is still a member of pi-sandbox in the root's /etc/group. */
static bool still_member(int root_fd, const char *name)
{
	char **v = NULL;
	size_t n = 0;
	bool found = false;

	if (sandbox_members(root_fd, &v, &n) < 0)
		return true; /* cannot tell: the mismatch stands */
	for (size_t i = 0; i < n && !found; i++)
		found = !strcmp(v[i], name);
	free_strv(v, n);
	return found;
}

int trusted_verify_agents(const char *root, const char *agent, struct trusted_install_report *rep)
{
	char sudo[256];
	_cleanup_close_ int root_fd = -1;
	_cleanup_free_ struct trusted_entry *entries = NULL;
	_cleanup_free_ char *out = NULL;
	char **agents = NULL;
	size_t n = 0, n_agents = 0, i;
	int r;

	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	if (trusted_find_sudo(root, sudo, sizeof(sudo), NULL, 0) < 0)
		return -ENOPKG;
	r = trusted_list(root, &entries, &n, NULL);
	if (r < 0)
		return r;
	if (agent) {
		agents = calloc(2, sizeof(char *));
		if (!agents || !(agents[0] = strdup(agent))) {
			free(agents);
			return -ENOMEM;
		}
		n_agents = 1;
	} else {
		r = sandbox_members(root_fd, &agents, &n_agents);
		if (r < 0)
			return r;
	}
	for (i = 0; i < n_agents; i++) {
		char *argv[] = {sudo, "-n", "-l", "-U", agents[i], NULL};
		struct trusted_sudo_list *l = NULL;
		_cleanup_close_ int pwd_fd = -1;
		char why[512];
		int s;

		free(out);
		out = NULL;
		/* The members were read before: `pistisd users remove` or ensure, run meanwhile
		 * (serve's ensure, an operator's), made sudo answer "unknown user" or grant
		 * nothing, and a good install said it failed (red team, redteam-concurrent.sh). */
		pwd_fd = pwd_read_lock(root_fd);
		s = trusted_run_in_root(root, argv, &out);
		if (s < 0) {
			free_strv(agents, n_agents);
			return s;
		}
		r = trusted_sudo_list_parse(out, strlen(out), &l);
		if (r >= 0 && trusted_sudo_list_verify(l, entries, n, why, sizeof(why)) == 0) {
			rep->verified++;
		} else if (!agent && !still_member(root_fd, agents[i])) {
			/* An agent removed since the members were read is none to confirm. */
		} else if (r < 0) {
			rep->mismatched++;
			if (!rep->message[0]) {
				char pre[128];

				escape_format(pre, sizeof(pre), "sudo -l -U %s: ", agents[i]);
				set_message(rep, pre, out);
			}
		} else {
			rep->mismatched++;
			if (!rep->message[0])
				escape_format(rep->message, sizeof(rep->message),
					      "sudo -l -U %s: %-s", agents[i], why);
		}
		free(l);
	}
	free_strv(agents, n_agents);
	return rep->mismatched ? 1 : 0;
}

int trusted_dropin_current(const char *root, char *why, size_t why_size)
{
	_cleanup_close_ int root_fd = -1, dir_fd = -1;
	_cleanup_free_ struct trusted_entry *entries = NULL;
	_cleanup_free_ char *want = NULL, *have = NULL;
	size_t n = 0, len = 0;
	int r;

	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	r = trusted_list(root, &entries, &n, NULL);
	if (r < 0)
		return r;
	r = trusted_dropin_render(entries, n, &want);
	if (r < 0)
		return r;
	r = trusted_open_dir(root_fd, TRUSTED_SUDOERS_DIR, false, 0755, 0, 0, false, &dir_fd);
	if (r >= 0) {
		_cleanup_close_ int fd = openat(dir_fd, TRUSTED_DROPIN_NAME,
						O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat st;

		if (fd < 0) {
			r = -errno;
		} else if (fstat(fd, &st) < 0) {
			r = -errno;
		} else if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 07777) != 0440) {
			escape_format(why, why_size,
				      "/etc/sudoers.d/" TRUSTED_DROPIN_NAME
				      " is not a root-owned 0440 file");
			return 1;
		} else {
			r = fd_read_all(fd, 4 * 1024 * 1024, &have, &len);
		}
	}
	if (r == -ENOENT) {
		if (n == 0)
			return 0;
		escape_format(why, why_size, "the sudoers drop-in is not installed");
		return 1;
	}
	if (r < 0)
		return r;
	if (strcmp(want, have)) {
		escape_format(why, why_size,
			      "the installed sudoers drop-in differs from /data/trusted "
			      "(a script changed?): run 'pistisd trusted install'");
		return 1;
	}
	return 0;
}

int trusted_check_sudoers(const char *root, char *why, size_t why_size)
{
	char sudo[256], visudo[256];
	_cleanup_free_ char *out = NULL;
	int r;

	if (trusted_find_sudo(root, sudo, sizeof(sudo), visudo, sizeof(visudo)) < 0)
		return -ENOPKG;
	r = check_all(root, visudo, &out);
	if (r < 0)
		return r;
	if (r != 0) {
		escape_format(why, why_size, "visudo -c: %.*s", trimmed_len(out), out);
		return 1;
	}
	return 0;
}
