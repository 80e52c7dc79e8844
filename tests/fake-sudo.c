/* fake-sudo: stands in for a sudo with CVE-2021-3156 and CVE-2025-32463 in tests of
 * `pistisd check` (sudo_cves), installed setuid root as /usr/bin/sudo of a throwaway root.
 * It does only the first, harmless step of each bug, the step the check looks for:
 *   sudoedit -s ...   says "sudoedit: /: not a regular file" (it took -s for sudoedit)
 *   sudo -R DIR ...   changes root to DIR and opens /etc/nsswitch.conf there, as root,
 *                     before any policy (then refuses, as sudo -n would)
 *   sudo -V           "Sudo version V", V the first line of /etc/fake-sudo-version in
 *                     the root where that exists (so a test picks what it claims to be)
 * Anything else: "sudo: a password is required", exit 1. Static (musl), libc only. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *name = argc > 0 ? strrchr(argv[0], '/') : NULL;

	name = name ? name + 1 : argc > 0 ? argv[0] : "";
	if (!strcmp(name, "sudoedit") && argc > 1 && !strcmp(argv[1], "-s")) {
		fprintf(stderr, "sudoedit: /: not a regular file\n");
		return 1;
	}
	if (argc > 1 && !strcmp(argv[1], "-V")) {
		char v[64] = "";
		int fd = open("/etc/fake-sudo-version", O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, v, sizeof(v) - 1) : -1;

		if (n > 0) {
			v[strcspn(v, "\n")] = '\0';
			printf("Sudo version %s\n", v);
			return 0;
		}
	}
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "-R") && chroot(argv[i + 1]) == 0 && chdir("/") == 0) {
			int fd = open("/etc/nsswitch.conf", O_RDONLY | O_CLOEXEC);
			char c;
			if (fd >= 0) {
				(void)!read(fd, &c, 1);
				close(fd);
			}
			break;
		}
	fprintf(stderr, "sudo: a password is required\n");
	return 1;
}
