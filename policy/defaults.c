/* The shipped defaults, built in from policy/defaults.json (one file: what the docs show
 * is what runs). .incbin keeps the JSON out of C string escaping. */
#include "policy/policy.h"

__asm__(".pushsection .rodata\n"
	".global policy_defaults_json\n"
	".type policy_defaults_json, @object\n"
	".balign 16\n"
	"policy_defaults_json:\n"
	".incbin \"policy/defaults.json\"\n"
	".byte 0\n"
	".global policy_defaults_json_end\n"
	"policy_defaults_json_end:\n"
	".popsection\n");

extern const char policy_defaults_json_end[];

size_t policy_defaults_json_len(void)
{
	return (size_t)(policy_defaults_json_end - policy_defaults_json) - 1;
}
