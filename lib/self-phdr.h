#pragma once

/* This program's own ELF program headers, where the loader mapped them, and its load bias:
 * for lib/relro.c's constructor (RELRO for the static binaries, before anything else runs)
 * and sandbox-users' map_code. In a header, static inline: relro.o is linked into every
 * musl binary, outside liblib.a and beside binaries that link no library at all (probe),
 * while cli.c is also built with glibc (ASan, fuzz); an inline function needs no link rule
 * in any of them. */

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/auxv.h>

/* The ELF header, where the loader mapped it (ld defines it when the headers are loaded,
 * as they are in our binaries). Hidden, so the address needs no GOT entry. */
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

struct self_phdr {
	const ElfW(Phdr) *ph; /* n of them */
	size_t n;
	uintptr_t bias; /* added to a p_vaddr: the address (0 in a non-PIE program) */
	uintptr_t page; /* AT_PAGESZ; 4096 where the kernel gave none that makes sense */
};

/* 0, or -ENOEXEC when no PT_LOAD segment maps the ELF header (ret->bias is then 0). The
 * segment that maps file offset 0 holds the ELF header: its p_vaddr is where __ehdr_start
 * was linked, so the difference is the load bias. musl's own static dl_iterate_phdr would
 * take it from PT_PHDR, which ld does not emit for a static PIE. */
static inline int self_phdr_get(struct self_phdr *ret)
{
	const ElfW(Ehdr) *eh = &__ehdr_start;
	uintptr_t page = getauxval(AT_PAGESZ);
	int r = -ENOEXEC;

	ret->ph = (const void *)((const char *)eh + eh->e_phoff);
	ret->n = eh->e_phnum;
	ret->bias = 0;
	ret->page = page && !(page & (page - 1)) ? page : 4096;
	for (size_t i = 0; i < ret->n; i++)
		if (ret->ph[i].p_type == PT_LOAD && ret->ph[i].p_offset == 0) {
			ret->bias = (uintptr_t)eh - ret->ph[i].p_vaddr;
			r = 0;
		}
	return r;
}
