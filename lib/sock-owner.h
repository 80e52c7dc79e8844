#pragma once

/* Who owns the socket at the other end of a TCP connection, where that socket lives in
 * this network namespace (NETLINK_SOCK_DIAG). For a client that must not hand a secret to
 * a listener some unprivileged user of the same namespace could have bound. */

#include <stdbool.h>
#include <sys/types.h>

enum sock_peer {
	SOCK_PEER_LOCAL,	/* a socket of this namespace: *ret_uid is its owner (for one
				 * not accepted yet, or in TIME_WAIT, its listener's) */
	SOCK_PEER_REMOTE,	/* no socket of this namespace has the peer's address and port */
	SOCK_PEER_LOCAL_UNTOLD, /* one of this namespace whose owner cannot be told (not
				 * accepted, and no listener there any more) */
	SOCK_PEER_UNKNOWN,	/* cannot tell: socket diagnostics unavailable (ret: -errno) */
};

/* The peer of the connected TCP socket fd (IPv4 or IPv6): first our own socket is looked
 * up by its four-tuple, which must be found (else the diagnostics do not work here: no
 * inet_diag, a seccomp filter, an LSM), then the peer's by the same tuple seen from its
 * side. Returns 0 with *ret_kind (and *ret_uid for SOCK_PEER_LOCAL), or -errno when fd is
 * not a connected TCP socket of ours. *ret_error: the diagnostics' -errno for UNKNOWN. */
int sock_tcp_peer(int fd, enum sock_peer *ret_kind, uid_t *ret_uid, int *ret_error);

/* Whether the peer's address is one a socket of this namespace could have: a loopback one
 * (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104) or one that can be bound here (an interface's;
 * any, where non-local binds are allowed). True also when it cannot tell. */
bool sock_peer_is_local(int fd);

/* The four-way judgement both token senders (pistisd serve for its relay, pistis for
 * server-min) make of sock_tcp_peer's answer before they write a secret. */
enum sock_verdict {
	SOCK_BELIEVED_LOCAL,	 /* a socket of this namespace, not a barred uid's */
	SOCK_BELIEVED_ELSEWHERE, /* no socket of this namespace (or the lookups fail at an
				  * address none of its sockets can have): the network's
				  * to vouch for */
	SOCK_REFUSED_NOT_TCP,	 /* fd is not a connected TCP socket: *ret_error */
	SOCK_REFUSED_OWNER,	 /* a barred uid's socket: *ret_uid */
	SOCK_REFUSED_UNTOLD,	 /* of this namespace, not accepted, and no one listens
				  * there any more: whose it is cannot be told */
	SOCK_REFUSED_BLIND,	 /* an address of this namespace where the lookups do not
				  * work: *ret_error is theirs */
};

/* The verdict on the peer of fd (which may be negative: NOT_TCP, -EBADF). barred(uid)
 * says whose local sockets must not get the secret. *ret_uid: the owner, for
 * SOCK_BELIEVED_LOCAL and SOCK_REFUSED_OWNER; *ret_error: a -errno, or 0. */
enum sock_verdict sock_tcp_peer_verdict(int fd, bool (*barred)(uid_t uid), uid_t *ret_uid,
					int *ret_error);
