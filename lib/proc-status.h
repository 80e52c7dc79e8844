#pragma once

/* /proc/self/status of the calling process, for the spawn child and PID 1: raw system
 * calls only (no libc state), so it is safe in a vfork-style child. One read of the file
 * costs about what eight system calls do, where the per-item alternatives (a
 * rt_sigaction per signal, a PR_CAPBSET_READ per capability) cost 64 and 41. */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The whole file into buf (NUL-terminated): its length, or -errno (-EFBIG when it does
 * not fit; no /proc: -ENOENT). */
ssize_t proc_status_read(char *buf, size_t size);

/* Where the value of the line "KEY:\t…" starts in buf (the key at the start of a line, so a
 * longer key or a value never matches), or NULL when there is no such line. */
const char *proc_status_field(const char *buf, const char *key);

/* The value of the line "KEY:\t<hex>" (SigIgn, SigCgt, CapBnd, …) in buf: 0, or -ENOENT
 * when there is no such line, -EINVAL when its value is not 1-16 hex digits ending the
 * line. */
int proc_status_hex(const char *buf, const char *key, uint64_t *ret);
