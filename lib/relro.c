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
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

/* The ELF header, where the loader mapped it (ld defines it when the headers are loaded,
 * as they are in our binaries). Hidden, so the address needs no GOT entry. */
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

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
	const ElfW(Ehdr) *eh = &__ehdr_start;
	const ElfW(Phdr) *ph = (const void *)((const char *)eh + eh->e_phoff);
	const ElfW(Phdr) *relro = NULL;
	uintptr_t base = 0, page = getauxval(AT_PAGESZ), start, end;
	int have_base = 0;

	for (size_t i = 0; i < eh->e_phnum; i++) {
		/* The segment that maps file offset 0 holds the ELF header: its p_vaddr is
		 * where __ehdr_start was linked, so the difference is the load bias (0 for
		 * a non-PIE program). musl's own static dl_iterate_phdr would take it from
		 * PT_PHDR, which ld does not emit for a static PIE. */
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
			base = (uintptr_t)eh - ph[i].p_vaddr;
			have_base = 1;
		}
		if (ph[i].p_type == PT_GNU_RELRO)
			relro = &ph[i];
	}
	if (!relro)
		return; /* linked without -z relro: nothing to protect */
	if (!have_base)
		relro_fail("no PT_LOAD segment maps the ELF header", ENOEXEC);
	if (!page || (page & (page - 1)))
		page = 4096;
	/* As ld.so does: whole pages only; ld pads the segment's end to a page boundary, and
	 * the page holding its start holds nothing written after relocation. */
	start = (base + relro->p_vaddr) & ~(page - 1);
	end = (base + relro->p_vaddr + relro->p_memsz) & ~(page - 1);
	if (start < end && mprotect((void *)start, end - start, PROT_READ) < 0)
		relro_fail("mprotect", errno);
}
