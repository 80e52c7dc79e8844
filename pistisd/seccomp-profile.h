#pragma once

/* The agent seccomp profile (a data table in seccomp-profile.c) compiled once, at start-up,
 * into a ready BPF program that the spawn child installs with one seccomp(2) call. */

#include <linux/filter.h>
#include <stddef.h>

struct seccomp_profile_bpf {
	struct sock_filter *insns; /* malloc'd */
	unsigned short len;
};

/* Compile the table with libseccomp for the native architecture (bad arch: KILL_PROCESS;
 * on x86_64 x32 numbers are killed too). Returns 0 or -errno. */
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
};
extern const struct seccomp_profile_rule seccomp_profile_rules[];
extern const size_t seccomp_profile_n_rules;
