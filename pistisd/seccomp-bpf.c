/* The agent seccomp profile as compiled at build time (seccomp-gen.c prints the header
 * from the table in seccomp-profile.c). Nothing here runs libseccomp: the spawn core hands
 * this array to seccomp(2) as it is. */
#include <linux/filter.h>

#include "pistisd/seccomp-profile.h"
#include "seccomp-bpf.gen.h" /* $(B)/gen/<libc>/, made before this file is compiled */

_Static_assert(sizeof(seccomp_profile_gen) / sizeof(seccomp_profile_gen[0]) <= 0xffff,
	       "BPF program too long for sock_fprog.len");

const char seccomp_profile_built_with[] = SECCOMP_PROFILE_GEN_WITH;

void seccomp_profile_load(struct seccomp_profile_bpf *ret)
{
	*ret = (struct seccomp_profile_bpf){
		.insns = seccomp_profile_gen,
		.len = (unsigned short)(sizeof(seccomp_profile_gen) /
					sizeof(seccomp_profile_gen[0])),
		.owned = false,
	};
}
