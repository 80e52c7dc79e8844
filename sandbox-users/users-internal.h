#pragma once

/* Internal to sandbox-users and its tests. */

#include "sandbox-users/users.h"

/* Homes, TMPDIR and the agent's own directory under data_fd, the root's /data opened
 * without following links (docs/users.md). */
int users_homes_ensure(int data_fd, const struct users_identity *id);
