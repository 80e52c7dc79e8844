#pragma once

/* The range of an agent's memory limit, as `pistisd serve --memory-max` takes it and
 * pistisd-entry checks serve.conf's memory-max before it starts serve: below a MiB no
 * command can even start; the top is only a bound on what a typo can ask. */
#define AGENT_MEMORY_MIN (1ull << 20)
#define AGENT_MEMORY_MAX (1ull << 50)
