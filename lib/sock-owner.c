/* NETLINK_SOCK_DIAG lookups of one TCP socket by its four-tuple: see sock-owner.h. */
#include "lib/sock-owner.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/macro.h"

/* One exact lookup (no NLM_F_DUMP): the TCP socket whose local end is src and remote end
 * dst, in any state. 0 and its uid, -ENOENT when there is none, or -errno. */
static int diag_lookup(int nl, int family, const struct sockaddr_storage *src,
		       const struct sockaddr_storage *dst, uid_t *ret_uid)
{
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 r;
	} req = {
		.nh = {.nlmsg_len = sizeof(req),
		       .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST,
		       .nlmsg_seq = 1},
		.r = {.sdiag_family = (uint8_t)family,
		      .sdiag_protocol = IPPROTO_TCP,
		      .idiag_states = ~0u,
		      .id = {.idiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}}},
	};
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	union {
		struct nlmsghdr nh;
		char buf[2048];
	} resp;
	ssize_t n;

	if (family == AF_INET) {
		const struct sockaddr_in *s = (const void *)src, *d = (const void *)dst;
		req.r.id.idiag_sport = s->sin_port;
		req.r.id.idiag_dport = d->sin_port;
		memcpy(req.r.id.idiag_src, &s->sin_addr, sizeof(s->sin_addr));
		memcpy(req.r.id.idiag_dst, &d->sin_addr, sizeof(d->sin_addr));
	} else {
		const struct sockaddr_in6 *s = (const void *)src, *d = (const void *)dst;
		req.r.id.idiag_sport = s->sin6_port;
		req.r.id.idiag_dport = d->sin6_port;
		memcpy(req.r.id.idiag_src, &s->sin6_addr, sizeof(s->sin6_addr));
		memcpy(req.r.id.idiag_dst, &d->sin6_addr, sizeof(d->sin6_addr));
	}
	if (sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return negative_errno();
	do
		n = recv(nl, &resp, sizeof(resp), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return negative_errno();
	if (!NLMSG_OK(&resp.nh, (size_t)n))
		return -EBADMSG;
	if (resp.nh.nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *e = NLMSG_DATA(&resp.nh);
		if (resp.nh.nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
			return -EBADMSG;
		return e->error < 0 ? e->error : -EBADMSG;
	}
	if (resp.nh.nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    resp.nh.nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
		return -EBADMSG;
	*ret_uid = ((const struct inet_diag_msg *)NLMSG_DATA(&resp.nh))->idiag_uid;
	return 0;
}

static int endpoints(int fd, struct sockaddr_storage *self, struct sockaddr_storage *peer)
{
	socklen_t sl = sizeof(*self), pl = sizeof(*peer);

	if (getsockname(fd, (struct sockaddr *)self, &sl) < 0 ||
	    getpeername(fd, (struct sockaddr *)peer, &pl) < 0)
		return negative_errno();
	if (self->ss_family != peer->ss_family ||
	    (self->ss_family != AF_INET && self->ss_family != AF_INET6))
		return -EAFNOSUPPORT;
	return 0;
}

int sock_tcp_peer(int fd, enum sock_peer *ret_kind, uid_t *ret_uid, int *ret_error)
{
	struct sockaddr_storage self, peer;
	_cleanup_close_ int nl = -1;
	uid_t uid;
	int r;

	*ret_error = 0;
	r = endpoints(fd, &self, &peer);
	if (r < 0)
		return r;
	nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	r = nl < 0 ? negative_errno() : diag_lookup(nl, self.ss_family, &self, &peer, &uid);
	if (r < 0) {
		/* Our own socket is there: not finding it means the lookups do not work
		 * (-ENOENT too: no inet_diag handler for the family). */
		*ret_kind = SOCK_PEER_UNKNOWN;
		*ret_error = r;
		return 0;
	}
	r = diag_lookup(nl, peer.ss_family, &peer, &self, &uid);
	if (r == -ENOENT) {
		*ret_kind = SOCK_PEER_REMOTE;
		return 0;
	}
	if (r < 0) {
		*ret_kind = SOCK_PEER_UNKNOWN;
		*ret_error = r;
		return 0;
	}
	*ret_kind = SOCK_PEER_LOCAL;
	*ret_uid = uid;
	return 0;
}

bool sock_peer_is_loopback(int fd)
{
	struct sockaddr_storage self, peer;

	if (endpoints(fd, &self, &peer) < 0)
		return false;
	if (peer.ss_family == AF_INET) {
		const uint8_t *a = (const uint8_t *)&((struct sockaddr_in *)&peer)->sin_addr;
		return a[0] == 127;
	}
	const struct in6_addr *a6 = &((struct sockaddr_in6 *)&peer)->sin6_addr;
	return IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127);
}
