/* The seccomp profile of every agent process, as data. The default is ALLOW: this is a
 * deny list of the calls that cross the sandbox's walls (namespaces, mounts, tracing other
 * processes, kernel keyrings, modules, raw I/O, terminal injection, exotic sockets).
 * docs/spawn.md explains each group. Compiled with libseccomp at build time by
 * seccomp-gen.c (this table is its only input) and embedded as raw BPF by seccomp-bpf.c,
 * so a spawn only pays for one seccomp(2) call. */
#include "pistisd/seccomp-profile.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/macro.h"

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
/* <linux/fcntl.h> of Linux 6.19: F_LINUX_SPECIFIC_BASE + 16 */
#define SECCOMP_PROFILE_F_SETDELEG 1040
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Designated initializers: a field a macro does not name is zero (mask2 0: no second
 * condition; nr 0: the name must resolve). */
#define DENY(n)                                                                                    \
	{                                                                                          \
		.name = n, .action = SECCOMP_PROFILE_EPERM, .argn = -1                             \
	}
#define NOSYS(n)                                                                                   \
	{                                                                                          \
		.name = n, .action = SECCOMP_PROFILE_ENOSYS, .argn = -1                            \
	}
/* arg compared on its low 32 bits: the kernel reads an int/unsigned int, so junk in the
 * upper half must not dodge the rule. */
/* A call libseccomp may not know by name: n is resolved first, nr used only if that fails. */
#define DENY_NR(n, num)                                                                            \
	{                                                                                          \
		.name = n, .action = SECCOMP_PROFILE_EPERM, .argn = -1, .nr = num                  \
	}
#define DENY_ARG32(n, a, v)                                                                        \
	{                                                                                          \
		.name = n, .action = SECCOMP_PROFILE_EPERM, .argn = a, .mask = 0xffffffffULL,      \
		.value = v                                                                         \
	}
#define DENY_FLAG(n, a, f)                                                                         \
	{                                                                                          \
		.name = n, .action = SECCOMP_PROFILE_EPERM, .argn = a, .mask = f, .value = f       \
	}
#define DENY_GT(n, a, v)                                                                           \
	{                                                                                          \
		.name = n, .action = SECCOMP_PROFILE_EPERM, .argn = a, .value = v, .gt = 1         \
	}

/* Socket families other than AF_UNIX (1), AF_INET (2), AF_INET6 (10), AF_NETLINK (16):
 * 0, 3..9, 11..15 by value and everything above 16 (a value with upper bits set is also
 * "above 16" as a 64-bit compare, so it is denied too). */
#define DENY_FAMILIES(n)                                                                           \
	DENY_ARG32(n, 0, 0), DENY_ARG32(n, 0, 3), DENY_ARG32(n, 0, 4), DENY_ARG32(n, 0, 5),        \
		DENY_ARG32(n, 0, 6), DENY_ARG32(n, 0, 7), DENY_ARG32(n, 0, 8),                     \
		DENY_ARG32(n, 0, 9), DENY_ARG32(n, 0, 11), DENY_ARG32(n, 0, 12),                   \
		DENY_ARG32(n, 0, 13), DENY_ARG32(n, 0, 14), DENY_ARG32(n, 0, 15),                  \
		DENY_GT(n, 0, 16)

/* socket(fam, *, protocol) with protocol in [base, base + size), size a power of two and
 * base a multiple of it, compared on the low 32 bits of both. */
#define PROTO_BLOCK(fam, base, size)                                                               \
	{                                                                                          \
		.name = "socket", .action = SECCOMP_PROFILE_EPERM, .argn = 2,                      \
		.mask = 0xffffffffULL & ~((size)-1ULL), .value = base, .mask2 = 0xffffffffULL,     \
		.value2 = fam                                                                      \
	}

/* socket(fam, *, protocol) with protocol > max on the whole 64-bit value (junk in the
 * upper half included). */
#define PROTO_ABOVE(fam, max)                                                                      \
	{                                                                                          \
		.name = "socket", .action = SECCOMP_PROFILE_EPERM, .argn = 2, .value = max,        \
		.gt = 1, .mask2 = 0xffffffffULL, .value2 = fam                                     \
	}

/* socket(2) of AF_INET or AF_INET6 for any protocol but IP's default (0), ICMP (1), TCP
 * (6), UDP (17), ICMPv6 (58), UDP-Lite (136) and MPTCP (262). An unprivileged socket() of
 * any other protocol makes the kernel load its module where it is not built in
 * (request_module "net-pf-2-proto-N"), and the rarely used ones have a record of local
 * privilege escalations: DCCP (CVE-2017-6074), SCTP (CVE-2019-8956, CVE-2021-23133), L2TP
 * (CVE-2016-10200), and IPPROTO_SMC (256) makes an SMC socket since 6.11. The complement
 * of the allowed set, per family: arg2 > 262 (the whole 64-bit value, so junk in the upper
 * half is EPERM too), and each gap between allowed values as aligned blocks, compared on
 * the low 32 bits (what the kernel reads): [2,5] [7,16] [18,57] [59,135] [137,261].
 * test-spawn socket_protocols_only_the_common_ones tries every value up to 1023, junk in
 * the upper half and random ones against that definition. A protocol of 0 never loads a
 * module (there is no "proto-0" alias), whatever the type. */
#define DENY_INET_PROTOCOLS(fam)                                                                   \
	PROTO_ABOVE(fam, 262), PROTO_BLOCK(fam, 2, 2), PROTO_BLOCK(fam, 4, 2),                     \
		PROTO_BLOCK(fam, 7, 1), PROTO_BLOCK(fam, 8, 8), PROTO_BLOCK(fam, 16, 1),           \
		PROTO_BLOCK(fam, 18, 2), PROTO_BLOCK(fam, 20, 4), PROTO_BLOCK(fam, 24, 8),         \
		PROTO_BLOCK(fam, 32, 16), PROTO_BLOCK(fam, 48, 8), PROTO_BLOCK(fam, 56, 2),        \
		PROTO_BLOCK(fam, 59, 1), PROTO_BLOCK(fam, 60, 4), PROTO_BLOCK(fam, 64, 64),        \
		PROTO_BLOCK(fam, 128, 8), PROTO_BLOCK(fam, 137, 1), PROTO_BLOCK(fam, 138, 2),      \
		PROTO_BLOCK(fam, 140, 4), PROTO_BLOCK(fam, 144, 16), PROTO_BLOCK(fam, 160, 32),    \
		PROTO_BLOCK(fam, 192, 64), PROTO_BLOCK(fam, 256, 4), PROTO_BLOCK(fam, 260, 2)

/* socket(AF_NETLINK, *, protocol) likewise (request_module "net-pf-16-proto-N"): only
 * NETLINK_ROUTE (0: ip, glibc's getaddrinfo), USERSOCK (2), SOCK_DIAG (4: ss), SELINUX
 * (7), AUDIT (9: sudo and PAM log there), KOBJECT_UEVENT (15: udev monitors) and GENERIC
 * (16). The others are administration (ISCSI 8 and SCSITRANSPORT 18: CVE-2021-27365, an
 * unprivileged heap overflow in the autoloaded iSCSI transport; NETFILTER 12, XFRM 6,
 * RDMA 20, CRYPTO 21, SMC 22, CONNECTOR 11) or gone from the kernel. Complement: > 16,
 * and 1, 3, 5, 6, 8, [10,11], [12,13], 14. */
#define DENY_NETLINK_PROTOCOLS                                                                     \
	PROTO_ABOVE(AF_NETLINK, 16), PROTO_BLOCK(AF_NETLINK, 1, 1), PROTO_BLOCK(AF_NETLINK, 3, 1), \
		PROTO_BLOCK(AF_NETLINK, 5, 1), PROTO_BLOCK(AF_NETLINK, 6, 1),                      \
		PROTO_BLOCK(AF_NETLINK, 8, 1), PROTO_BLOCK(AF_NETLINK, 10, 2),                     \
		PROTO_BLOCK(AF_NETLINK, 12, 2), PROTO_BLOCK(AF_NETLINK, 14, 1)

/* personality(2): only the personas Docker's default profile allows: PER_LINUX (0x0),
 * PER_LINUX32 (0x8), UNAME26 (0x20000), both (0x20008) and the query 0xffffffff; anything
 * else is EPERM (READ_IMPLIES_EXEC makes every mapping executable, ADDR_NO_RANDOMIZE turns
 * ASLR off for what the agent execs next, MMAP_PAGE_ZERO maps page 0). A filter with an
 * ALLOW default cannot hold ALLOW rules (libseccomp refuses them) and compares an argument
 * once per rule, so the complement is written as a union of single compares:
 *  - any bit of the upper half set (full 64-bit compare, as Docker's SCMP_CMP_EQ: the
 *    kernel would read only the low half, so this is stricter, never looser);
 *  - on the low 32 bits x, read as a ring of bits: bit i set and bit i+1 (mod 32) clear,
 *    i.e. a run of ones ends at i. For i = 3 and i = 17 the run must also be longer than
 *    that bit alone (bit i-1 set).
 * x passes iff no run of ones ends (x is 0 or 0xffffffff) or every run is bit 3 or bit 17
 * alone: exactly 0, 8, 0x20000, 0x20008, 0xffffffff. Any other x has a bit outside {3, 17}
 * in some run of ones that ends somewhere (x != 0xffffffff); if it ends at 3 or 17 the run
 * holds another bit, so bit i-1 is set. test-spawn personality_only_dockers_values tries
 * the compiled filter on every one-, two- and three-bit value and 10^6 random ones. */
#define PERSONA_RUN_END(i)                                                                         \
	{                                                                                          \
		.name = "personality", .action = SECCOMP_PROFILE_EPERM, .argn = 0,                 \
		.mask = (1ULL << (i)) | (1ULL << (((i) + 1) % 32)), .value = 1ULL << (i)           \
	}
#define PERSONA_LONG_RUN_END(i)                                                                    \
	{                                                                                          \
		.name = "personality", .action = SECCOMP_PROFILE_EPERM, .argn = 0,                 \
		.mask = 7ULL << ((i)-1), .value = 3ULL << ((i)-1)                                  \
	}
#define DENY_PERSONAS                                                                              \
	DENY_GT("personality", 0, 0xffffffffULL), PERSONA_RUN_END(0), PERSONA_RUN_END(1),          \
		PERSONA_RUN_END(2), PERSONA_LONG_RUN_END(3), PERSONA_RUN_END(4),                   \
		PERSONA_RUN_END(5), PERSONA_RUN_END(6), PERSONA_RUN_END(7), PERSONA_RUN_END(8),    \
		PERSONA_RUN_END(9), PERSONA_RUN_END(10), PERSONA_RUN_END(11), PERSONA_RUN_END(12), \
		PERSONA_RUN_END(13), PERSONA_RUN_END(14), PERSONA_RUN_END(15),                     \
		PERSONA_RUN_END(16), PERSONA_LONG_RUN_END(17), PERSONA_RUN_END(18),                \
		PERSONA_RUN_END(19), PERSONA_RUN_END(20), PERSONA_RUN_END(21),                     \
		PERSONA_RUN_END(22), PERSONA_RUN_END(23), PERSONA_RUN_END(24),                     \
		PERSONA_RUN_END(25), PERSONA_RUN_END(26), PERSONA_RUN_END(27),                     \
		PERSONA_RUN_END(28), PERSONA_RUN_END(29), PERSONA_RUN_END(30), PERSONA_RUN_END(31)

const struct seccomp_profile_rule seccomp_profile_rules[] = {
	/* io_uring bypasses seccomp for the operations it performs; clone3's flags live in
	 * memory a filter cannot read. ENOSYS makes libcs fall back (to clone, checked below). */
	NOSYS("io_uring_setup"),
	NOSYS("io_uring_enter"),
	NOSYS("io_uring_register"),
	NOSYS("clone3"),
	/* Namespaces and mounts: an agent must not build itself a new view of the system. */
	DENY("unshare"),
	DENY("setns"),
	DENY("mount"),
	DENY("umount2"),
	DENY("pivot_root"),
	DENY("chroot"),
	DENY("fsopen"),
	DENY("fsconfig"),
	DENY("fsmount"),
	DENY("fspick"),
	DENY("move_mount"),
	DENY("open_tree"),
	DENY("mount_setattr"),
	DENY_NR("open_tree_attr", 467),
	/* Readers of the mount table by id, which can name other namespaces' mounts;
	 * /proc/self/mountinfo stays for the agent's own. */
	DENY_NR("statmount", 457),
	DENY_NR("listmount", 458),
	DENY_FLAG("clone", 0, CLONE_NEWNS),
	DENY_FLAG("clone", 0, CLONE_NEWUTS),
	DENY_FLAG("clone", 0, CLONE_NEWIPC),
	DENY_FLAG("clone", 0, CLONE_NEWUSER),
	DENY_FLAG("clone", 0, CLONE_NEWPID),
	DENY_FLAG("clone", 0, CLONE_NEWNET),
	DENY_FLAG("clone", 0, CLONE_NEWCGROUP),
	/* A child of the command's parent, pistisd: outside the command's own tree, never
	 * reaped by it, a zombie of the daemon's that held the agent's pids and kept the
	 * command's tree "alive" for every later kill round (red team). No libc uses it. */
	DENY_FLAG("clone", 0, CLONE_PARENT),
	/* Other processes' memory and fds (agents are hostile to each other). */
	DENY("ptrace"),
	DENY("process_vm_readv"),
	DENY("process_vm_writev"),
	DENY("pidfd_getfd"),
	DENY("kcmp"),
	/* Advice on and reaping of another process's memory (pidfd-based). */
	DENY("process_madvise"),
	DENY("process_mrelease"),
	/* Kernel attack surface with a long CVE record, not needed to build software. */
	DENY("bpf"),
	DENY("perf_event_open"),
	DENY("userfaultfd"),
	DENY("keyctl"),
	DENY("add_key"),
	DENY("request_key"),
	DENY("init_module"),
	DENY("finit_module"),
	DENY("delete_module"),
	DENY("kexec_load"),
	DENY("kexec_file_load"),
	DENY("reboot"),
	DENY("swapon"),
	DENY("swapoff"),
	DENY("iopl"),
	DENY("ioperm"),
	DENY("acct"),
	DENY("syslog"),
	/* Unprivileged fanotify (5.13+) watches whole files' access; the a.out library loader
	 * (uselib) is dead code with a CVE record (CVE-2004-1235). */
	DENY("fanotify_init"),
	DENY("uselib"),
	/* Per-process LDT (16-bit segments for Wine and DOSEMU), CVE-2015-5157 and
	 * CVE-2017-17053; a kernel may lack it (CONFIG_MODIFY_LDT_SYSCALL). */
	DENY("modify_ldt"),
	DENY("open_by_handle_at"),
	DENY("name_to_handle_at"),
	/* Terminal input injection (CVE-2017-5226) and console control. */
	DENY_ARG32("ioctl", 1, TIOCSTI),
	DENY_ARG32("ioctl", 1, TIOCLINUX),
	/* Line disciplines: any user may attach one to a terminal it holds (its own pty),
	 * which loads the module where it is not built in (dev.tty.ldisc_autoload) and puts
	 * rarely used kernel code under the agent's control: n_hdlc (CVE-2017-2636), slcan
	 * (CVE-2020-14416), n_gsm (CVE-2023-6546). Nothing an agent builds software with
	 * changes the line discipline; the argument is a pointer, so TIOCSETD goes whole. */
	DENY_ARG32("ioctl", 1, TIOCSETD),
	/* Leases: the owner of a file makes every other process's open of it wait up to
	 * fs.lease-break-time (45 s) for its release, which it may ignore. Agent A owns
	 * files in the trees agents share (/workspaces), so another agent's tools, a trusted
	 * command run for it, and its exec of a script there hung (red team: B's cat of A's
	 * file took 18 s, and the exec of one outlives the 2 s exec deadline). F_SETDELEG
	 * (Linux 6.19: delegations, directories too, broken also by unlink and rename) is
	 * the same wait by another name; a number an older kernel does not know is EINVAL
	 * there. Nothing that builds software takes a lease (Samba, NFS servers do). */
	DENY_ARG32("fcntl", 1, F_SETLEASE),
	DENY_ARG32("fcntl", 1, SECCOMP_PROFILE_F_SETDELEG),
	DENY_FAMILIES("socket"),
	DENY_FAMILIES("socketpair"),
	/* The obsolete SOCK_PACKET type (10): the kernel makes socket(AF_INET, SOCK_PACKET)
	 * a packet socket (PF_PACKET, which the family rules above refuse by number) and
	 * loads af_packet where it is a module. Compared on the type bits only (the kernel's
	 * SOCK_TYPE_MASK, 0xf), so SOCK_CLOEXEC or SOCK_NONBLOCK around it change nothing;
	 * no family has another use for the type. */
	{.name = "socket",
	 .action = SECCOMP_PROFILE_EPERM,
	 .argn = 1,
	 .mask = 0xf,
	 .value = 10 /* SOCK_PACKET */},
	DENY_INET_PROTOCOLS(AF_INET),
	DENY_INET_PROTOCOLS(AF_INET6),
	DENY_NETLINK_PROTOCOLS,
	DENY_PERSONAS,
};
const size_t seccomp_profile_n_rules = ELEMENTSOF(seccomp_profile_rules);

static void release_ctx(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}

static int add_rule(scmp_filter_ctx ctx, const struct seccomp_profile_rule *r)
{
	int nr = seccomp_syscall_resolve_name(r->name);
	uint32_t action;

#if !defined(__alpha__) && !defined(__mips__) && !defined(__ia64__)
	if (nr == __NR_SCMP_ERROR && r->nr > 0)
		nr = r->nr;
#endif
	/* A call the native arch does not have (iopl on arm64) needs no rule. */
	if (nr == __NR_SCMP_ERROR)
		return 0;
	action = SCMP_ACT_ERRNO(r->action == SECCOMP_PROFILE_ENOSYS ? ENOSYS : EPERM);
	if (r->argn < 0)
		return seccomp_rule_add_exact(ctx, action, nr, 0);
	struct scmp_arg_cmp cmp[2] = {
		{
			.arg = (unsigned)r->argn,
			.op = r->gt ? SCMP_CMP_GT : SCMP_CMP_MASKED_EQ,
			.datum_a = r->gt ? r->value : r->mask,
			.datum_b = r->gt ? 0 : r->value,
		},
		{
			.arg = (unsigned)r->argn2,
			.op = SCMP_CMP_MASKED_EQ,
			.datum_a = r->mask2,
			.datum_b = r->value2,
		},
	};
	return seccomp_rule_add_exact_array(ctx, action, nr, r->mask2 ? 2 : 1, cmp);
}

/* Numbers past the table: a deny list passes every call the kernel gains after it was
 * written, and some of those cross the same walls (open_tree_attr, 6.15, is open_tree
 * with mount attributes: it was open until added by hand; listns, 6.19, lists the
 * namespaces of the whole host). So a native call numbered above SECCOMP_PROFILE_NR_MAX,
 * the highest the table was reviewed against, answers ENOSYS as on an older kernel,
 * whichever libseccomp compiled it (runc has such a stub for calls newer than its
 * profile). Only where the numbers are the generic ones, dense up to that call: x86_64
 * (numbers with the x32 bit, 0x40000000, and above go on to libseccomp's program, which
 * kills them) and aarch64; elsewhere (arm's private calls at 0xf0000, mips' offsets)
 * nothing is added. It goes in front of libseccomp's program, which loads the
 * architecture again first, so none of its jumps change. */
#if defined(__x86_64__)
#define CEILING_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define CEILING_ARCH AUDIT_ARCH_AARCH64
#endif
#ifdef CEILING_ARCH
static const struct sock_filter ceiling[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CEILING_ARCH, 0, 4),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, SECCOMP_PROFILE_NR_MAX, 0, 2),
	/* x86_64: the x32 bit; aarch64 has none, so no number jumps here */
	BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, 1, 0),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
};
#define CEILING_LEN ELEMENTSOF(ceiling)
#else
static const struct sock_filter ceiling[1];
#define CEILING_LEN 0
#endif

static int prepend_ceiling(const struct sock_filter *prog, size_t n,
			   struct seccomp_profile_bpf *ret)
{
	struct sock_filter *all;

	if (n + CEILING_LEN > 0xffff)
		return -EINVAL;
	all = malloc((n + CEILING_LEN) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	memcpy(all, ceiling, CEILING_LEN * sizeof(*all));
	memcpy(all + CEILING_LEN, prog, n * sizeof(*all));
	ret->insns = all;
	ret->len = (unsigned short)(n + CEILING_LEN);
	ret->owned = true;
	return 0;
}

int seccomp_profile_compile(struct seccomp_profile_bpf *ret)
{
	_cleanup_(release_ctx) scmp_filter_ctx ctx = NULL;
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r;

	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	/* Only the native arch is in the filter; everything else (i386 via int 0x80 on
	 * x86_64) hits the bad-arch action: kill the whole process, never just a thread. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r < 0)
		return r;
	/* A binary tree of syscall numbers instead of a linear chain: the kernel runs the
	 * filter once per syscall number when it is installed (the allow-cache), so this
	 * halves the cost of every spawn's seccomp(2) (~78 -> ~32 us, bench/spawn.sh). */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r < 0)
		return r;
	/* We install the filter ourselves (no_new_privs is a separate, deliberate step). */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
	if (r < 0)
		return r;
	for (size_t i = 0; i < seccomp_profile_n_rules; i++) {
		r = add_rule(ctx, &seccomp_profile_rules[i]);
		if (r < 0)
			return r;
	}
	/* libseccomp has no seccomp_export_bpf_mem before 2.6: export into a memfd. */
	fd = memfd_create("pistis-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = seccomp_export_bpf(ctx, fd);
	if (r < 0)
		return r;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	r = fd_read_all(fd, 256 * 1024, &buf, &len);
	if (r < 0)
		return r;
	if (len == 0 || len % sizeof(struct sock_filter))
		return -EINVAL;
	return prepend_ceiling((const struct sock_filter *)buf, len / sizeof(struct sock_filter),
			       ret);
}

void seccomp_profile_free(struct seccomp_profile_bpf *bpf)
{
	if (bpf->owned)
		free((void *)bpf->insns);
	*bpf = (struct seccomp_profile_bpf){0};
}
