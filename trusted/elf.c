/* trusted: the ELF reader — the loader a binary names (PT_INTERP) and what its dynamic
 * section asks the loader for (DT_NEEDED, DT_RPATH, DT_RUNPATH), each read as the kernel's
 * and the loader's own code reads it, bounds checked (docs/trusted.md). Pure: no I/O but
 * through the caller's read function; unit-tested and fuzzed with render.c. */
#include "trusted/trusted.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/escape.h"
#include "lib/macro.h"

/* Little- or big-endian fields of an ELF header, bounds checked by the caller. */
static uint64_t elf_field(const uint8_t *p, size_t size, bool msb)
{
	uint64_t v = 0;

	for (size_t i = 0; i < size; i++)
		v |= (uint64_t)p[msb ? size - 1 - i : i] << (8 * i);
	return v;
}

/* --- the dynamic section ------------------------------------------------------------- */

#define DT_NULL_ 0
#define DT_NEEDED_ 1
#define DT_STRTAB_ 5
#define DT_STRSZ_ 10
#define DT_RPATH_ 15
#define DT_RUNPATH_ 29
#define DT_DEPAUDIT_ 0x6ffffefbULL
#define DT_AUDIT_ 0x6ffffefcULL
#define DT_AUXILIARY_ 0x7ffffffdULL
#define DT_FILTER_ 0x7fffffffULL

struct elf_ctx {
	trusted_elf_read_fn read;
	void *userdata;
	uint64_t size;
	bool msb;
	int c; /* 0: ELFCLASS32, 1: ELFCLASS64 */
	const uint8_t *ph;
	uint64_t phnum;
	char *why;
	size_t why_size;
};

_printf_(2, 3) static int elf_refuse(struct elf_ctx *x, const char *fmt, ...)
{
	va_list ap;

	if (x->why && x->why_size) {
		va_start(ap, fmt);
		escape_vformat(x->why, x->why_size, "cut", 0, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Offsets in a program header: p_offset, p_vaddr, p_filesz, p_memsz (class 32, class 64). */
static const size_t ph_off[2] = {4, 8}, ph_vaddr[2] = {8, 16}, ph_filesz[2] = {16, 32},
		    ph_memsz[2] = {20, 40}, ph_size[2] = {32, 56}, word[2] = {4, 8};

/* The file offset of [addr, addr + len) in the loaded image: it must lie in the file-backed
 * part of exactly one PT_LOAD, and no other PT_LOAD may cover any of it (the kernel and the
 * loader map them in order; an overlap makes what is read there a matter of order). */
static int elf_addr_to_off(struct elf_ctx *x, uint64_t addr, uint64_t len, const char *what,
			   uint64_t *ret)
{
	size_t hits = 0;
	uint64_t off = 0;

	for (uint64_t i = 0; i < x->phnum; i++) {
		const uint8_t *ph = x->ph + i * ph_size[x->c];
		uint64_t o, v, fs, ms;

		if (elf_field(ph, 4, x->msb) != 1) /* PT_LOAD */
			continue;
		o = elf_field(ph + ph_off[x->c], word[x->c], x->msb);
		v = elf_field(ph + ph_vaddr[x->c], word[x->c], x->msb);
		fs = elf_field(ph + ph_filesz[x->c], word[x->c], x->msb);
		ms = elf_field(ph + ph_memsz[x->c], word[x->c], x->msb);
		/* Memory ranges [v, v + ms) and [addr, addr + len) intersect? (no wrap-around) */
		if (!(addr < v ? v - addr < len : addr - v < ms))
			continue;
		if (hits++)
			return elf_refuse(x, "%s lies in two PT_LOAD segments", what);
		if (addr < v || addr - v > fs || len > fs - (addr - v))
			return elf_refuse(
				x, "%s is not within the file part of its PT_LOAD segment", what);
		if (o > x->size || fs > x->size - o)
			return elf_refuse(x, "a PT_LOAD segment lies past the end of the file");
		off = o + (addr - v);
	}
	if (!hits)
		return elf_refuse(x, "%s is in no PT_LOAD segment", what);
	*ret = off;
	return 0;
}

/* The string at off in the string table [tab, tab + tabsz): it must end within the table
 * and be at most TRUSTED_ELF_STR_MAX bytes. */
static int elf_string(struct elf_ctx *x, uint64_t tab, uint64_t tabsz, uint64_t off,
		      const char *tag, char **ret)
{
	char buf[TRUSTED_ELF_STR_MAX + 1];
	uint64_t n;
	char *nul, *s;
	int r;

	if (off >= tabsz)
		return elf_refuse(x, "DT_%s string offset %llu is past DT_STRSZ (%llu)", tag,
				  (unsigned long long)off, (unsigned long long)tabsz);
	n = tabsz - off < sizeof(buf) ? tabsz - off : sizeof(buf);
	r = x->read(x->userdata, tab + off, buf, (size_t)n);
	if (r < 0)
		return r;
	nul = memchr(buf, '\0', (size_t)n);
	if (!nul)
		return n < sizeof(buf) ? elf_refuse(x, "a DT_%s string runs past DT_STRSZ", tag)
				       : elf_refuse(x, "a DT_%s string is longer than %d bytes",
						    tag, TRUSTED_ELF_STR_MAX);
	s = strdup(buf);
	if (!s)
		return -ENOMEM;
	*ret = s;
	return 0;
}

/* The ELF header and program headers as the kernel's loader takes them (either class and
 * byte order, headers of exactly the class's size, at most 64 KiB of them, within the
 * file): 1 with x->c, x->msb, x->phnum and *ret_ph (malloc'd, also x->ph) set; 0 when the
 * file is no ELF program or library (not ELF, not ET_EXEC or ET_DYN); -EINVAL (x->why
 * says why) when it is one the loader would not take. */
static int elf_headers(struct elf_ctx *x, uint8_t **ret_ph)
{
	static const size_t ehdr[2] = {52, 64}, phoff_at[2] = {28, 32}, phentsize_at[2] = {42, 54};
	uint8_t eh[64] = {0};
	uint64_t phoff, type;
	uint8_t *ph;
	int r;

	if (x->size < 16)
		return 0;
	r = x->read(x->userdata, 0, eh, x->size < sizeof(eh) ? (size_t)x->size : sizeof(eh));
	if (r < 0)
		return r;
	if (memcmp(eh, "\177ELF", 4))
		return 0;
	if ((eh[4] != 1 && eh[4] != 2) || (eh[5] != 1 && eh[5] != 2))
		return elf_refuse(x, "an ELF file of unknown class or byte order");
	x->c = eh[4] - 1;
	x->msb = eh[5] == 2;
	if (x->size < ehdr[x->c])
		return elf_refuse(x, "an ELF file cut short in its header");
	type = elf_field(eh + 16, 2, x->msb);
	if (type != 2 && type != 3)
		return 0; /* not ET_EXEC or ET_DYN: neither run nor mapped as a library */
	if (x->size > TRUSTED_ELF_FILE_MAX)
		return elf_refuse(x, "an ELF file larger than %llu MiB (not read)",
				  TRUSTED_ELF_FILE_MAX >> 20);
	if (elf_field(eh + phentsize_at[x->c], 2, x->msb) != ph_size[x->c])
		return elf_refuse(x, "program headers of another size than the class's");
	phoff = elf_field(eh + phoff_at[x->c], word[x->c], x->msb);
	x->phnum = elf_field(eh + phentsize_at[x->c] + 2, 2, x->msb);
	if (x->phnum == 0 || x->phnum * ph_size[x->c] > 65536 || phoff > x->size ||
	    x->phnum * ph_size[x->c] > x->size - phoff)
		return elf_refuse(x, "program headers missing or past the end of the file");
	ph = malloc(x->phnum * ph_size[x->c]);
	if (!ph)
		return -ENOMEM;
	r = x->read(x->userdata, phoff, ph, x->phnum * ph_size[x->c]);
	if (r < 0) {
		free(ph);
		return r;
	}
	x->ph = *ret_ph = ph;
	return 1;
}

void trusted_elf_dyn_done(struct trusted_elf_dyn *d)
{
	free(d->rpath);
	free(d->runpath);
	for (size_t i = 0; i < d->n; i++)
		free(d->loads[i].name);
	memset(d, 0, sizeof(*d));
}

int trusted_elf_dynamic(trusted_elf_read_fn read, void *userdata, uint64_t size,
			struct trusted_elf_dyn *ret, char *why, size_t why_size)
{
	struct elf_ctx x = {
		.read = read, .userdata = userdata, .size = size, .why = why, .why_size = why_size};
	struct {
		uint64_t tag;
		const char *name;
		uint64_t off;
	} want[TRUSTED_ELF_LOADS_MAX];
	_cleanup_free_ uint8_t *ph = NULL, *dyn = NULL;
	uint64_t dyn_vaddr = 0, dyn_off = 0, dyn_filesz = 0, ent, n_ent, dyn_at, i;
	uint64_t strtab = 0, strsz = 0, rpath = 0, runpath = 0, tab;
	bool has_strtab = false, has_strsz = false, has_rpath = false, has_runpath = false;
	size_t n_dyn = 0, n_want = 0;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (why && why_size)
		why[0] = '\0';
	r = elf_headers(&x, &ph);
	if (r <= 0)
		return r;
	for (i = 0; i < x.phnum; i++) {
		const uint8_t *p = ph + i * ph_size[x.c];

		if (elf_field(p, 4, x.msb) != 2) /* PT_DYNAMIC */
			continue;
		if (n_dyn++)
			return elf_refuse(&x, "two PT_DYNAMIC segments");
		dyn_off = elf_field(p + ph_off[x.c], word[x.c], x.msb);
		dyn_vaddr = elf_field(p + ph_vaddr[x.c], word[x.c], x.msb);
		dyn_filesz = elf_field(p + ph_filesz[x.c], word[x.c], x.msb);
	}
	if (!n_dyn)
		return 1; /* static: the loader maps nothing into it */
	ret->dynamic = true;
	/* The loader reads the table at its address until DT_NULL, whatever p_filesz says:
	 * read it where it is mapped, insist that p_offset says the same, and that DT_NULL
	 * comes within p_filesz and the entry limit. */
	ent = 2 * word[x.c];
	n_ent = dyn_filesz / ent;
	if (n_ent == 0)
		return elf_refuse(&x, "an empty PT_DYNAMIC");
	if (n_ent > TRUSTED_ELF_DYN_MAX)
		n_ent = TRUSTED_ELF_DYN_MAX;
	r = elf_addr_to_off(&x, dyn_vaddr, n_ent * ent, "PT_DYNAMIC", &dyn_at);
	if (r < 0)
		return r;
	if (dyn_at != dyn_off)
		return elf_refuse(&x, "PT_DYNAMIC's address and file offset disagree");
	dyn = malloc(n_ent * ent);
	if (!dyn)
		return -ENOMEM;
	r = read(userdata, dyn_at, dyn, n_ent * ent);
	if (r < 0)
		return r;
	for (i = 0;; i++) {
		const uint8_t *d = dyn + i * ent;
		uint64_t tag, val;
		const char *name = NULL;

		if (i == n_ent)
			return dyn_filesz / ent > TRUSTED_ELF_DYN_MAX
				       ? elf_refuse(&x, "more than %d dynamic entries",
						    TRUSTED_ELF_DYN_MAX)
				       : elf_refuse(&x, "no DT_NULL within PT_DYNAMIC");
		tag = elf_field(d, word[x.c], x.msb);
		val = elf_field(d + word[x.c], word[x.c], x.msb);
		if (tag == DT_NULL_)
			break;
		/* Each loader keeps the last of a repeated entry; refuse rather than guess. */
		switch (tag) {
		case DT_STRTAB_:
			if (has_strtab)
				return elf_refuse(&x, "two DT_STRTAB entries");
			has_strtab = true, strtab = val;
			continue;
		case DT_STRSZ_:
			if (has_strsz)
				return elf_refuse(&x, "two DT_STRSZ entries");
			has_strsz = true, strsz = val;
			continue;
		case DT_RPATH_:
			if (has_rpath)
				return elf_refuse(&x, "two DT_RPATH entries");
			has_rpath = true, rpath = val;
			continue;
		case DT_RUNPATH_:
			if (has_runpath)
				return elf_refuse(&x, "two DT_RUNPATH entries");
			has_runpath = true, runpath = val;
			continue;
		case DT_NEEDED_:
			name = "NEEDED";
			break;
		case DT_FILTER_:
			name = "FILTER";
			break;
		case DT_AUXILIARY_:
			name = "AUXILIARY";
			break;
		case DT_AUDIT_:
			name = "AUDIT";
			break;
		case DT_DEPAUDIT_:
			name = "DEPAUDIT";
			break;
		default:
			continue;
		}
		if (n_want >= TRUSTED_ELF_LOADS_MAX)
			return elf_refuse(&x, "more than %d libraries named (DT_NEEDED...)",
					  TRUSTED_ELF_LOADS_MAX);
		want[n_want].tag = tag;
		want[n_want].name = name;
		want[n_want++].off = val;
	}
	if (!has_rpath && !has_runpath && n_want == 0)
		return 1;
	if (!has_strtab || !has_strsz)
		return elf_refuse(&x, "library names or search paths without DT_STRTAB and "
				      "DT_STRSZ");
	if (strsz == 0 || strsz > size)
		return elf_refuse(&x, "a DT_STRSZ of %llu bytes", (unsigned long long)strsz);
	r = elf_addr_to_off(&x, strtab, strsz, "DT_STRTAB", &tab);
	if (r < 0)
		return r;
	if (has_rpath && (r = elf_string(&x, tab, strsz, rpath, "RPATH", &ret->rpath)) < 0)
		return r;
	if (has_runpath && (r = elf_string(&x, tab, strsz, runpath, "RUNPATH", &ret->runpath)) < 0)
		return r;
	for (i = 0; i < n_want; i++) {
		r = elf_string(&x, tab, strsz, want[i].off, want[i].name, &ret->loads[i].name);
		if (r < 0)
			return r;
		ret->loads[i].tag = want[i].name;
		ret->n = i + 1;
	}
	return 1;
}

struct elf_buf {
	const uint8_t *p;
	size_t len;
};

static int elf_buf_read(void *userdata, uint64_t off, void *buf, size_t len)
{
	const struct elf_buf *b = userdata;

	if (off > b->len || len > b->len - off)
		return -EIO;
	memcpy(buf, b->p + off, len);
	return 0;
}

int trusted_elf_dynamic_buf(const void *buf, size_t len, struct trusted_elf_dyn *ret, char *why,
			    size_t why_size)
{
	struct elf_buf b = {buf, len};

	return trusted_elf_dynamic(elf_buf_read, &b, len, ret, why, why_size);
}

int trusted_elf_interp(const void *buf, size_t len, char *interp, size_t size)
{
	struct elf_buf eb = {buf, len};
	struct elf_ctx x = {.read = elf_buf_read, .userdata = &eb, .size = len};
	_cleanup_free_ uint8_t *ph = NULL;
	const uint8_t *b = buf;
	uint64_t found = 0;
	int r;

	if (size)
		interp[0] = '\0';
	r = elf_headers(&x, &ph);
	if (r <= 0)
		return r;
	for (uint64_t i = 0; i < x.phnum; i++) {
		const uint8_t *p = ph + i * ph_size[x.c];
		uint64_t off, n;

		if (elf_field(p, 4, x.msb) != 3) /* PT_INTERP */
			continue;
		if (found++)
			return -EINVAL; /* two loaders: refuse rather than guess which one runs */
		off = elf_field(p + ph_off[x.c], word[x.c], x.msb);
		n = elf_field(p + ph_filesz[x.c], word[x.c], x.msb);
		/* The kernel: 2..PATH_MAX bytes, the last one NUL; it opens the C string. */
		if (n < 2 || n > 4096 || off > len || n > len - off || b[off + n - 1] != '\0' ||
		    strlen((const char *)b + off) >= size)
			return -EINVAL;
		memcpy(interp, b + off, strlen((const char *)b + off) + 1);
	}
	return found ? 1 : 0;
}
