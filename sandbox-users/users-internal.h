#pragma once

/* Internal to sandbox-users and its tests. */

#include "sandbox-users/users.h"

/* Homes, TMPDIR and the agent's own directory under root_fd/data (docs/users.md). */
int users_homes_ensure(int root_fd, const struct users_identity *id);
