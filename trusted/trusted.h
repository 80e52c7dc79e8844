#pragma once

/* trusted: commands an agent may run as pi-tools, the user that holds /data/.secrets
 * (see docs/trusted.md). A trusted command is a root-owned script in /data/trusted/NAME,
 * a wrapper on the agents' PATH in /data/bin/NAME, and one rule in the sudoers drop-in
 * /etc/sudoers.d/pistis-trusted pinned to the script's SHA-256 digest.
 *
 * Every function takes the root of the image ("/" or a root filesystem directory) and
 * works on fds beneath it; none follows a symlink in the paths it owns.
 *
 * A reason handed back (every `why`, an install report's message) is one line of text with
 * each name in it escaped once, a quoted one's ' too (lib/escape.h escape_format), as names
 * in the image may hold any byte: log it with %-s, never %s (which would escape it again). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "lib/sha256.h"

#define TRUSTED_NAME_MAX 64
#define TRUSTED_SCRIPT_MAX (1024 * 1024) /* bytes of one script */
#define TRUSTED_COMMANDS_MAX 256	 /* trusted commands in one image */
#define TRUSTED_OUTPUT_MAX (256 * 1024)	 /* bytes read from visudo / sudo -l */
#define TRUSTED_KEEP_MAX 64		 /* --keep paths of harden-setuid */

/* Paths inside the root (relative, so they can be resolved beneath a root fd). */
#define TRUSTED_DIR "data/trusted"
#define TRUSTED_BIN_DIR "data/bin"
#define TRUSTED_SECRETS_DIR "data/.secrets"
#define TRUSTED_SUDOERS_DIR "etc/sudoers.d"
#define TRUSTED_SUDOERS_MAIN "etc/sudoers"
#define TRUSTED_DROPIN_NAME "pistis-trusted"
#define TRUSTED_SECURE_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* The drop-in's Defaults for the trusted commands (docs/trusted.md, "The sudoers drop-in").
 * Command-specific Defaults are applied after global, host, user and runas ones, so each
 * setting here holds whatever the image's sudoers say elsewhere: a fresh environment with
 * nothing kept or checked in from the caller (!env_check: sudo otherwise passes its
 * caller's TZ, LANG, LC_*, LANGUAGE, LINGUAS, COLORTERM), no variables from the command
 * line, no environment files, the caller's fds closed (closefrom=3, not to be overridden
 * with -C), pi-tools' own groups (not the caller's, whatever -P says), both ids changed
 * (!stay_setuid), a fixed PATH and a private umask. */
#define TRUSTED_DEFAULTS                                                                           \
	"env_reset, !env_keep, !env_check, !setenv, !env_file, !restricted_env_file, "             \
	"closefrom=3, !closefrom_override, !preserve_groups, !stay_setuid, "                       \
	"secure_path=\"" TRUSTED_SECURE_PATH "\", umask=0077, umask_override, !use_pty"

/* How every drop-in this release writes with at least one command ends: its Defaults line
 * and its rule. One written by another release (a plain machine's /etc outlives a pistisd
 * upgrade) ends otherwise and is not believed until `trusted install` rewrites it
 * (trusted_dropin_text_current). */
#define TRUSTED_DROPIN_TAIL                                                                        \
	"\nDefaults!PISTIS_TRUSTED " TRUSTED_DEFAULTS "\n"                                         \
	"%pi-sandbox ALL = (pi-tools) CWD=/ NOPASSWD: NOSETENV: PISTIS_TRUSTED\n"
#define TRUSTED_DROPIN_SIZE_MAX (64 * 1024) /* 256 commands of ~100 bytes, and room */

/* --- pure: names, generated files, parsers (render.c) ------------------------------ */

/* Whether drop-in text is in the form this release writes: it ends with
 * TRUSTED_DROPIN_TAIL (its Defaults line and rule exactly as rendered). Not whether its
 * digests are those of the scripts (install and check prove that with sudo -l). Inline:
 * pistisd-entry, which links no trusted code, asks it too (entry_trusted_restore). */
static inline bool trusted_dropin_text_current(const char *text, size_t len)
{
	static const char tail[] = TRUSTED_DROPIN_TAIL;

	return text && len >= sizeof(tail) - 1 &&
	       !memcmp(text + len - (sizeof(tail) - 1), tail, sizeof(tail) - 1);
}

/* ^[a-z0-9][a-z0-9_-]{0,63}$: no '.', '/', '~', upper case, spaces or anything that sudo,
 * a shell or a path could read twice. */
bool trusted_name_valid(const char *name);

/* What a person reads when trusted_adopt_from_bin refused NAME with r (-ENOENT, -EPERM,
 * -EEXIST, -ENOEXEC), one line in buf (the name is valid: nothing to escape); NULL for any
 * other r, a system error the caller reports itself. */
const char *trusted_adopt_strerror(int r, const char *name, char *buf, size_t size);

struct trusted_entry {
	char name[TRUSTED_NAME_MAX + 1];
	char digest[SHA256_HEX_SIZE]; /* lower-case hex */
	uid_t uid;		      /* owner and mode of the script (trusted_list) */
	mode_t mode;
	bool clean_start; /* its #! line is `PISTISD trusted-interp INTERP` (trusted_list) */
};

/* The sudoers drop-in for these commands (n may be 0: a file with no rule). */
int trusted_dropin_render(const struct trusted_entry *entries, size_t n, char **ret);

/* The wrapper /data/bin/NAME. With pistisd_path (pistisd as found in the root, absolute,
 * at most TRUSTED_PISTISD_PATH_MAX bytes) a script whose interpreter is
 * `PISTISD trusted-exec`; without, the /bin/sh script that execs
 * `SUDO -n -u pi-tools -- /data/trusted/NAME "$@"`. Paths must be absolute and made of
 * [A-Za-z0-9/_.+-] only. */
#define TRUSTED_EXEC_VERB "trusted-exec"
#define TRUSTED_WRAPPER_MARK "# pistis trusted command '"
#define TRUSTED_PISTISD_PATH_MAX 96
int trusted_wrapper_render(const char *sudo_path, const char *pistisd_path, const char *name,
			   char **ret);

/* True when text is a wrapper pistisd wrote (either form): a "#!" line, then the mark. */
bool trusted_wrapper_is_ours(const char *text, size_t len);

/* The #! line of a script as the kernel reads it: the interpreter and its one optional
 * argument (the trimmed rest of the line, never split). 1 with a #! line, 0 without one,
 * -EINVAL when it does not fit the kernel's TRUSTED_SHEBANG_MAX bytes, holds a NUL or names
 * no interpreter. */
#define TRUSTED_SHEBANG_MAX 256
int trusted_shebang_parse(const char *text, size_t len, char interp[TRUSTED_SHEBANG_MAX],
			  char arg[TRUSTED_SHEBANG_MAX]);

/* A clean start (docs/trusted.md): a script whose #! line is
 * `#!PISTISD trusted-interp INTERP [ARG]` runs INTERP [ARG] SCRIPT ARGS… through
 * `pistisd trusted-interp`, which first resets what sudo hands on from the caller (ignored
 * signals, the signal mask, lowered soft limits). arg is the #! line's argument; INTERP and
 * ARG are split from it as the kernel splits a #! line (the first word, then the trimmed rest
 * as one argument). 1 when arg is of that form (inner and inner_arg set), 0 when it is not,
 * -EINVAL when it is but names no interpreter. */
#define TRUSTED_INTERP_CMD "trusted-interp"
int trusted_interp_split(const char *arg, char inner[TRUSTED_SHEBANG_MAX],
			 char inner_arg[TRUSTED_SHEBANG_MAX]);
/* Is the #! interpreter pistisd (by its name: pistisd or pistisd-musl)? Only then does its
 * argument mean trusted-interp: another interpreter takes "trusted-interp /bin/sh" as a
 * file name, which env and sh look up from the working directory. */
bool trusted_interp_is_pistisd(const char *interp);
/* Whether the caller's arguments reach the script as its arguments when the kernel runs
 * `INTERP ARG SCRIPT ARGS…` (arg: the #! line's argument, not pistisd's trusted-interp or
 * env's, which are checked apart). For the interpreters pistis knows (shells, python, perl,
 * ruby, node, php, lua, tclsh), ARG may hold only flags that leave SCRIPT the program and
 * ARGS its arguments; for any other, no option at all (`#!/bin/sed -f`, `#!/usr/bin/awk -f`:
 * the caller's `-e CMD`, `-f FILE` or input file operands would run or be read as
 * pi-tools); sed, awk, jq, make and expect (and their variants) are refused with no option
 * too (`#!/bin/sed`: GNU getopt takes the caller's `-e CMD` after SCRIPT). 0 fine, 1
 * refused with the reason in why. */
int trusted_interp_arg_check(const char *interp, const char *arg, char *why, size_t why_size);

/* The loader a binary names (its PT_INTERP), from the first len bytes of the file, as the
 * kernel's ELF loader reads it (either class and byte order). 1 and the path in interp (may
 * be empty or relative: the caller judges it); 0: not ELF, not a program the kernel runs
 * (ET_EXEC/ET_DYN), or no PT_INTERP (static); -EINVAL: malformed, two PT_INTERPs, or the
 * headers or the path not within len, or the path not shorter than size. */
#define TRUSTED_HEAD_MAX 65536	      /* bytes read of a script or interpreter to check it */
#define TRUSTED_SCRIPT_PATHS_MAX 4096 /* absolute paths one script may name (each checked) */
int trusted_elf_interp(const void *buf, size_t len, char *interp, size_t size);

/* What the dynamic loader reads from a program or library before any of its code runs: the
 * strings of DT_RPATH, DT_RUNPATH and of the entries that name a library it maps (DT_NEEDED,
 * DT_FILTER, DT_AUXILIARY, and DT_AUDIT, DT_DEPAUDIT: ':'-separated lists glibc loads as audit
 * modules). PT_DYNAMIC is found through the program headers and read at its address as the
 * loader does (mapped to a file offset through the PT_LOAD that holds it, which must agree
 * with its p_offset); DT_STRTAB is an address mapped the same way, and each string must end
 * within DT_STRSZ. Read with pread (the table and the strings may lie anywhere in the file),
 * so it takes a reader; either class and byte order. */
#define TRUSTED_ELF_FILE_MAX (256ULL << 20) /* bytes of a file whose dynamic section is read */
#define TRUSTED_ELF_DYN_MAX 1024	    /* dynamic entries read, DT_NULL included */
#define TRUSTED_ELF_LOADS_MAX 64	    /* library names per file; libraries per program */
#define TRUSTED_ELF_STR_MAX 4096	    /* bytes of one string, NUL not counted */
struct trusted_elf_load {
	const char *tag; /* "NEEDED", "FILTER", "AUXILIARY", "AUDIT", "DEPAUDIT" */
	char *name;
};
struct trusted_elf_dyn {
	bool dynamic;	       /* has PT_DYNAMIC */
	char *rpath, *runpath; /* NULL when absent */
	size_t n;
	struct trusted_elf_load loads[TRUSTED_ELF_LOADS_MAX];
};
/* Read exactly len bytes at off (the parser checked off + len <= size): 0 or -errno. */
typedef int (*trusted_elf_read_fn)(void *userdata, uint64_t off, void *buf, size_t len);
/* 1 and *ret filled (free with trusted_elf_dyn_done, also after an error); 0: not ELF, or
 * not a program or library the loader maps (ET_EXEC/ET_DYN); -EINVAL with a one-line reason
 * in why when malformed, ambiguous or over a limit (refuse: fail closed); -errno from read. */
int trusted_elf_dynamic(trusted_elf_read_fn read, void *userdata, uint64_t size,
			struct trusted_elf_dyn *ret, char *why, size_t why_size);
int trusted_elf_dynamic_buf(const void *buf, size_t len, struct trusted_elf_dyn *ret, char *why,
			    size_t why_size);
void trusted_elf_dyn_done(struct trusted_elf_dyn *d);

/* The next name /etc/ld.so.preload lists, as glibc's loader reads the file: '#' starts a
 * comment up to the end of the line; names are separated by blanks, tabs, newlines and ':'.
 * Returns the name's length (0: no more) and its start in *ret_name; *pos advances. */
size_t trusted_preload_next(const char *text, size_t len, size_t *pos, const char **ret_name);

/* The next absolute path a script names, after its #! line: a '/' that does not follow a
 * byte of a name, a '/' or a ':' (so no "$HOME/bin", "a/b", URLs or PATH lists), up to the
 * first byte outside [A-Za-z0-9._+@%~/-]; words of PATH_MAX bytes or more are skipped.
 * Comments are not told apart: a program named only in one is checked too (refusing a
 * script for a comment is the safe mistake). Start with *pos 0 and *line 1; returns true
 * with the path in ret_path (PATH_MAX bytes) and *line its line, false at the end. */
bool trusted_script_path_next(const char *text, size_t len, size_t *pos, size_t *line,
			      char *ret_path);

/* The name in a trusted-exec script path: path must be exactly "/data/bin/NAME" with a
 * valid NAME; -EINVAL otherwise. */
int trusted_exec_name(const char *path, char ret_name[TRUSTED_NAME_MAX + 1]);

/* Where sudo is looked for, in this order, inside the root (trusted_find_sudo) and by
 * trusted-exec at run time; and where pistisd is looked for by add and install. */
#define TRUSTED_SUDO_PATHS "/usr/bin/sudo", "/bin/sudo", "/usr/local/bin/sudo", "/usr/sbin/sudo"
#define TRUSTED_PISTISD_PATHS                                                                      \
	"/usr/local/bin/pistisd", "/usr/bin/pistisd", "/usr/local/sbin/pistisd", "/usr/sbin/pistisd"

/* True when the sudoers text has an `@includedir /etc/sudoers.d` (or `#includedir`) line. */
bool trusted_sudoers_has_includedir(const char *text, size_t len);

/* One command of `sudo -l -U USER` output. */
struct trusted_sudo_cmd {
	char runas[64];		      /* "pi-tools", "ALL : ALL"… (truncated, never split) */
	char digest[SHA256_HEX_SIZE]; /* "" when the rule pins no sha256 digest */
	char command[256];	      /* path and, when the rule has any, its arguments */
	bool nopasswd;
	bool setenv;   /* SETENV: tag: the caller may pass variables */
	bool options;  /* an option other than CWD=/ (CHROOT=, TIMEOUT=, …) or other digest */
	bool cwd_root; /* CWD=/ */
};

struct trusted_sudo_list {
	bool not_allowed; /* "User … is not allowed to run sudo" */
	size_t n;	  /* commands parsed */
	bool truncated;	  /* more than TRUSTED_LIST_MAX commands, or an over-long field */
	/* The "Runas and Command-specific defaults" section: one entry a line, its tokens
	 * joined by single spaces ("Defaults!sha256:… /data/trusted/x env_reset, …"). */
	char defaults[8192];
	struct trusted_sudo_cmd cmds[];
};
#define TRUSTED_LIST_MAX 512

/* Parse the "User U may run the following commands on H:" section of `sudo -l -U U`
 * (line wrapping tolerated). -EBADMSG when the text has neither that section nor the
 * "not allowed" line. *ret is malloc'd. */
int trusted_sudo_list_parse(const char *text, size_t len, struct trusted_sudo_list **ret);

/* Compare a listing against what the drop-in grants: every listed command must be one of
 * entries (runas pi-tools, CWD=/, NOPASSWD, no SETENV, its exact digest) and every entry must
 * be listed; every entry must be under the drop-in's own Defaults line (TRUSTED_DEFAULTS,
 * exactly), and the listing may hold no other runas- or command-specific Defaults. Returns
 * 0 when exact, else 1 and writes a one-line reason into why. */
int trusted_sudo_list_verify(const struct trusted_sudo_list *l, const struct trusted_entry *entries,
			     size_t n, char *why, size_t why_size);

/* --- on the image (store.c, install.c, setuid.c) ----------------------------------- */

enum {
	TRUSTED_DRY_RUN = 1 << 0,
};

/* The one predicate for "this image has trusted commands", which decides whether agents
 * run with no_new_privs (docs/trusted.md, "The no_new_privs conflict, decided"): true when
 * etc/sudoers.d/pistis-trusted beneath root_fd (no symlink on the way) is a non-empty
 * regular file owned by root and writable by neither group nor others, in the form this
 * release writes (trusted_dropin_state: TRUSTED_DROPIN_CURRENT), data and
 * data/trusted are directories root's alone (a rule that let agents write there would let
 * them change a script between sudo's digest and its read; trusted_open_dir's check), and
 * every shared tree that exists is mounted nosuid (trusted_shared_tree_suid), and so is
 * every tree a write rule names (trusted_write_tree_suid), and pistisd holds CAP_SYS_ADMIN
 * (trusted_setuid_possible). Checked on opened fds; any error (absent, a symlink, loose
 * owner or mode) is false. */
bool trusted_configured(int root_fd);

/* etc/sudoers.d/pistis-trusted beneath root_fd, opened without following a link: */
enum {
	TRUSTED_DROPIN_NONE,	/* absent */
	TRUSTED_DROPIN_CURRENT, /* root's, no group/other write, non-empty, in this form */
	TRUSTED_DROPIN_LOOSE,	/* a link, not a regular file, another owner or mode, empty */
	TRUSTED_DROPIN_OTHER,	/* believed, but not in the form this release writes (another
				 * release's: trusted_dropin_text_current), or unreadable */
};
int trusted_dropin_state(int root_fd);
/* pistisd holds CAP_SYS_ADMIN and runs without no_new_privs, without which no agent can
 * run without no_new_privs (trusted_configured is false then). */
bool trusted_setuid_possible(void);
/* Why not (a static text, no names in it), or NULL where it is possible. */
const char *trusted_setuid_blocker(void);

/* /data/bin is first on every agent's PATH: a program there that is not root's alone runs
 * as whichever agent types its name, and its owner (an agent, in an earlier life of the
 * volume or under a looser configuration) chooses what it does. 0 when every entry but the
 * subdirectories (not on PATH) is root's and writable by root alone (a symlink: root's)
 * or there is no /data/bin (why says so), *ret_n the entries looked at; 1 with why naming up to three
 * that are not; <0 when /data/bin cannot be opened (a symlink: -ELOOP or -ENOTDIR) or is
 * not root's alone (-EPERM), why saying which. Names and owners only, nothing opened but the directory;
 * more than TRUSTED_DATA_BIN_MAX entries is 1 too (not all looked at). A root's symlink is
 * taken as the operator's: its target is not judged. */
#define TRUSTED_DATA_BIN_MAX 65536u
int trusted_data_bin_check(int root_fd, unsigned *ret_n, char *why, size_t why_size);

/* The directories agents share (absolute, inside the root). Without no_new_privs a setuid file
 * one agent leaves in any of them runs as that agent for the others, so agents get setuid
 * (trusted commands) only while each that exists is mounted nosuid. pistisd-entry makes them
 * nosuid,nodev where it can; pistisd check reports them. */
#define TRUSTED_SHARED_TREES                                                                       \
	{                                                                                          \
		"/data", TRUSTED_WORKSPACE_TREES, TRUSTED_SCRATCH_TREES                            \
	}
/* The agents' working trees: /workspaces (the projects, as the seed's path table names them)
 * and /workspace (the WORKDIR of the seed's example image, where the server puts the
 * repository). Both are write by default (policy/defaults.json), so both are shared. */
#define TRUSTED_WORKSPACE_TREES "/workspaces", "/workspace"
/* Those besides /data and the workspaces (the image's world-writable scratch directories), for
 * pistisd-entry's hardening and pistisd check, which name those two on their own. */
#define TRUSTED_SCRATCH_TREES "/tmp", "/dev/shm", "/var/tmp", "/run/lock"
/* Whether users other than root may write a directory of this mode and group: others, or a
 * group other than root's. Such a one of TRUSTED_SCRATCH_TREES must be sticky and root's
 * (pistisd check's sticky_shared; pistisd-entry adds the bit to one of root's). */
static inline bool trusted_others_write(mode_t mode, gid_t gid)
{
	return (mode & S_IWOTH) || ((mode & S_IWGRP) && gid != 0);
}

/* The first of TRUSTED_SHARED_TREES beneath root_fd that exists and is not mounted nosuid,
 * or holds a mount beneath it that is not (trusted_tree_mounts_suid; its name in which), 0
 * when none is, -errno when one cannot be looked at (which names it; counts as not
 * nosuid). */
int trusted_shared_tree_suid(int root_fd, char *which, size_t size);

/* Every mount at or beneath the directory fd (what /proc/self/mountinfo names beneath the
 * path /proc/self/fd/N reads), each judged by its mount point opened again without
 * following a symlink, is nosuid: 0, 1 with which naming the first that is not, -errno when
 * that cannot be told (counts as not nosuid). A volume inside /workspaces or a tmpfs inside
 * /tmp is a tree agents share as much as the one it is in. */
int trusted_tree_mounts_suid(int fd, char *which, size_t size);

/* The same for the trees the path rules let agents write (access "write" in
 * /data/pistis/rules.json beneath root_fd, or policy/defaults.json where there is none): a
 * file agent A creates there and makes setuid runs as A for agent B, on any mount that
 * honours the bit. 1 with the rule's path in which for the first that exists and is not
 * mounted nosuid (or the mount point beneath it that is not), 0 when none is, -errno when the rules cannot be read or a rule path
 * cannot be looked at (which names it; counts as not nosuid). */
int trusted_write_tree_suid(int root_fd, char *which, size_t size);

/* Open the root ("/" or a directory) as an O_PATH fd. */
int trusted_root_open(const char *root, int *ret_fd);

/* One add, remove, adopt or install at a time in a root: each renders the drop-in from
 * what /data/trusted holds when it reads it, so two at once installed whichever finished
 * last (a script added beside it missing from sudo, a removed one still granted). An
 * exclusive flock on TRUSTED_LOCK (made root 0600 in root-only /data/pistis: in a
 * directory agents may read, any agent could open it and hold the lock for ever), tried
 * every 50 ms for up to wait_ms. The fd holds the lock until it is closed. -EWOULDBLOCK
 * when another still holds it then; -EPERM when /data/pistis or the lock file is not
 * root's alone, -EBADFD when the lock file is not a regular file with one link. */
#define TRUSTED_LOCK "data/pistis/trusted.lock"
#define TRUSTED_LOCK_WAIT_S 60
int trusted_lock(int root_fd, unsigned wait_ms, int *ret_fd);

/* Copy a script from an fd the caller opened (regular file, owned by root, writable by no one
 * else: -EPERM otherwise) to /data/trusted/NAME, root 0755, and write the wrapper
 * /data/bin/NAME. -ENOEXEC, with the reason in why, when its #! interpreter fails
 * trusted_interp_check or secure_path trusted_secure_path_check. -EEXIST when /data/bin/NAME
 * is there and is not our wrapper (trusted_adopt_from_bin takes that one). Does not touch
 * sudoers: call trusted_install() after. */
int trusted_add_fd(const char *root, const char *name, int script_fd,
		   char ret_digest[SHA256_HEX_SIZE], char *why, size_t why_size);

/* sudo's digest pins a script's bytes, not the program its #! line names. 0 when whatever
 * the kernel runs for this text is root's alone: the interpreter an absolute path that,
 * resolved in the root (symlinks followed), passes only through root-owned directories
 * no one else may write and ends at a root-owned file no one else may write; the same for
 * that file's own #! (up to the kernel's 4 levels) and for `env NAME` looked up in
 * secure_path (env options refused); for an ELF program, its loader (PT_INTERP) the same
 * way, and the libraries the dynamic loader maps into it from its RPATH/RUNPATH,
 * DT_NEEDED paths and /etc/ld.so.preload (trusted/dyn.c; $ORIGIN is /data/trusted). Text
 * without #! is 0 (sudo execs it itself). 1 with a one-line reason in why (what names the
 * script: text, as a reason), -errno. text: the whole file (a binary's dynamic section may
 * lie anywhere). */
int trusted_interp_check(int root_fd, const char *what, const char *text, size_t len, char *why,
			 size_t why_size);

/* Every directory of TRUSTED_SECURE_PATH inside the root, the directories on the way to it
 * and the nearest existing parent of a missing one: root's alone. 0, 1 with why, -errno. */
int trusted_secure_path_check(const char *root, char *why, size_t why_size);

/* trusted_interp_check for each listed script in /data/trusted (the first that fails). */
int trusted_scripts_interp_check(const char *root, const struct trusted_entry *v, size_t n,
				 char *why, size_t why_size);

/* Open SCRIPT for trusted_add_fd: O_NOFOLLOW (a symlink is -ELOOP), never blocks on a FIFO. */
int trusted_open_script(const char *path, int *ret_fd);

/* Remove /data/trusted/NAME and its wrapper; -ENOENT when there is no such command. */
int trusted_remove(const char *root, const char *name);

/* Move a script an operator put in /data/bin/NAME into /data/trusted/NAME and put the
 * wrapper in its place. 0 when adopted, 1 when /data/bin/NAME is already the wrapper,
 * -ENOENT when absent, -EPERM when the file is not root-owned or is writable by others
 * (an agent could have planted it). */
int trusted_adopt_from_bin(const char *root, const char *name);

/* The commands in /data/trusted with their digests, sorted by name. Files whose name is
 * not valid are skipped and counted in *ret_skipped. */
int trusted_list(const char *root, struct trusted_entry **ret, size_t *ret_n, size_t *ret_skipped);

/* Create /data/.secrets (pi-tools, 0700, no ACL) if missing, or put an existing one of
 * pi-tools' or root's right; 1 with why when it cannot be trusted: anyone else's, a link,
 * /data not root's alone, or a node inside that is not pi-tools' or root's (looked at by
 * name and owner, never opened or read but directories). */
int trusted_secrets_ensure(const char *root, char *why, size_t why_size);

/* Find sudo (setuid root, regular, root-owned) and visudo inside the root; paths as seen
 * inside it. -ENOENT when absent. */
int trusted_find_sudo(const char *root, char *ret_sudo, size_t sudo_size, char *ret_visudo,
		      size_t visudo_size);

/* Find pistisd inside the root (TRUSTED_PISTISD_PATHS: regular, root-owned, writable by
 * no one else, executable by all); the path as seen inside it. -ENOENT when absent. */
int trusted_find_pistisd(const char *root, char *ret, size_t size);

/* Rewrite every trusted command's wrapper that is absent or one pistisd wrote but not
 * exactly what add writes now (an older form, another pistisd path). Returns the number
 * rewritten or -errno. */
int trusted_wrappers_refresh(const char *root);

/* Run argv (argv[0] an absolute path inside the root) as root in a child chrooted into
 * root (not when root is "/"), with a clean environment, stdin /dev/null, and stdout+stderr
 * captured (at most TRUSTED_OUTPUT_MAX bytes). Returns the exit status (0..255, 128+sig)
 * or -errno. */
int trusted_run_in_root(const char *root, char *const argv[], char **ret_output);

struct trusted_install_report {
	size_t n;	    /* commands in the drop-in */
	bool includedir;    /* /etc/sudoers includes /etc/sudoers.d */
	bool removed;	    /* no command left: the drop-in was removed */
	bool replaced;	    /* the drop-in in place is the one this call wrote */
	bool withdrawn;	    /* sudo -l showed more than the trusted commands: drop-in removed */
	int verified;	    /* agents whose sudo -l matched exactly */
	int mismatched;	    /* agents whose sudo -l did not */
	char message[1024]; /* visudo's or sudo's complaint, or the mismatch (text, escaped) */
};

/* Regenerate the drop-in from /data/trusted: write it under a name sudo ignores, check it
 * with the root's visudo -cf, rename it into place, check the whole configuration, and
 * confirm with sudo -l -U for each agent (members of pi-sandbox; or only `agent` when not
 * NULL). Returns 0 when installed and confirmed, 1 when a check failed (the message says
 * which; a drop-in that fails visudo is never installed, one whose sudo -l shows more than
 * the trusted commands is removed: withdrawn), -errno on system errors. */
int trusted_install(const char *root, const char *agent, struct trusted_install_report *ret);

/* The sudo -l half of trusted_install on its own (adds to rep's counters and message). */
int trusted_verify_agents(const char *root, const char *agent, struct trusted_install_report *rep);

/* After `users ensure` wrote an agent's lines (a new agent, or one made again after the
 * container was rebuilt from its image): install asked sudo -l only of the agents that
 * existed then, and with none (an install at start-up, before any agent) of no one, so a
 * rule of the image's or the machine's for %pi-sandbox reached every agent made later.
 * Where trusted commands are configured, sudo -l -U this agent now; more than the trusted
 * commands, or no answer, and the drop-in is withdrawn, as install does, with one line
 * logged. Returns 0 (nothing configured, or confirmed), 1 (withdrawn), or -errno (and
 * logged) when the drop-in could not be removed. */
int trusted_confirm_new_agent(const char *root, const char *agent);

/* visudo -c over the root's whole sudo configuration; 0 ok, 1 with visudo's message. */
int trusted_check_sudoers(const char *root, char *why, size_t why_size);

/* 0 when /data/.secrets is a pi-tools 0700 directory without ACLs whose every node is
 * pi-tools' or root's, 1 with a reason otherwise. */
int trusted_secrets_check(const char *root, char *why, size_t why_size);

/* 0 when /data/bin/NAME is exactly the wrapper add would write, 1 with a reason. */
int trusted_wrapper_check(const char *root, const char *name, char *why, size_t why_size);

/* Compare the installed drop-in with what trusted_install would write; 0 same, 1 differs. */
int trusted_dropin_current(const char *root, char *why, size_t why_size);

/* Walk the image (one filesystem; not /proc, /sys, /dev, /data) and remove setuid/setgid
 * and file capabilities (security.capability) from every regular file but sudo and the kept
 * paths. cb sees each setid or capability file. */
struct trusted_setid_file {
	const char *path; /* inside the root, for reports only */
	mode_t mode;	  /* before */
	uid_t uid;
	gid_t gid;
	bool kept;
	bool caps;    /* carries file capabilities (security.capability) */
	bool changed; /* bits and capabilities removed (false in a dry run) */
};
typedef void (*trusted_setid_cb)(const struct trusted_setid_file *f, void *userdata);
/* 0 done, 1 done but for directories deeper than the walk's bound (why says which), <0 an
 * error (the walk went on past it: what it reached was still cleared). */
int trusted_harden_setuid(const char *root, const char *const *keep, size_t n_keep, unsigned flags,
			  trusted_setid_cb cb, void *userdata, char *why, size_t why_size);
