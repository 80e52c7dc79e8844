#pragma once

/* Landlock scopes for agent commands (docs/spawn.md "Abstract UNIX sockets").
 *
 * Abstract UNIX sockets have no owner and no mode: any process of the network namespace
 * can connect to any name, and bind a name first. Agents share pistisd's network
 * namespace, so without a scope agent A reaches B's abstract listeners (and the host's:
 * containerd-shim, CVE-2020-15257), and can squat a name B's tools or a trusted command
 * will connect to. LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (Landlock ABI 6, Linux 6.12) puts
 * each command into a domain of its own that may connect only to names bound inside it. */

#include <stdbool.h>

/* Landlock's ABI version (>= 1), or -errno: -EOPNOTSUPP built in but not enabled at
 * boot, -ENOSYS not built in (or refused by a container's seccomp profile). */
int scope_landlock_abi(void);

/* 0 when a command can be scoped here: a ruleset with the abstract-socket scope is
 * made (and closed again). Else -errno: -EINVAL for a Landlock ABI below 6. */
int scope_probe(void);

/* What scope_probe cannot see without restricting this process: whether
 * landlock_restrict_self itself is allowed here (a container profile could allow the
 * ruleset call and refuse this one, and every command would then fail). Tried in a
 * throwaway child under no_new_privs, once per process (pistisd serve asks in its
 * start-up check and again for its spawn context; the kernel and the runtime's profile do
 * not change in between). 0, or -errno of the refusal. */
int scope_probe_child(void);

/* In the spawn child, no libc state touched: put this process into a new Landlock domain
 * scoped for abstract UNIX sockets. Needs no_new_privs or CAP_SYS_ADMIN. The ruleset fd
 * stays open for the child's last close_range. 0 or -errno. */
int scope_restrict_self(void);
