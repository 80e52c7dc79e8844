#pragma once

/* Internal to sandbox-users and its tests. */

#include "sandbox-users/users.h"

/* Homes, TMPDIR and the agent's own directory under data_fd, the root's /data opened
 * without following links (docs/users.md). */
int users_homes_ensure(int data_fd, const struct users_identity *id);

/* For a caller that exits right after its one call (`pistisd users …`): the call then
 * leaves the memory it allocated to exit(2) instead of returning it piece by piece (a
 * creation frees some fifteen separate mappings, ~8 % of its time); fds are still closed,
 * and so the locks released, when the call returns. Never for a long-running caller. */
void users_leave_memory_to_exit(void);
