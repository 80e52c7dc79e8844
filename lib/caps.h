#pragma once

/* The capabilities pistisd needs as root, and which of them the calling process lacks.
 * A container runtime may start the sandbox as root without some of them (docker run
 * --cap-drop, Kubernetes securityContext.capabilities.drop, --user other than 0): then
 * every command failed at its own step (setresuid, drop bounding set, a home's chown), or,
 * without CAP_KILL, ran past its timeout with its leftovers alive while its result said
 * they were killed. pistisd check, pistisd run and pistisd-entry refuse up front instead,
 * naming what is missing (docs/check.md, `capabilities`). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_KILL, CAP_SETGID, CAP_SETUID,
 * CAP_SETPCAP: each in Docker's default set. */
extern const uint64_t caps_pistisd_needs;

/* The calling process's effective capability set as a mask (bit c: capability c), or
 * -errno when capget fails. */
int caps_effective(uint64_t *ret);

/* Whether the calling process holds capability cap in its effective set (false too when
 * capget fails). */
bool caps_have(int cap);

/* Which of caps_pistisd_needs the calling process lacks in its effective set: 0 when it
 * holds them all, else the mask; -errno when capget fails. */
int caps_missing(uint64_t *ret_missing);

/* "CAP_SETUID, CAP_KILL" for the bits of mask that caps_pistisd_needs names, into buf
 * (NUL-terminated, cut to size). */
void caps_names(uint64_t mask, char *buf, size_t size);
