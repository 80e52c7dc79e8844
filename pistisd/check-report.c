/* The pure half of `pistisd check`: what each check is called, which are hard, the promise
 * each one backs and what an operator does about it, the opt-out list, the verdict, and the
 * text and JSON renderings. No syscalls here; the probes live in check.c. */
#include "pistisd/check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/escape.h"
#include "lib/macro.h"
#include "lib/mountinfo.h"
#include "lib/parse-num.h"

static const struct {
	const char *name;
	bool hard;
	const char *promise;
	const char *advice;
} table[_CHECK_MAX] = {
	[CHECK_CAPABILITIES] =
		{"capabilities", true,
		 "every promise: pistisd gives each agent its own uid, an empty capability set and "
		 "a home of its own, and ends what its commands leave, as root holding CAP_CHOWN, "
		 "CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_KILL, CAP_SETGID, CAP_SETUID and "
		 "CAP_SETPCAP (Docker's default set has them all)",
		 "run pistisd as root (no docker run --user, Kubernetes runAsUser 0 and no "
		 "runAsNonRoot) and do not drop these capabilities (no --cap-drop ALL; add "
		 "back what a securityContext drops), or --allow capabilities"},
	[CHECK_SECCOMP] =
		{"seccomp", true, "agent processes run under a seccomp filter (spawn core)",
		 "use a kernel with CONFIG_SECCOMP_FILTER and a runtime profile that allows "
		 "seccomp(2) (Docker's default does)"},
	[CHECK_LANDLOCK] = {"landlock", false,
			    "an agent command reaches no abstract UNIX socket bound outside its "
			    "own tree: not other agents', not the host's (Landlock ABI >= 6 scope)",
			    "use Linux >= 6.12 booted with lsm=...,landlock "
			    "(CONFIG_SECURITY_LANDLOCK) and a seccomp profile that allows the "
			    "landlock_* calls"},
	[CHECK_OPENAT2] =
		{"openat2", true,
		 "paths an agent names resolve beneath their root without following its "
		 "symlinks (RESOLVE_BENEATH|NO_SYMLINKS)",
		 "use Linux >= 5.6 and a seccomp profile that allows openat2, or accept the "
		 "per-component O_NOFOLLOW fallback with --allow openat2"},
	[CHECK_CLOSE_RANGE] =
		{"close_range", true,
		 "no pistisd fd leaks into an agent process (runc CVE-2024-21626)",
		 "use Linux >= 5.9, or mount /proc so the /proc/self/fd fallback works"},
	[CHECK_PIDFD] = {"pidfd", false, "agent processes are signalled without PID-reuse races",
			 "use Linux >= 5.3 and a seccomp profile that allows pidfd_open"},
	[CHECK_CGROUP2] =
		{"cgroup2", false,
		 "stopping an agent kills its whole process tree (cgroup.kill), and memory and "
		 "process limits apply per agent; without it each command is held by an audit "
		 "session of its own (tree \"session\")",
		 "run on a cgroup v2 host (systemd.unified_cgroup_hierarchy=1) and give pistisd a "
		 "writable cgroup2 mount: a container's is read-only unless its runtime delegates "
		 "one"},
	[CHECK_CGROUP_CONTROLLERS] =
		{"cgroup_controllers", false, "per-agent memory and process-count limits",
		 "delegate the memory and pids controllers to pistisd's cgroup (systemd "
		 "Delegate=yes, or a pure cgroup v2 container host)"},
	[CHECK_USERNS] =
		{"userns", false,
		 "kernel attack surface reachable by agents (the spawn filter denies "
		 "CLONE_NEWUSER)",
		 "optional: sysctl user.max_user_namespaces=0 on the host if nothing there "
		 "needs rootless containers"},
	[CHECK_PROTECTED_HARDLINKS] =
		{"protected_hardlinks", true,
		 "an agent cannot hardlink a root- or pi-tools-owned file into a tree pistis "
		 "walks (docs/security.md, promise 2)",
		 "sysctl fs.protected_hardlinks=1 on the host (it is not namespaced), or "
		 "--allow protected_hardlinks"},
	[CHECK_PROTECTED_SYMLINKS] =
		{"protected_symlinks", true,
		 "root and trusted commands never follow an agent's symlink in a sticky "
		 "directory such as /tmp",
		 "sysctl fs.protected_symlinks=1 on the host, or --allow protected_symlinks"},
	[CHECK_PROTECTED_REGULAR] =
		{"protected_regular", true,
		 "root and other agents' tools never write into a file an agent planted in /tmp "
		 "(O_CREAT of an existing name)",
		 "sysctl fs.protected_regular=2 on the host (1 covers /tmp), or --allow "
		 "protected_regular"},
	[CHECK_PROTECTED_FIFOS] =
		{"protected_fifos", true,
		 "root and other agents' tools never write into a FIFO an agent planted in /tmp",
		 "sysctl fs.protected_fifos=2 on the host (1 covers /tmp), or --allow "
		 "protected_fifos"},
	[CHECK_STICKY_SHARED] =
		{"sticky_shared", true,
		 "no agent removes, renames or replaces another's entries in /tmp, /dev/shm, "
		 "/var/tmp or /run/lock, and protected_symlinks, protected_regular and "
		 "protected_fifos hold there: they cover sticky directories only",
		 "chmod 1777 the directory named, and chown root it (pistisd-entry adds the "
		 "sticky bit to a root-owned one at start-up; docker run --tmpfs gives 1777), "
		 "or --allow sticky_shared"},
	[CHECK_YAMA_PTRACE] =
		{"yama_ptrace_scope", false,
		 "an agent cannot trace its own trusted-command children or other same-uid "
		 "processes it did not start",
		 "sysctl kernel.yama.ptrace_scope=1 (or higher) on the host; the spawn filter "
		 "also denies ptrace"},
	[CHECK_TIOCSTI] =
		{"legacy_tiocsti", false,
		 "an agent cannot push keystrokes into a terminal (CVE-2017-5226); pistis gives "
		 "each command its own pty and the filter denies TIOCSTI",
		 "sysctl dev.tty.legacy_tiocsti=0 (Linux >= 6.2)"},
	[CHECK_USERFAULTFD] = {"unprivileged_userfaultfd", false,
			       "kernel race exploitation aid out of agents' reach",
			       "sysctl vm.unprivileged_userfaultfd=0"},
	[CHECK_PERF_EVENT] = {"perf_event_paranoid", false,
			      "agents cannot profile the kernel or other users' processes",
			      "sysctl kernel.perf_event_paranoid=2 (or higher)"},
	[CHECK_DMESG_RESTRICT] =
		{"dmesg_restrict", false,
		 "agents cannot read the kernel log (other agents' crash lines name their "
		 "programs and addresses): the filter refuses syslog(2), and only "
		 "kernel.dmesg_restrict keeps /dev/kmsg to CAP_SYSLOG",
		 "sysctl kernel.dmesg_restrict=1"},
	[CHECK_SUDO] = {"sudo", false,
			"trusted commands run as pi-tools through a pinned sudoers rule",
			"install sudo in the image (apt-get install sudo / apk add sudo) to use "
			"trusted commands; without it they are unavailable"},
	[CHECK_SUDO_CVES] =
		{"sudo_cves", true,
		 "no agent becomes root through the image's sudo, which every agent runs with "
		 "its setuid bit while trusted commands are configured (hard then; a warning "
		 "otherwise)",
		 "update the image's sudo to its distribution's security release (sudoedit -s "
		 "must be a usage error, -R refused before any chroot), or --allow sudo_cves"},
	[CHECK_VISUDO] = {"visudo", false,
			  "every sudoers drop-in is checked with visudo -cf before it is installed",
			  "install sudo's visudo in the image; pistis refuses to install trusted "
			  "commands without it"},
	[CHECK_SETUID_FILES] =
		{"setuid_files", false,
		 "agents gain no privileges through setuid/setgid programs in the image",
		 "remove the setuid/setgid bits (chmod u-s,g-s) from programs agents do not "
		 "need; keep sudo only if trusted commands are used"},
	[CHECK_SUID_DUMPABLE] =
		{"suid_dumpable", true,
		 "a process that changed its ids (the spawn child, sudo) is not dumpable, so an "
		 "agent cannot ptrace it or read its memory through /proc",
		 "sysctl fs.suid_dumpable=0 on the host (2 is accepted with a warning), or "
		 "--allow suid_dumpable"},
	[CHECK_CORE_PATTERN] =
		{"core_pattern", false,
		 "no agent's crash runs a program as root on the host (a kernel.core_pattern "
		 "pipe: apport, systemd-coredump)",
		 "set kernel.core_pattern to a file pattern (e.g. core) on the host, or keep its "
		 "handler at its distribution's security updates: the kernel runs a pipe handler "
		 "whatever RLIMIT_CORE an agent sets (0 included)"},
	[CHECK_PROC_HIDEPID] =
		{"proc_hidepid", false,
		 "agents cannot see each other's processes, command lines or environments in "
		 "/proc",
		 "mount /proc with hidepid=invisible (pistisd-entry does it at start-up; needs "
		 "CAP_SYS_ADMIN and a runtime that allows mount)"},
	[CHECK_NOSUID_DATA] =
		{"nosuid_data", true,
		 "a setuid or device file in /data gives no agent another's privileges (hard "
		 "where trusted commands are configured: agents then run without no_new_privs)",
		 "mount /data nosuid,nodev (pistisd-entry does it at start-up), or --allow "
		 "nosuid_data"},
	[CHECK_NOSUID_WORKSPACES] =
		{"nosuid_workspaces", true,
		 "a setuid file one agent plants in /workspaces or /workspace does not run as that "
		 "agent when another executes it (hard where trusted commands are configured)",
		 "mount /workspaces and /workspace nosuid,nodev (pistisd-entry does it at "
		 "start-up), or --allow nosuid_workspaces"},
	[CHECK_NOSUID_SHARED] =
		{"nosuid_shared", true,
		 "a setuid file one agent leaves in /tmp, /dev/shm, /var/tmp or /run/lock does not "
		 "run as that agent for another (hard where trusted commands are configured: "
		 "agents get setuid only while every shared tree is nosuid)",
		 "mount them nosuid,nodev (pistisd-entry does it at start-up; docker run "
		 "--tmpfs /tmp:nosuid,nodev and the like), or --allow nosuid_shared"},
	[CHECK_MOUNT_POINTS] =
		{"mount_points", false,
		 "no agent decides where a volume is mounted at the next start: the runtime "
		 "follows links on a mount's way down, so one an agent leaves there sends the "
		 "volume (and what agents wrote in it) over /usr/local/bin or /etc",
		 "mount volumes where no agent may write on the way down (side by side, not "
		 "inside a tree agents write), or make each directory on the way root's and not "
		 "writable by agents (a read path rule)"},
	[CHECK_AGENT_WRITABLE] =
		{"agent_writable", true,
		 "no other directory of the image lets one agent leave a setuid file that runs as "
		 "it for another (hard where trusted commands are configured)",
		 "mount the directories named nosuid,nodev, or take agents' write access away "
		 "(chmod o-w, a read path rule), or --allow agent_writable"},
	[CHECK_ACCOUNT_FILES] =
		{"account_files", true,
		 "no agent can give itself uid 0 or a place in another agent's group: /etc and "
		 "its passwd, group, shadow and gshadow are root's, writable by root only",
		 "chown root /etc /etc/passwd /etc/group /etc/shadow /etc/gshadow and chmod "
		 "go-w them (group root may keep write); pistisd users refuses them otherwise"},
	[CHECK_OOM_FLOOR] =
		{"oom_floor", false,
		 "the kernel's OOM killer takes an agent's command before pistisd: commands run "
		 "at pistisd's oom_score_adj + 500, and no agent can set its own lower",
		 "give pistisd CAP_SYS_RESOURCE (docker run --cap-add SYS_RESOURCE), or rely "
		 "on a memory cgroup per agent (cgroup_controllers)"},
	[CHECK_DATA_BIN] =
		{"data_bin", true,
		 "no agent's program is on every agent's PATH: /data/bin, first on it, holds only "
		 "files root owns and root alone may write",
		 "remove the files named (an agent left them in an earlier life of the volume, or "
		 "a looser configuration let one write there) or chown root and chmod go-w them "
		 "after reading them, or --allow data_bin"},
	[CHECK_TRUSTED_CAPS] =
		{"trusted_caps", false,
		 "trusted commands run for agents: without no_new_privs the kernel puts the "
		 "spawn core's seccomp filter and Landlock scope on a command only for a "
		 "pistisd holding CAP_SYS_ADMIN; without it agents keep no_new_privs and sudo "
		 "refuses",
		 "give pistisd CAP_SYS_ADMIN (docker run --cap-add SYS_ADMIN), or remove the "
		 "trusted commands"},
	[CHECK_ORCHESTRATOR_SECRETS] =
		{"orchestrator_secrets", false,
		 "no agent reads the secrets an orchestrator mounts: Docker's /run/secrets, "
		 "Kubernetes' service-account token (/var/run/secrets/kubernetes.io), readable "
		 "by every user unless told otherwise",
		 "do not mount them (Kubernetes: automountServiceAccountToken: false), mount "
		 "them with mode 0400 (secrets' mode / defaultMode), or add a none rule for "
		 "/run/secrets"},
	[CHECK_DEV_NODES] =
		{"dev_nodes", false,
		 "agents reach no driver beyond the common devices: the seccomp filter allows "
		 "ioctl on any fd, so a device node every user may open (/dev/kvm, a GPU render "
		 "node, a disk) hands agents that driver's whole interface",
		 "chmod o-rw the nodes named (they are for a group agents are not in), or leave "
		 "them out of the agents' /dev (docker run without --device)"},
	[CHECK_HOST_NAMESPACES] =
		{"host_namespaces", false,
		 "agents see and reach only this sandbox's processes and SysV IPC objects, and "
		 "pistis's clean-ups by uid touch only this sandbox's: every sandbox's first agent "
		 "has the same uid",
		 "give the container PID, IPC and UTS namespaces of its own (no docker run --pid "
		 "host, --ipc host or --uts host; no Kubernetes hostPID or hostIPC); a machine "
		 "of its own that runs one pistisd may ignore this"},
	[CHECK_SHARED_PID_NS] =
		{"shared_pid_ns", false,
		 "agents see and signal only this sandbox's processes: where another container "
		 "shares the PID namespace, its processes of an agent's uid (every sandbox's "
		 "first agent is 10100) are that agent's to read in /proc and to kill",
		 "give the container a PID namespace of its own (no docker run --pid "
		 "container:X; no Kubernetes shareProcessNamespace), or no agents in the other "
		 "container"},
	[CHECK_NSS_SOURCES] =
		{"nss_sources", false,
		 "no agent shares its uid or gid with a user or group of the machine: pistisd "
		 "users reads /etc/passwd and /etc/group only, so a directory service's user "
		 "with a uid from 10100 up would be an agent too (its files, its processes)",
		 "keep the ids of the sources named out of 10100-59999 (sssd's min_id/max_id, "
		 "the directory's own ranges), or run pistis in a container of its own, whose "
		 "nsswitch.conf reads files only"},
	[CHECK_ID_MAP] =
		{"id_map", true,
		 "every agent gets a uid and gid of its own, and pi-tools its own: in a user "
		 "namespace (rootless Docker or Podman, Docker's userns-remap, Kubernetes "
		 "hostUsers: false, unprivileged LXC) only the ids its map covers can be set or "
		 "given to a file, and setgroups must be allowed to give a command the agent's "
		 "groups instead of root's",
		 "map uids and gids 0-65535 into the container (Docker: a subordinate range of "
		 "65536 in /etc/subuid and /etc/subgid; Podman --userns=auto:size=65536; LXC "
		 "lxc.idmap u 0 BASE 65536), with setgroups allowed (a map written by newuidmap "
		 "or by root, not by the namespace's own unprivileged creator); or --allow id_map "
		 "where only some agent ids are mapped (a command of an unmapped agent then fails "
		 "at users ensure)"},
	[CHECK_PISTISD_BINARY] =
		{"pistisd_binary", true,
		 "no one but root changes the pistisd that runs as root: pistisd-entry starts "
		 "it again by its path at every restart, and every trusted command's wrapper "
		 "names it",
		 "install pistisd root's 0755 in a directory only root may write "
		 "(/usr/local/bin); after replacing it (an upgrade), restart the sandbox so the "
		 "new one runs"},
	[CHECK_DATA_STATE] =
		{"data_state", true,
		 "no agent reads or writes pistis' own state in /data: the registry, the "
		 "closing-mark key, the trusted commands and their secrets, other agents' homes "
		 "(each its owner's, in its owner's group)",
		 "a Kubernetes fsGroup walk leaves this at every pod start (docs/entry.md, "
		 "\"Volume ownership: fsGroup\"): give the pod no fsGroup; pistisd-entry takes "
		 "these back before anything runs; without it, chgrp them to their owner's group "
		 "and chmod g-w,g-s (go= for the secrets and homes); or --allow data_state"},
};

bool check_sudo_may_chroot_first(const char *version)
{
	const char *v = strstr(version, "version "), *p;
	uint64_t a, b, c, patch = 0;

	/* digits only (sscanf's %u took a sign and spaces: "1.9.-3" was 1.9.4294967293) */
	if (!v || parse_uint_strict(v + 8, UINT32_MAX, &p, &a) < 0 || *p != '.' ||
	    parse_uint_strict(p + 1, UINT32_MAX, &p, &b) < 0 || *p != '.' ||
	    parse_uint_strict(p + 1, UINT32_MAX, &p, &c) < 0)
		return true; /* says no version we can read: ask it */
	if (*p == 'p' && parse_uint_strict(p + 1, UINT32_MAX, &p, &patch) < 0)
		return true;
	if (a != 1 || b != 9)
		return false;
	return c >= 14 && (c < 17 || (c == 17 && patch == 0));
}

enum check_status check_hidepid_status(const char *super_opts, char *value, size_t size)
{
	const char *v = NULL, *sub = NULL;
	size_t n = 0, sn = 0;
	bool hidden, subset;

	subset = mountinfo_opt(super_opts, "subset", &sub, &sn);
	if (!mountinfo_opt(super_opts, "hidepid", &v, &n)) {
		snprintf(value, size, "no hidepid (every process visible to every user)%s",
			 subset ? "; subset=pid" : "");
		return CHECK_STATUS_WARN;
	}
	hidden = (n == 9 && !strncmp(v, "invisible", 9)) || (n == 1 && (*v == '2' || *v == '4')) ||
		 (n == 10 && !strncmp(v, "ptraceable", 10));
	snprintf(value, size, "hidepid=%.*s%s%s", (int)(n > 32 ? 32 : n), v,
		 hidden ? "" : " (other users' processes still listed)",
		 subset ? "; subset=pid" : "");
	return hidden ? CHECK_STATUS_OK : CHECK_STATUS_WARN;
}

static const char *const status_names[_CHECK_STATUS_MAX] = {
	[CHECK_STATUS_OK] = "ok",
	[CHECK_STATUS_WARN] = "warn",
	[CHECK_STATUS_MISSING] = "missing",
	[CHECK_STATUS_FAIL] = "fail",
};

const char *check_name(enum check_id id)
{
	return (unsigned)id < _CHECK_MAX ? table[id].name : NULL;
}

bool check_is_hard(enum check_id id)
{
	return (unsigned)id < _CHECK_MAX && table[id].hard;
}

const char *check_promise(enum check_id id)
{
	return (unsigned)id < _CHECK_MAX ? table[id].promise : NULL;
}

const char *check_advice(enum check_id id)
{
	return (unsigned)id < _CHECK_MAX ? table[id].advice : NULL;
}

const char *check_status_to_string(enum check_status s)
{
	return (unsigned)s < _CHECK_STATUS_MAX ? status_names[s] : NULL;
}

static int check_from_name_len(const char *name, size_t len)
{
	for (unsigned i = 0; i < _CHECK_MAX; i++)
		if (strlen(table[i].name) == len && !strncmp(table[i].name, name, len))
			return (int)i;
	return -EINVAL;
}

int check_from_name(const char *name)
{
	return name ? check_from_name_len(name, strlen(name)) : -EINVAL;
}

int check_allow_parse(const char *list, check_mask_t *mask, const char **ret_bad,
		      size_t *ret_bad_len)
{
	const char *p = list;
	check_mask_t m = 0;

	if (!list)
		return 0;
	for (;;) {
		p += strspn(p, ", \t\n");
		if (!*p)
			break;
		size_t len = strcspn(p, ", \t\n");
		int id = check_from_name_len(p, len);
		if (id < 0) {
			if (ret_bad)
				*ret_bad = p;
			if (ret_bad_len)
				*ret_bad_len = len;
			return -EINVAL;
		}
		m |= CHECK_BIT(id);
		p += len;
	}
	*mask |= m;
	return 0;
}

static bool result_holds(enum check_status s)
{
	return s == CHECK_STATUS_OK || s == CHECK_STATUS_WARN;
}

int check_first_failure(const struct check_report *r)
{
	for (unsigned i = 0; i < _CHECK_MAX; i++)
		if (table[i].hard && !result_holds(r->results[i].status) &&
		    !(r->allowed & CHECK_BIT(i)))
			return (int)i;
	return -1;
}

void check_set(struct check_report *r, enum check_id id, enum check_status status, const char *fmt,
	       ...)
{
	va_list ap;

	if ((unsigned)id >= _CHECK_MAX)
		return;
	r->results[id].status = status;
	r->results[id].text = false;
	va_start(ap, fmt);
	(void)vsnprintf(r->results[id].value, sizeof(r->results[id].value), fmt, ap);
	va_end(ap);
}

void check_set_text(struct check_report *r, enum check_id id, enum check_status status,
		    const char *text)
{
	if ((unsigned)id >= _CHECK_MAX)
		return;
	r->results[id].status = status;
	r->results[id].text = true;
	escape_format(r->results[id].value, sizeof(r->results[id].value), "%-s", text);
}

const char *check_value_text(const struct check_result *res, char *buf, size_t size)
{
	if (res->text)
		return res->value;
	escape_c_text(res->value, strlen(res->value), buf, size);
	return buf;
}

struct check_report *check_report_new(const char *root)
{
	struct check_report *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->root = strdup(root ? root : "/");
	if (!r->root) {
		free(r);
		return NULL;
	}
	for (unsigned i = 0; i < _CHECK_MAX; i++)
		check_set(r, i, CHECK_STATUS_MISSING, "not probed");
	return r;
}

int check_report_add_suid(struct check_report *r, const char *path, mode_t mode, bool caps,
			  uid_t uid, gid_t gid)
{
	r->n_suid_all++;
	if (r->n_suid >= CHECK_SUID_MAX)
		return 0;
	if (!r->suid) {
		r->suid = calloc(CHECK_SUID_MAX, sizeof(*r->suid));
		if (!r->suid)
			return -ENOMEM;
	}
	char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	r->suid[r->n_suid++] = (struct check_suid){p, mode, uid, gid, caps};
	return 0;
}

void check_report_free(struct check_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_suid; i++)
		free(r->suid[i].path);
	free(r->suid);
	free(r->root);
	free(r);
}

/* Strings in the report may come from the image (file names): escape them whole, in
 * chunks, so no byte of theirs reaches a terminal or a JSON reader raw. In the table, as in
 * a log line (check_value_text), an apostrophe stays one: nothing there is quoted with it
 * ("agents' cores", not "agents\\' cores"). */
static void put_escaped(FILE *f, const char *s, bool json)
{
	char buf[6 * 64 + 1];
	size_t len = strlen(s);

	while (len > 0) {
		size_t n = len < 64 ? len : 64;
		if (json)
			escape_json(s, n, buf, sizeof(buf));
		else
			escape_c_text(s, n, buf, sizeof(buf));
		fputs(buf, f);
		s += n;
		len -= n;
	}
}

static void json_str(FILE *f, const char *key, const char *s)
{
	fprintf(f, "\"%s\": ", key);
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	put_escaped(f, s, true);
	fputc('"', f);
}

void check_format_json(const struct check_report *r, FILE *f)
{
	int first_failure = check_first_failure(r);

	fputs("{\n  ", f);
	json_str(f, "root", r->root);
	fprintf(f, ",\n  \"ok\": %s,\n  ", first_failure < 0 ? "true" : "false");
	json_str(f, "failed", first_failure < 0 ? NULL : check_name(first_failure));
	fputs(",\n  \"checks\": [\n", f);
	for (unsigned i = 0; i < _CHECK_MAX; i++) {
		fputs("    {", f);
		json_str(f, "name", table[i].name);
		fputs(", ", f);
		json_str(f, "status", check_status_to_string(r->results[i].status));
		fprintf(f, ", \"hard\": %s, \"allowed\": %s, ", table[i].hard ? "true" : "false",
			r->allowed & CHECK_BIT(i) ? "true" : "false");
		json_str(f, "value", r->results[i].value);
		fputs(", ", f);
		json_str(f, "promise", table[i].promise);
		fputs(", ", f);
		json_str(f, "advice", table[i].advice);
		fprintf(f, "}%s\n", i + 1 < _CHECK_MAX ? "," : "");
	}
	fputs("  ],\n  \"setuid_files\": [\n", f);
	for (size_t i = 0; i < r->n_suid; i++) {
		const struct check_suid *s = &r->suid[i];
		fputs("    {", f);
		json_str(f, "path", s->path);
		fprintf(f, ", \"mode\": \"%05o\", \"uid\": %u, \"gid\": %u, \"caps\": %s}%s\n",
			(unsigned)(s->mode & 07777), (unsigned)s->uid, (unsigned)s->gid,
			s->caps ? "true" : "false", i + 1 < r->n_suid ? "," : "");
	}
	fprintf(f, "  ],\n  \"setuid_count\": %zu,\n  \"setuid_walk_truncated\": %s\n}\n",
		r->n_suid_all, r->walk_truncated ? "true" : "false");
}

void check_format_text(const struct check_report *r, FILE *f)
{
	int first_failure = check_first_failure(r);
	int w = 4;

	for (unsigned i = 0; i < _CHECK_MAX; i++)
		if ((int)strlen(table[i].name) > w)
			w = (int)strlen(table[i].name);

	fprintf(f, "%-*s  %-7s  %-4s  %s\n", w, "CHECK", "STATUS", "HARD", "VALUE");
	for (unsigned i = 0; i < _CHECK_MAX; i++) {
		const struct check_result *res = &r->results[i];
		const char *hard = !table[i].hard ? "-" : r->allowed & CHECK_BIT(i) ? "off" : "yes";
		fprintf(f, "%-*s  %-7s  %-4s  ", w, table[i].name,
			check_status_to_string(res->status), hard);
		if (res->text)
			fputs(res->value, f); /* escaped once already: not a second time */
		else
			put_escaped(f, res->value, false);
		fputc('\n', f);
		if (res->status == CHECK_STATUS_OK)
			continue;
		fprintf(f, "%*s  affects: %s\n", w, "", table[i].promise);
		fprintf(f, "%*s  do:      %s\n", w, "", table[i].advice);
	}

	fputs("\nsetuid/setgid files under ", f);
	put_escaped(f, r->root, false);
	fprintf(f, ": %zu%s\n", r->n_suid_all,
		r->walk_truncated ? " (walk stopped at a limit; the list is incomplete)" : "");
	for (size_t i = 0; i < r->n_suid; i++) {
		const struct check_suid *s = &r->suid[i];
		fprintf(f, "  %05o %5u:%-5u ", (unsigned)(s->mode & 07777), (unsigned)s->uid,
			(unsigned)s->gid);
		put_escaped(f, s->path, false);
		fputs(s->caps ? " caps\n" : "\n", f);
	}
	if (r->n_suid < r->n_suid_all)
		fprintf(f, "  … and %zu more\n", r->n_suid_all - r->n_suid);

	if (first_failure < 0)
		fputs("\nverdict: ok (every hard requirement holds or is allowed)\n", f);
	else
		fprintf(f,
			"\nverdict: FAIL: hard requirement '%s' does not hold (opt out: "
			"--allow %s)\n",
			check_name(first_failure), check_name(first_failure));
}
