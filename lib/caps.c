/* Which of the capabilities pistisd needs the calling process lacks (lib/caps.h). */
#include "lib/caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/macro.h"

#define BIT(c) (UINT64_C(1) << (c))

static const struct {
	int cap;
	const char *name;
} needed[] = {
	{CAP_CHOWN, "CAP_CHOWN"},		/* homes, the account files' backups, path rules */
	{CAP_DAC_OVERRIDE, "CAP_DAC_OVERRIDE"}, /* into agents' 0700 homes and trees */
	{CAP_FOWNER, "CAP_FOWNER"},		/* modes and ACLs of agents' files */
	{CAP_FSETID, "CAP_FSETID"},		/* setgid pi-sandbox on write rules' trees */
	{CAP_KILL, "CAP_KILL"},			/* timeouts, cancels, leftovers */
	{CAP_SETGID, "CAP_SETGID"},		/* setgroups, setresgid */
	{CAP_SETUID, "CAP_SETUID"},		/* setresuid */
	{CAP_SETPCAP, "CAP_SETPCAP"},		/* the agents' empty bounding set */
};

const uint64_t caps_pistisd_needs = BIT(CAP_CHOWN) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FOWNER) |
				    BIT(CAP_FSETID) | BIT(CAP_KILL) | BIT(CAP_SETGID) |
				    BIT(CAP_SETUID) | BIT(CAP_SETPCAP);

int caps_effective(uint64_t *ret)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {{0}};

	if (syscall(SYS_capget, &h, d) < 0)
		return negative_errno();
	*ret = (uint64_t)d[0].effective | (uint64_t)d[1].effective << 32;
	return 0;
}

bool caps_have(int cap)
{
	uint64_t eff;

	return caps_effective(&eff) == 0 && cap >= 0 && cap < 64 && (eff & BIT(cap));
}

int caps_missing(uint64_t *ret_missing)
{
	uint64_t eff;
	int r = caps_effective(&eff);

	if (r < 0)
		return r;
	*ret_missing = caps_pistisd_needs & ~eff;
	return 0;
}

void caps_names(uint64_t mask, char *buf, size_t size)
{
	size_t len = 0;

	if (size)
		buf[0] = '\0';
	for (size_t i = 0; i < ELEMENTSOF(needed) && len < size; i++)
		if (mask & BIT(needed[i].cap)) {
			int n = snprintf(buf + len, size - len, "%s%s", len ? ", " : "",
					 needed[i].name);
			if (n < 0)
				break;
			len += (size_t)n;
		}
}
