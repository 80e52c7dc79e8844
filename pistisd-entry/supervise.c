/* The supervision loop: one sigtimedwait() for every signal and every timer, one
 * reaping loop for every zombie, in the shape of tini. */
#include "pistisd-entry/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/mono-clock.h"

/* After SIGKILL, how long to wait for the last processes (one stuck in D state in the
 * kernel cannot be killed at all) before exiting anyway. */
#define KILL_WAIT_MS 5000

struct sup {
	const struct entry_opts *o;
	char **cmd;
	bool pid1;
	sigset_t wait_set;

	pid_t child; /* 0 while none runs */
	int64_t started_ms;
	unsigned failures;
	int64_t restart_at; /* -1: no restart pending */

	bool have_children; /* anything left to reap, the child included */
	int child_status;
	pid_t dead_child;
	bool child_died;

	int stop_sig;	  /* the stop signal received, 0 if none */
	int exit_code;	  /* -1 until decided */
	int64_t deadline; /* -1, or when the next escalation happens */
	bool killed;	  /* SIGKILL sent to everything */

	/* Orphans reaped since the last -v line about them: a line a second at most, so
	 * the agents, who make as many as they like, do not decide how much is logged. */
	unsigned long orphans;
	pid_t last_orphan;
	int64_t orphans_logged_ms;
};

static const char *sig_str(int sig, char buf[static 24])
{
	const char *n = entry_signal_name(sig);

	if (n)
		snprintf(buf, 24, "SIG%s", n);
	else
		snprintf(buf, 24, "signal %d", sig);
	return buf;
}

static void log_status(pid_t pid, int status, int64_t ran_ms)
{
	char b[24];

	if (WIFSIGNALED(status))
		log_warning("child %d was killed by %s%s after %lld.%03lld s", (int)pid,
			    sig_str(WTERMSIG(status), b), WCOREDUMP(status) ? " (core dumped)" : "",
			    (long long)(ran_ms / 1000), (long long)(ran_ms % 1000));
	else
		log_full_errno(WEXITSTATUS(status) ? LOG_LVL_WARNING : LOG_LVL_INFO, 0,
			       "child %d exited with status %d after %lld.%03lld s", (int)pid,
			       WEXITSTATUS(status), (long long)(ran_ms / 1000),
			       (long long)(ran_ms % 1000));
}

/* In the child between fork and exec: only async-signal-safe calls. */
_noreturn_ static void child_exec(char **cmd, int errfd)
{
	sigset_t empty;
	int err;

	/* Own process group, so a forwarded signal reaches the whole job (a shell script and
	 * what it started) and nothing else. Also set by the parent: whichever runs first. */
	(void)setpgid(0, 0);
	/* With a terminal (docker run -t), make the new group the foreground one, or the
	 * child is stopped by SIGTTIN the first time it reads it. SIGTTOU, which tcsetpgrp
	 * from a background group raises, is still blocked here, so the call goes through. */
	if (isatty(STDIN_FILENO))
		(void)tcsetpgrp(STDIN_FILENO, getpid());
	/* Dispositions are the defaults already: main() reset every one that entry inherited
	 * and entry installs no handlers. The blocked mask is inherited: clear it. */
	sigemptyset(&empty);
	(void)sigprocmask(SIG_SETMASK, &empty, NULL);
	/* Every fd entry owns is O_CLOEXEC and main() closed those it inherited; this makes
	 * sure nothing above the error pipe survives either (close_range where present). */
	(void)close_all_fds_from(errfd + 1);
	execvp(cmd[0], cmd);
	err = errno;
	(void)loop_write(errfd, &err, sizeof(err));
	_exit(err == ENOENT ? ENTRY_EXIT_NOT_FOUND : ENTRY_EXIT_CANNOT_EXEC);
}

/* Returns 0 when the child runs, or the exit code entry must end with. */
static int start_child(struct sup *s)
{
	int pfd[2], err = 0;
	ssize_t n;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return log_error_errno(-errno, "Failed to create a pipe: %m"), ENTRY_EXIT_SYSTEM;
	pid = fork();
	if (pid < 0) {
		safe_close(pfd[0]);
		safe_close(pfd[1]);
		return log_error_errno(-errno, "Failed to fork: %m"), ENTRY_EXIT_SYSTEM;
	}
	if (pid == 0) {
		safe_close(pfd[0]);
		child_exec(s->cmd, pfd[1]);
	}
	(void)setpgid(pid, pid); /* EACCES once the child has exec'd: it did it itself */
	safe_close(pfd[1]);
	/* EOF: exec succeeded (the CLOEXEC end closed). Signals are blocked, no EINTR. */
	n = loop_read(pfd[0], &err, sizeof(err));
	safe_close(pfd[0]);
	if (n == (ssize_t)sizeof(err)) {
		int status;

		(void)waitpid(pid, &status, 0);
		log_error_errno(-err, "Failed to execute '%s': %m", s->cmd[0]);
		return err == ENOENT ? ENTRY_EXIT_NOT_FOUND : ENTRY_EXIT_CANNOT_EXEC;
	}
	s->child = pid;
	s->have_children = true;
	s->started_ms = mono_ms();
	log_info("started '%s' as pid %d", s->cmd[0], (int)pid);
	return 0;
}

static void signal_rest(struct sup *s, int sig);

/* The wait status waitpid would give for what waitid reported. */
static int wait_status(const siginfo_t *si)
{
	if (si->si_code == CLD_EXITED)
		return (si->si_status & 0xff) << 8;
	return (si->si_status & 0x7f) | (si->si_code == CLD_DUMPED ? 0x80 : 0);
}

/* Reaps every zombie but the child's. Each is looked at first (WNOWAIT), then reaped by
 * its pid: the child's zombie is left in place for on_child_died, so that its pid, and
 * with it the number of its process group, stays taken while what is left of that group
 * is killed (a reaped number may go to a new process that makes itself a group leader,
 * and the kill would reach that group instead). Other zombies wait behind it until then. */
static void reap(struct sup *s)
{
	bool reaped = false;

	while (!s->child_died) {
		siginfo_t si;
		int status;
		pid_t p;

		si.si_pid = 0;
		/* __WALL: also children whose exit signal is not SIGCHLD (clone()). */
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT | __WALL) < 0) {
			if (errno == EINTR)
				continue;
			s->have_children = false; /* ECHILD: none */
			break;
		}
		s->have_children = true;
		if (si.si_pid == 0)
			break; /* some left, none exited */
		if (si.si_pid == s->child) {
			s->dead_child = s->child;
			s->child = 0;
			s->child_status = wait_status(&si);
			s->child_died = true;
			reaped = true; /* as good as: what it left is ours now (below) */
			break;
		}
		p = waitpid(si.si_pid, &status, WNOHANG | __WALL);
		if (p < 0 && errno == EINTR)
			continue;
		if (p <= 0)
			break; /* cannot happen: it was a zombie, and only we reap */
		reaped = true;
		s->orphans++;
		s->last_orphan = p;
	}
	if (s->orphans && mono_ms() - s->orphans_logged_ms >= 1000) {
		log_debug("reaped %lu orphan%s (the last pid %d)", s->orphans,
			  s->orphans == 1 ? "" : "s", (int)s->last_orphan);
		s->orphans = 0;
		s->orphans_logged_ms = mono_ms();
	}
	/* In the SIGKILL pass, a process that dies hands its own children to us (as
	 * subreaper) as it exits, before we reap it: a grandchild in a session of its own was
	 * not among our children when the pass began, so it gets its SIGKILL now. Once for
	 * all the zombies of this round, not once per zombie: a pass per reaped process made
	 * the SIGKILL of N children that ignored SIGTERM cost N^2/2 kill()s (red team: 3,000
	 * of them kept entry busy 21 s past its 5 s wait). As PID 1, kill(-1) already reached
	 * them. */
	if (reaped && s->have_children && s->killed && !s->pid1)
		signal_rest(s, SIGKILL);
}

/* The child's zombie, once on_child_died is done with its group; then the others that
 * waited behind it. */
static void bury_child(struct sup *s)
{
	while (waitpid(s->dead_child, NULL, __WALL) < 0 && errno == EINTR)
		;
	reap(s);
}

/* Every process left besides the child: as PID 1 of a PID namespace that is all of the
 * namespace (kill(-1) never hits PID 1 itself); otherwise our own children, orphans
 * reparented to us as subreaper included, read from /proc. The list is read a piece at a
 * time and signalled as it is read, however long it is: a cap on its size (it was 64 KiB,
 * ~10,900 pids) made a longer one signal no one at all, and entry exited leaving every
 * one of them running (red team: 11,500 children of a CMD that had exited). */
static void signal_rest(struct sup *s, int sig)
{
	char path[64], buf[4096];
	_cleanup_close_ int fd = -1;
	size_t have = 0;

	if (s->pid1) {
		(void)kill(-1, sig);
		return;
	}
	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		log_debug("cannot list children in %s", path);
		return;
	}
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
		size_t used = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0)
				log_debug("cannot read %s: %m", path);
			n = 0;
		}
		have += (size_t)n;
		buf[have] = '\0';
		/* "PID PID … " — signal every pid the piece holds whole; a last one the piece
		 * cut short waits for the next read (or is whole at EOF). */
		for (char *p = buf, *end;; p = end) {
			long pid;

			while (*p == ' ' || *p == '\n')
				p++;
			pid = strtol(p, &end, 10);
			if (end == p || (!*end && n > 0))
				break;
			used = (size_t)(end - buf);
			if (pid > 1)
				(void)kill((pid_t)pid, sig);
		}
		if (n == 0)
			return;
		memmove(buf, buf + used, have - used);
		have -= used;
		if (have == sizeof(buf) - 1)
			return; /* no pid is that long: not the file we know */
	}
}

static void forward(struct sup *s, int sig)
{
	char b[24];

	if (!s->child)
		return;
	/* The group first (the child's job); the child alone when it has left its group. */
	if (kill(-s->child, sig) < 0 && kill(s->child, sig) < 0)
		log_debug_errno(-errno, "Failed to forward %s to %d: %m", sig_str(sig, b),
				(int)s->child);
	else
		log_debug("forwarded %s to process group %d", sig_str(sig, b), (int)s->child);
}

/* The final exit code is known; the rest of the processes are asked to go. */
static void finish(struct sup *s, int code)
{
	if (s->exit_code >= 0)
		return;
	s->exit_code = code;
	s->restart_at = -1;
	if (s->have_children) {
		signal_rest(s, SIGTERM);
		signal_rest(s, SIGCONT); /* a stopped one sees its SIGTERM only once it runs */
		if (s->deadline < 0)
			s->deadline = mono_ms() + s->o->grace_ms;
	}
}

static void on_child_died(struct sup *s)
{
	int64_t ran = mono_ms() - s->started_ms, delay;
	enum entry_after_exit what;

	s->child_died = false;
	log_status(s->dead_child, s->child_status, ran);
	if (s->stop_sig) {
		bury_child(s);
		finish(s, 128 + s->stop_sig);
		return;
	}
	what = entry_decide(s->o, &s->failures, ran, &delay);
	if (what == ENTRY_GIVE_UP) {
		if (s->o->restart)
			log_error("giving up after %u restarts in a row", s->failures);
		bury_child(s);
		finish(s, entry_exit_code(s->child_status));
		return;
	}
	if (s->o->max_restarts)
		log_notice("restart %u/%u in %lld.%03lld s", s->failures, s->o->max_restarts,
			   (long long)(delay / 1000), (long long)(delay % 1000));
	else
		log_notice("restart %u in %lld.%03lld s", s->failures, (long long)(delay / 1000),
			   (long long)(delay % 1000));
	/* What is left of the dead child's group (a helper, a daemon a script started) goes
	 * before the new one starts, so a restart never runs two of anything. The child's
	 * zombie is not reaped yet (reap), so its number is still taken and the SIGKILL
	 * reaches that group and no other. */
	(void)kill(-s->dead_child, SIGKILL);
	bury_child(s);
	s->restart_at = mono_ms() + delay;
}

static void on_signal(struct sup *s, int sig)
{
	char b[24];

	/* Every signal reaps first: sigtimedwait hands out the lowest pending signal, so a
	 * stream of SIGTERMs (15) would otherwise keep SIGCHLD (17) waiting, and with it the
	 * child's status and the SIGKILL of what is reparented to us. */
	reap(s);
	if (sig == SIGCHLD)
		return;
	if (!entry_signal_forwarded(sig)) {
		log_debug("ignoring %s", sig_str(sig, b));
		return;
	}
	if (!entry_signal_stops(sig)) {
		forward(s, sig);
		return;
	}
	if (s->stop_sig) {
		/* A second stop signal (Ctrl-C twice): no more grace. Any later one changes
		 * nothing: the deadline it sets is handled before the next signal is waited
		 * for, so the SIGKILL is sent by then, and its wait must run its course. */
		if (s->killed) {
			log_debug("%s again: SIGKILL already sent", sig_str(sig, b));
			return;
		}
		log_notice("%s again: killing everything now", sig_str(sig, b));
		s->deadline = mono_ms();
		if (s->exit_code < 0 && !s->child)
			finish(s, 128 + s->stop_sig);
		return;
	}
	s->stop_sig = sig;
	s->restart_at = -1;
	if (s->child) {
		log_notice("%s: forwarding it to process group %d, SIGKILL in %lld.%03lld s",
			   sig_str(sig, b), (int)s->child, (long long)(s->o->grace_ms / 1000),
			   (long long)(s->o->grace_ms % 1000));
		forward(s, sig);
		/* A stopped process does not see its SIGTERM until it runs again. */
		forward(s, SIGCONT);
		s->deadline = mono_ms() + s->o->grace_ms;
	} else {
		log_notice("%s while no child runs: stopping", sig_str(sig, b));
		finish(s, 128 + sig);
	}
}

static void on_deadline(struct sup *s)
{
	reap(s);
	if (s->child_died) {
		/* The child's zombie first (on_child_died), then this deadline again. */
		s->deadline = mono_ms();
		return;
	}
	if (s->killed) {
		if (!s->have_children)
			return;
		log_warning("processes are left after SIGKILL (stuck in the kernel?); exiting");
		s->have_children = false;
		if (s->exit_code < 0)
			s->exit_code = 128 + (s->stop_sig ? s->stop_sig : SIGKILL);
		return;
	}
	log_warning("grace period over: sending SIGKILL to what is left");
	if (s->child) {
		(void)kill(-s->child, SIGKILL);
		(void)kill(s->child, SIGKILL);
	}
	signal_rest(s, SIGKILL);
	s->killed = true;
	s->deadline = mono_ms() + KILL_WAIT_MS;
}

int entry_supervise(const struct entry_opts *o, char **cmd)
{
	struct sup s = {
		.o = o,
		.cmd = cmd,
		.pid1 = getpid() == 1,
		.restart_at = -1,
		.exit_code = -1,
		.deadline = -1,
	};
	int r;

	entry_wait_set(&s.wait_set);
	r = start_child(&s);
	if (r > 0)
		return r;

	for (;;) {
		struct timespec ts, *tsp = NULL;
		int64_t now = mono_ms(), next = -1;
		siginfo_t info;
		int sig;

		if (s.child_died)
			on_child_died(&s);
		if (s.exit_code >= 0 && !s.have_children)
			return s.exit_code;
		if (s.restart_at >= 0 && now >= s.restart_at) {
			s.restart_at = -1;
			r = start_child(&s);
			if (r > 0)
				finish(&s, r);
			continue;
		}
		if (s.deadline >= 0 && now >= s.deadline) {
			s.deadline = -1;
			on_deadline(&s);
			continue;
		}

		if (s.restart_at >= 0)
			next = s.restart_at;
		if (s.deadline >= 0 && (next < 0 || s.deadline < next))
			next = s.deadline;
		if (next >= 0) {
			ts.tv_sec = (next - now) / 1000;
			ts.tv_nsec = ((next - now) % 1000) * 1000000;
			tsp = &ts;
		}
		sig = sigtimedwait(&s.wait_set, &info, tsp);
		if (sig < 0) {
			if (errno != EAGAIN && errno != EINTR)
				return log_error_errno(-errno, "sigtimedwait: %m"),
				       ENTRY_EXIT_SYSTEM;
			continue;
		}
		on_signal(&s, sig);
	}
}
