/* libFuzzer: trusted command names, the generated wrappers (both forms) and drop-in for any
 * name the validator accepts (they must never carry a byte outside the allowed set), and
 * the name trusted-exec takes from a wrapper path; the #! parser and trusted-interp's split of
 * its argument, the check of what the #! argument does with the caller's arguments, the ELF
 * loader reader,
 * the dynamic section reader and the ld.so.preload tokenizer on any bytes. */
#include <errno.h>
#include <stddef.h>
#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trusted/trusted.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[128], path[160], got[TRUSTED_NAME_MAX + 1];
	struct trusted_entry e = {
		.digest = "d5520751b4e6cd9dd8835fa8d4e5a75974c0cbb693f427a9a0a483ee7c4f9515"};
	char *text = NULL, interp[TRUSTED_SHEBANG_MAX], arg[TRUSTED_SHEBANG_MAX];
	int sb;

	/* The #! parser: any bytes; what it returns is a non-empty interpreter with no blank,
	 * and both strings fit (a NUL inside would have been refused). */
	sb = trusted_shebang_parse((const char *)data, size, interp, arg);
	if (sb == 1 &&
	    (!interp[0] || strpbrk(interp, " \t\n") || strchr(arg, '\n') ||
	     strlen(interp) >= TRUSTED_SHEBANG_MAX || strlen(arg) >= TRUSTED_SHEBANG_MAX))
		abort();
	/* ... and trusted-interp's split of its argument: a non-empty interpreter with no blank,
	 * an argument with no blank at either end, both parts of the input. */
	if (sb == 1) {
		char inner[TRUSTED_SHEBANG_MAX], inner_arg[TRUSTED_SHEBANG_MAX];
		int ti = trusted_interp_split(arg, inner, inner_arg);

		if (ti < -EINVAL || ti > 1 ||
		    (ti == 1 && (!inner[0] || strpbrk(inner, " \t") || !strstr(arg, inner) ||
				 !strstr(arg, inner_arg))) ||
		    (ti == 1 && inner_arg[0] &&
		     (strchr(" \t", inner_arg[0]) ||
		      strchr(" \t", inner_arg[strlen(inner_arg) - 1]))))
			abort();
	}
	/* ... and the check of what the #! argument does with the caller's arguments: 0 or 1,
	 * a refusal with a reason that fits, and never a word the interpreter would take as
	 * its program (a non-option) let through for an interpreter pistis knows. */
	if (sb == 1) {
		char why[256] = "";
		int ac = trusted_interp_arg_check(interp, arg, why, sizeof(why));

		if (ac < 0 || ac > 1 || (ac == 1 && (!why[0] || !memchr(why, '\0', sizeof(why)))))
			abort();
		if (ac == 0 && !strcmp(interp, "/bin/sh") && arg[strspn(arg, " \t")] &&
		    !strchr("-+", arg[strspn(arg, " \t")]))
			abort();
	}
	/* The ELF loader reader: any bytes; a path it returns fits and ends in NUL. */
	{
		char loader[64];
		int el = trusted_elf_interp(data, size, loader, sizeof(loader));

		if (el < -EINVAL || el > 1 || (el >= 0 && !memchr(loader, '\0', sizeof(loader))))
			abort();
	}
	/* The dynamic section reader: any bytes; refused (-EINVAL) or strings within bounds. */
	{
		struct trusted_elf_dyn d;
		char why[256];
		int r = trusted_elf_dynamic_buf(data, size, &d, why, sizeof(why));

		if (r < -EINVAL || r > 1 || (r == -EINVAL && !why[0]) ||
		    d.n > TRUSTED_ELF_LOADS_MAX ||
		    (d.rpath && strlen(d.rpath) > TRUSTED_ELF_STR_MAX) ||
		    (d.runpath && strlen(d.runpath) > TRUSTED_ELF_STR_MAX))
			abort();
		for (size_t i = 0; i < d.n; i++)
			if (!d.loads[i].name || !d.loads[i].tag ||
			    strlen(d.loads[i].name) > TRUSTED_ELF_STR_MAX)
				abort();
		trusted_elf_dyn_done(&d);
	}
	/* ld.so.preload: names are non-empty, hold no separator or '#', and stay in the text. */
	{
		const char *t = (const char *)data, *nm;
		size_t pos = 0, l;

		while ((l = trusted_preload_next(t, size, &pos, &nm)) > 0) {
			if (nm < t || nm + l > t + size || pos > size)
				abort();
			for (size_t i = 0; i < l; i++)
				if (nm[i] == '#' || (nm[i] && strchr(" \t\n:", nm[i])))
					abort();
		}
	}
	/* Absolute paths a script names: each starts with '/', is shorter than PATH_MAX, holds
	 * only path bytes, is where pos says in the text, and pos only moves forward. */
	{
		const char *t = (const char *)data;
		static char found[PATH_MAX];
		size_t pos = 0, line = 1, last = 0, nl = 1;

		while (trusted_script_path_next(t, size, &pos, &line, found)) {
			size_t l = strlen(found);

			if (found[0] != '/' || l >= PATH_MAX || pos < l || pos > size ||
			    pos <= last || memcmp(t + pos - l, found, l) || line < nl)
				abort();
			for (size_t i = 0; i < l; i++)
				if (!isalnum((unsigned char)found[i]) &&
				    !strchr("._+@%~-/", found[i]))
					abort();
			last = pos;
			nl = line;
		}
		if (pos != size)
			abort();
	}
	if (size >= sizeof(name))
		return 0;
	memcpy(name, data, size);
	name[size] = '\0';
	/* trusted-exec: any path it accepts is "/data/bin/" plus a valid name, that name. */
	if (trusted_exec_name(name, got) == 0 &&
	    (strncmp(name, "/data/bin/", 10) || strcmp(name + 10, got) || !trusted_name_valid(got)))
		abort();
	if (!trusted_name_valid(name))
		return 0;
	if (strlen(name) > TRUSTED_NAME_MAX || strpbrk(name, ".~/ \n\\\"'$`*?"))
		abort();
	memcpy(e.name, name, strlen(name) + 1);
	if (trusted_dropin_render(&e, 1, &text) != 0)
		abort();
	free(text);
	if (trusted_wrapper_render("/usr/bin/sudo", NULL, name, &text) != 0)
		abort();
	free(text);
	if (trusted_wrapper_render("/usr/bin/sudo", "/usr/local/bin/pistisd", name, &text) != 0)
		abort();
	/* One shebang line, then comments only: nothing a shell or the kernel reads twice. */
	if (!trusted_wrapper_is_ours(text, strlen(text)))
		abort();
	for (const char *l = strchr(text, '\n') + 1; *l; l = strchr(l, '\n') + 1)
		if (strncmp(l, "# ", 2) || !strchr(l, '\n'))
			abort();
	free(text);
	snprintf(path, sizeof(path), "/data/bin/%s", name);
	if (trusted_exec_name(path, got) != 0 || strcmp(got, name))
		abort();
	return 0;
}
