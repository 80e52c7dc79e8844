#pragma once

/* Whether the calling process is in one of the kernel's initial namespaces: the host's,
 * which a container shares with `docker run --pid host`, `--ipc host` or `--uts host`
 * (or Kubernetes hostPID, hostIPC). The kernel gives each initial namespace a fixed inode
 * number (PROC_*_INIT_INO, include/linux/proc_ns.h) and every other one a new number. */

#include <stdbool.h>

enum host_ns {
	HOST_NS_PID,
	HOST_NS_IPC,
	HOST_NS_UTS,
	_HOST_NS_MAX,
};

/* 1 in the initial namespace of that kind, 0 in another, -errno when /proc/self/ns cannot
 * be read. */
int host_ns_is_initial(enum host_ns which);
/* "pid", "ipc", "uts". */
const char *host_ns_name(enum host_ns which);

/* 1 in the initial user namespace (PROC_USER_INIT_INO), 0 in another, -errno when
 * /proc/self/ns/user cannot be read. Apart from the kinds above: a container in the host's
 * user namespace is the common case (Docker's default), not a warning of host_namespaces;
 * what it tells is which capabilities count where the kernel asks the initial namespace
 * (capable(): the OOM floor's CAP_SYS_RESOURCE, among others). */
int host_ns_user_is_initial(void);
