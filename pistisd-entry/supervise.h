#pragma once

/* The side-effecting half of pistisd-entry (part of the binary, not of the pure library):
 * preparing the data directory, running `pistisd users ensure-base`, reading serve.conf,
 * and the supervision loop. These log at the boundary themselves. */

#include <signal.h>
#include <stdbool.h>

#include "pistisd-entry/entry.h"

/* The signals entry blocks and waits for: everything but the synchronous faults, which must
 * stay deliverable so a bug in entry crashes it instead of spinning. */
void entry_wait_set(sigset_t *ret);

/* Makes DIR exist, owned by root:root, not group/other writable (0755 when it fixes it).
 * Returns 0 or a logged -errno. */
int entry_prepare_data(const char *dir);

/* Gives pistis' own directories in the data directory (data_fd, DATA_DIR in messages) and
 * their entries one level down their owner's group back and takes away the mode bits
 * they never have (group and other write, setgid), as a Kubernetes fsGroup walk leaves
 * them; each directory changed is logged. What it cannot repair is logged as a warning
 * and left to its readers, which refuse it as before (a file system where root may not
 * open an agent's directory, NFS with root_squash). Returns 0. (repair.c) */
int entry_repair_state(int data_fd, const char *data_dir);

/* Makes DATA_DIR, /workspaces, /tmp, /dev/shm, /var/tmp and /run/lock (those that exist, and
 * every mount beneath them) nosuid,nodev, bind-mounting a plain directory onto itself first,
 * and remounts this container's own /proc with hidepid=invisible. Failures are logged and
 * tolerated, except that it returns -EPERM when trusted commands are configured and DATA_DIR
 * or /workspaces could not be hardened, or a scratch tree is not nosuid and PISTIS_ALLOW
 * does not name serve's check. (harden.c) */
int entry_harden_mounts(const char *data_dir);

/* The scratch directories agents share (/tmp, /dev/shm, /var/tmp, /run/lock) that are root's
 * and writable by others without the sticky bit get it; logged, never fatal (pistisd
 * serve's sticky_shared check refuses what is left). */
void entry_sticky_scratch(void);
/* Whether PISTIS_ALLOW (serve's opt-outs) names check name, split as serve splits it. */
bool entry_serve_allows(const char *name);

/* Runs `PISTISD users ensure-base` and waits (bounded; a stop signal meanwhile gives it
 * GRACE_MS, see entry_startup_stop). 0 on success; -ENOENT when PISTISD does not exist
 * (nothing to do); a logged negative errno or the command's failure > 0. */
int entry_ensure_base(const char *pistisd, int64_t grace_ms);

/* The stop signal (SIGTERM, SIGINT, SIGQUIT) entry received before its child started, or 0:
 * one taken while a helper ran, or one pending now (taken). Entry then exits 128+N without
 * starting the child. */
int entry_startup_stop(void);

/* A container made afresh from its image has no /etc/sudoers.d/pistis-trusted, while the
 * trusted commands' scripts live on in /data/trusted: where that holds anything and the
 * drop-in is missing, runs `PISTISD trusted install` (bounded), which checks everything
 * again and writes the drop-in. Its failure is logged (trusted commands stay off: serve's
 * trusted_configured needs the drop-in), not fatal; returns 0 or a logged -errno. */
#define ENTRY_TRUSTED_DIR "/data/trusted"
#define ENTRY_DATA_BIN "/data/bin" /* the trusted commands' wrappers */
#define ENTRY_TRUSTED_SUDOERS "/etc/sudoers.d/pistis-trusted"
int entry_trusted_restore(const char *data_dir, const char *pistisd, int64_t grace_ms);
/* The first of trusted.h's TRUSTED_SHARED_TREES (data_dir for /data) that exists and is not
 * mounted nosuid, as pistisd serve's start-up check sees it (statvfs), or NULL. */
const char *entry_shared_tree_not_nosuid(const char *data_dir);

/* Loads DATA/pistis/serve.conf (absent is fine; present must be root's and not group/other
 * writable, and so must its directory), applies PISTIS_RELAY / PISTIS_TOKEN_FILE, and builds
 * the argv of `PISTISD serve`. Returns 0 or an exit code (100 configuration, 111 system). */
int entry_default_cmd(const char *data_dir, const char *pistisd, char ***ret_argv);

/* Starts cmd and supervises it until entry must exit; returns entry's exit code. */
int entry_supervise(const struct entry_opts *o, char **cmd);
