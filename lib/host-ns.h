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
