#pragma once

/* The agent seccomp profile: a data table in seccomp-profile.c, compiled into BPF at BUILD
 * time (pistisd/seccomp-gen.c prints it into $(B)/gen/<libc>/seccomp-bpf.gen.h, which
 * seccomp-bpf.c embeds), so the spawn child installs a ready program with one seccomp(2)
 * call and pistisd never runs libseccomp. The unit test compiles the table again at run
 * time and requires the very same bytes, so the two cannot drift. */

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>

struct seccomp_profile_bpf {
	const struct sock_filter *insns;
	unsigned short len;
	bool owned; /* insns malloc'd (seccomp_profile_compile), else static */
};

/* The highest native system call number the table was reviewed against: file_setattr
 * (469), Linux 6.17, x86_64 and the generic table (aarch64). A native call numbered above
 * it answers ENOSYS without being looked at (seccomp-profile.c, prepend_ceiling). Raise it
 * only after reading what each new call does, and adding a rule where one crosses a wall. */
#define SECCOMP_PROFILE_NR_MAX 469

/* The program compiled at build time (seccomp-bpf.c): no allocation, no libseccomp. */
void seccomp_profile_load(struct seccomp_profile_bpf *ret);
/* The libseccomp version and architecture it was compiled with, for --version and tests. */
extern const char seccomp_profile_built_with[];

/* Compile the table with libseccomp for the native architecture (bad arch: KILL_PROCESS;
 * on x86_64 x32 numbers are killed too; binary-tree layout). The build-time generator and
 * the drift test use it. Returns 0 or -errno. */
int seccomp_profile_compile(struct seccomp_profile_bpf *ret);
void seccomp_profile_free(struct seccomp_profile_bpf *bpf);

/* One table entry, exported for tests and docs: syscall name, action and errno. */
enum seccomp_profile_action {
	SECCOMP_PROFILE_EPERM,
	SECCOMP_PROFILE_ENOSYS,
};
struct seccomp_profile_rule {
	const char *name;
	enum seccomp_profile_action action;
	/* Optional argument condition: applies when (arg[argn] & mask) == value (MASKED_EQ),
	 * or arg[argn] > value when gt is set. argn < 0: unconditional. */
	int argn;
	unsigned long long mask;
	unsigned long long value;
	int gt;
	/* The call's number where libseccomp knows it by no name (calls newer than the
	 * libseccomp of the build: open_tree_attr, listmount, statmount are not in Debian 12's
	 * 2.5.4); 0: the name must resolve. Such calls are numbered alike on every
	 * architecture since 5.1 (asm-generic/unistd.h), except the ones with an offset
	 * (alpha, mips, ia64), where the number is not used. */
	int nr;
	/* Optional second condition, ANDed with the first: (arg[argn2] & mask2) == value2.
	 * mask2 == 0: none (the entries above leave these three zero). */
	int argn2;
	unsigned long long mask2;
	unsigned long long value2;
};
extern const struct seccomp_profile_rule seccomp_profile_rules[];
extern const size_t seccomp_profile_n_rules;
