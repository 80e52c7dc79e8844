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

/* TCP states (include/net/tcp_states.h) whose sockets the kernel reports with uid 0,
 * whoever owns their listener: a request socket (the final ACK not taken yet: a listener
 * with TCP_DEFER_ACCEPT, or a full accept queue) and a TIME_WAIT one. */
#define TCP_STATE_SYN_RECV 3
#define TCP_STATE_TIME_WAIT 6
#define TCP_STATE_LISTEN 10
#define TCP_STATE_NEW_SYN_RECV 12

/* One exact lookup (no NLM_F_DUMP): the TCP socket whose local end is src and remote end
 * dst, in any state; with dst all zero (address and port), the kernel's lookup finds no
 * connection and falls back to the listener on src. 0 with its uid and state, -ENOENT
 * when there is none, or -errno. */
static int diag_lookup(int nl, int family, const struct sockaddr_storage *src,
		       const struct sockaddr_storage *dst, uid_t *ret_uid, uint8_t *ret_state)
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
	*ret_state = ((const struct inet_diag_msg *)NLMSG_DATA(&resp.nh))->idiag_state;
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
	struct sockaddr_storage self, peer, none;
	_cleanup_close_ int nl = -1;
	uint8_t state = 0;
	uid_t uid;
	int r;

	*ret_error = 0;
	r = endpoints(fd, &self, &peer);
	if (r < 0)
		return r;
	nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	r = nl < 0 ? negative_errno() : diag_lookup(nl, self.ss_family, &self, &peer, &uid, &state);
	if (r < 0) {
		/* Our own socket is there: not finding it means the lookups do not work
		 * (-ENOENT too: no inet_diag handler for the family). */
		*ret_kind = SOCK_PEER_UNKNOWN;
		*ret_error = r;
		return 0;
	}
	r = diag_lookup(nl, peer.ss_family, &peer, &self, &uid, &state);
	if (r == -ENOENT) {
		*ret_kind = SOCK_PEER_REMOTE;
		return 0;
	}
	if (r >= 0 && (state == TCP_STATE_SYN_RECV || state == TCP_STATE_NEW_SYN_RECV ||
		       state == TCP_STATE_TIME_WAIT)) {
		/* Its uid says nothing (0): the listener on that address and port tells,
		 * whose it is. None there (closed since): cannot tell. */
		memset(&none, 0, sizeof(none));
		none.ss_family = peer.ss_family;
		if (peer.ss_family == AF_INET6 &&
		    IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&peer)->sin6_addr)) {
			/* ::ffff:0.0.0.0: the kernel's IPv4 lookup, which also finds a
			 * dual-stack [::] listener */
			((struct sockaddr_in6 *)&none)->sin6_addr.s6_addr[10] = 0xff;
			((struct sockaddr_in6 *)&none)->sin6_addr.s6_addr[11] = 0xff;
		}
		r = diag_lookup(nl, peer.ss_family, &peer, &none, &uid, &state);
		if (r >= 0 && state != TCP_STATE_LISTEN)
			r = -ENOENT;
		if (r < 0) {
			*ret_kind = SOCK_PEER_LOCAL_UNTOLD;
			*ret_error = r;
			return 0;
		}
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

bool sock_peer_is_local(int fd)
{
	struct sockaddr_storage self, peer;
	_cleanup_close_ int t = -1;
	socklen_t len;

	if (endpoints(fd, &self, &peer) < 0)
		return true; /* cannot tell: the caller refuses */
	if (peer.ss_family == AF_INET) {
		const uint8_t *a = (const uint8_t *)&((struct sockaddr_in *)&peer)->sin_addr;
		if (a[0] == 127)
			return true;
		((struct sockaddr_in *)&peer)->sin_port = 0;
		len = sizeof(struct sockaddr_in);
	} else {
		const struct in6_addr *a6 = &((struct sockaddr_in6 *)&peer)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a6) ||
		    (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127))
			return true;
		((struct sockaddr_in6 *)&peer)->sin6_port = 0;
		len = sizeof(struct sockaddr_in6);
	}
	/* An address of one of this namespace's interfaces can be bound (so could an agent);
	 * where non-local binds are allowed (ip_nonlocal_bind) every address can: local then,
	 * which refuses, never believes. */
	t = socket(peer.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	return t < 0 || bind(t, (struct sockaddr *)&peer, len) == 0 || errno != EADDRNOTAVAIL;
}

enum sock_verdict sock_tcp_peer_verdict(int fd, bool (*barred)(uid_t uid), uid_t *ret_uid,
					int *ret_error)
{
	enum sock_peer kind = SOCK_PEER_UNKNOWN;
	uid_t uid = 0;
	int r;

	*ret_uid = 0;
	*ret_error = 0;
	r = fd < 0 ? -EBADF : sock_tcp_peer(fd, &kind, &uid, ret_error);
	if (r < 0) {
		*ret_error = r;
		return SOCK_REFUSED_NOT_TCP;
	}
	switch (kind) {
	case SOCK_PEER_LOCAL:
		*ret_uid = uid;
		return barred(uid) ? SOCK_REFUSED_OWNER : SOCK_BELIEVED_LOCAL;
	case SOCK_PEER_LOCAL_UNTOLD:
		return SOCK_REFUSED_UNTOLD;
	case SOCK_PEER_UNKNOWN:
		return sock_peer_is_local(fd) ? SOCK_REFUSED_BLIND : SOCK_BELIEVED_ELSEWHERE;
	case SOCK_PEER_REMOTE:
	default:
		break;
	}
	return SOCK_BELIEVED_ELSEWHERE;
}
