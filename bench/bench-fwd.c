/* The floor of the relay's data path: the same three hops as command output through the
 * relay (the command's pipe -> pistisd -> TCP -> server-min -> TCP -> pistis -> a pipe),
 * each a plain blocking copy loop with no WebSocket framing, no event loop and no
 * protocol, so that bench/relay.sh can put the relay's throughput next to what the kernel
 * work alone allows on the same machine in the same run.
 *   bench-fwd in PORT [--mask]        stdin (grown to 1 MiB, like pistisd's pipes) -> TCP
 *   bench-fwd mid LISTEN PORT [--mask] TCP -> TCP
 *   bench-fwd out LISTEN [--splice]    TCP -> stdout (grown to 1 MiB, like pistis's)
 * --mask does the per-byte work RFC 6455 asks of the relay on the sandbox link: `in` XORs
 * every byte into a separate send buffer (pistisd masks a kept frame into lws's buffer),
 * `mid` XORs back in place (lws unmasks where it read). --splice moves the bytes from the
 * socket into the stdout pipe with splice(2) instead of read + write (no copy in `out`).
 * Reads are 256 KiB, a frame's payload (PROTO_MAX_FRAME_PAYLOAD). Listeners take one
 * connection on 127.0.0.1; `in` and `mid` retry their connect for up to 5 s. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/fd-util.h"

#define CHUNK (256u * 1024u)
#define PIPE_BYTES (1024 * 1024)

static struct sockaddr_in loopback(const char *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	a.sin_port = htons((uint16_t)strtoul(port, NULL, 10));
	return a;
}

static void nodelay(int fd)
{
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int accept_one(const char *port)
{
	struct sockaddr_in a = loopback(port);
	int one = 1, fd, l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0)
		return -errno;
	fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return -errno;
	close(l);
	nodelay(fd);
	return fd;
}

static int connect_to(const char *port)
{
	struct sockaddr_in a = loopback(port);

	for (int i = 0; i < 250; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			nodelay(fd);
			return fd;
		}
		close(fd);
		usleep(20 * 1000);
	}
	return -ECONNREFUSED;
}

/* XOR with a 32-bit key, a word at a time, from src into dst (dst may be src). */
static void mask(uint8_t *dst, const uint8_t *src, size_t n, uint32_t key)
{
	uint64_t k = (uint64_t)key << 32 | key, w;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, src + i, 8);
		w ^= k;
		memcpy(dst + i, &w, 8);
	}
	for (; i < n; i++)
		dst[i] = src[i] ^ (uint8_t)(key >> (8 * (i & 3)));
}

static int copy_loop(int in, int out, bool masked, bool separate)
{
	static uint8_t buf[CHUNK], tx[CHUNK];

	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		uint8_t *p = buf;
		if (masked) {
			p = separate ? tx : buf;
			mask(p, buf, (size_t)n, 0x5a3c96e1u);
		}
		int r = loop_write(out, p, (size_t)n);
		if (r < 0)
			return r;
	}
}

static int splice_loop(int in, int out)
{
	for (;;) {
		ssize_t n = splice(in, NULL, out, NULL, PIPE_BYTES, SPLICE_F_MOVE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : 0;
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const char *opt = argc > 1 ? argv[argc - 1] : "";
	int in = -1, out = -1, r;

	if (!strcmp(mode, "in") && argc >= 3) {
		(void)fcntl(STDIN_FILENO, F_SETPIPE_SZ, PIPE_BYTES);
		in = STDIN_FILENO;
		out = connect_to(argv[2]);
	} else if (!strcmp(mode, "mid") && argc >= 4) {
		in = accept_one(argv[2]);
		out = in < 0 ? in : connect_to(argv[3]);
	} else if (!strcmp(mode, "out") && argc >= 3) {
		(void)fcntl(STDOUT_FILENO, F_SETPIPE_SZ, PIPE_BYTES);
		in = accept_one(argv[2]);
		out = STDOUT_FILENO;
	} else {
		fprintf(stderr, "usage: bench-fwd in PORT [--mask] | mid LISTEN PORT [--mask] | "
				"out LISTEN [--splice]\n");
		return 100;
	}
	if (in < 0 || out < 0) {
		fprintf(stderr, "bench-fwd %s: %s\n", mode, strerror(-(in < 0 ? in : out)));
		return 111;
	}
	if (!strcmp(mode, "out") && !strcmp(opt, "--splice"))
		r = splice_loop(in, out);
	else
		r = copy_loop(in, out, !strcmp(opt, "--mask"), !strcmp(mode, "in"));
	if (r < 0) {
		fprintf(stderr, "bench-fwd %s: %s\n", mode, strerror(-r));
		return 111;
	}
	return 0;
}
