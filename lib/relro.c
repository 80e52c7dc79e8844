/* RELRO for the static binaries. Linked into every musl binary by the top Makefile (not
 * part of liblib.a: nothing calls it, a constructor is all there is).
 *
 * Constant tables of pointers (function tables in mbedtls, libwebsockets' protocol and
 * role ops, our own dispatch tables), .init_array, .fini_array and the GOT are written
 * once, by relocation, and only read after that; ld puts them in PT_GNU_RELRO at the start
 * of the writable segment. A dynamic program's ld.so makes that range read-only once it
 * has relocated, and so does glibc's static start-up (_dl_relocate_static_pie,
 * _dl_protect_relro). musl 1.2.3 does not, in any static program, so without this they
 * stay writable: in a static PIE, which rcrt1.o relocates at start, and in a non-PIE one
 * alike, since gcc makes PIE code by default and that code puts such tables in
 * .data.rel.ro, not .rodata. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/self-phdr.h"

static void relro_fail(const char *what, int err)
{
	static const char a[] = "pistis: cannot make the RELRO segment read-only: ";
	const char *e = strerror(err);

	/* Before main: no log setup to use, and stdio may not be safe yet. */
	(void)!write(STDERR_FILENO, a, sizeof(a) - 1);
	(void)!write(STDERR_FILENO, what, strlen(what));
	(void)!write(STDERR_FILENO, ": ", 2);
	(void)!write(STDERR_FILENO, e, strlen(e));
	(void)!write(STDERR_FILENO, "\n", 1);
	_exit(111);
}

/* Priority 101, the first a program may use: before any other constructor runs code. */
__attribute__((constructor(101))) static void relro_protect(void)
{
	struct self_phdr self;
	const ElfW(Phdr) *relro = NULL;
	int have_base = self_phdr_get(&self) == 0;
	uintptr_t start, end;

	for (size_t i = 0; i < self.n; i++)
		if (self.ph[i].p_type == PT_GNU_RELRO)
			relro = &self.ph[i];
	if (!relro)
		return; /* linked without -z relro: nothing to protect */
	if (!have_base)
		relro_fail("no PT_LOAD segment maps the ELF header", ENOEXEC);
	/* As ld.so does: whole pages only; ld pads the segment's end to a page boundary, and
	 * the page holding its start holds nothing written after relocation. */
	start = (self.bias + relro->p_vaddr) & ~(self.page - 1);
	end = (self.bias + relro->p_vaddr + relro->p_memsz) & ~(self.page - 1);
	if (start < end && mprotect((void *)start, end - start, PROT_READ) < 0)
		relro_fail("mprotect", errno);
}
