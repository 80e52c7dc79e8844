#pragma once

/* The wire protocol between a server (server-min, or a platform's own) and pistisd, and
 * between clients and server-min: JSON control messages (text WebSocket messages) and binary
 * frames for bulk data (binary WebSocket messages). Pure: parsing, validation and building,
 * no I/O, so both ends link it and the fuzzers drive it. See docs/protocol.md. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define PROTO_VERSION 1
#define PROTO_SUBPROTOCOL "pistis.v1"		    /* WebSocket sub-protocol, sandbox side */
#define PROTO_CLIENT_SUBPROTOCOL "pistis-client.v1" /* client API of server-min */

/* Hard limits. Every one of them is enforced before anything is allocated for it. */
#define PROTO_MAX_MESSAGE (1024u * 1024u) /* one JSON control message, bytes */
#define PROTO_MAX_DEPTH 8		  /* JSON nesting, checked before cJSON runs */
#define PROTO_MAX_KEYS 128		  /* members of one JSON object */
#define PROTO_MAX_STRING (256u * 1024u)	  /* one JSON string, bytes (escaped form) */
/* JSON values in one message (commas and opening brackets, as the pre-check counts them):
 * parsing costs by values, ~80 ms for the half million 1 MiB of "[0,0,…]" holds; the largest
 * real message, an fs.list answer of 10 000 entries, has ~50 000. */
#define PROTO_MAX_VALUES (128u * 1024u)
#define PROTO_MAX_ID 128       /* request id, bytes */
#define PROTO_MAX_CLIENT_ID 64 /* request id a client may choose (server-min prefixes) */
#define PROTO_MAX_PATH 4096
#define PROTO_MAX_ARGV 1024 /* argv entries */
#define PROTO_MAX_ARGV_BYTES (256u * 1024u)
#define PROTO_MAX_ENV 64 /* PI_* variables per command */
#define PROTO_MAX_TAG 64
#define PROTO_MAX_WINSIZE 4096 /* a pty's rows and cols (exec.start, exec.resize) */
#define PROTO_MAX_READER 64    /* exec.start/attach "reader": who reads the output, bytes */
#define PROTO_MAX_AGENT 256
#define PROTO_FRAME_HEADER 16
#define PROTO_MAX_FRAME_PAYLOAD (256u * 1024u)	/* binary frame payload, bytes */
#define PROTO_MAX_COMMANDS_PER_AGENT 32		/* concurrent commands one agent may hold */
#define PROTO_MAX_COMMANDS 256			/* per sandbox */
#define PROTO_MAX_BUFFERED (8u * 1024u * 1024u) /* unacknowledged output per command */
#define PROTO_MAX_FILE (16u * 1024u * 1024u)	/* a file fs.edit rewrites, bytes */
/* File bytes one fs.read answer or fs.write request carries: their base64 is one JSON
 * string, well under PROTO_MAX_STRING. Larger files go in pieces: offset + eof. */
#define PROTO_MAX_FILE_CHUNK (128u * 1024u)
#define PROTO_MAX_LIST 10000 /* fs.list entries per answer */

enum proto_op {
	PROTO_OP_UNKNOWN = 0,
	PROTO_OP_HELLO,
	PROTO_OP_PING,
	PROTO_OP_USERS_ENSURE,
	PROTO_OP_POLICY_APPLY,
	PROTO_OP_POLICY_PLAN,
	PROTO_OP_POLICY_EXPLAIN,
	PROTO_OP_POLICY_CHECK,
	PROTO_OP_TRUSTED_ADD,
	PROTO_OP_TRUSTED_REMOVE,
	PROTO_OP_TRUSTED_LIST,
	PROTO_OP_EXEC_START,
	PROTO_OP_EXEC_STDIN, /* only as a binary frame; the JSON form carries base64 "data" */
	PROTO_OP_EXEC_CLOSE_STDIN,
	PROTO_OP_EXEC_SIGNAL,
	PROTO_OP_EXEC_RESIZE,
	PROTO_OP_EXEC_ATTACH,
	PROTO_OP_EXEC_ACK,
	PROTO_OP_EXEC_LIST,
	PROTO_OP_FS_READ,
	PROTO_OP_FS_WRITE,
	PROTO_OP_FS_EDIT,
	PROTO_OP_FS_LIST,
	PROTO_OP_FS_STAT,
	PROTO_OP_FS_MKDIR,
	PROTO_OP_FS_REMOVE,
	PROTO_OP_FS_MOVE,
	PROTO_OP_FS_READ_PROMPT,
	PROTO_OP_SANDBOX_STATUS,
	PROTO_OP_SANDBOXES_LIST, /* server-min's client API only */
	_PROTO_OP_MAX,
};

const char *proto_op_name(enum proto_op op);
enum proto_op proto_op_from_name(const char *name);

/* Structured error codes: {"code": "...", "message": "..."}. */
enum proto_err {
	PROTO_E_OK = 0,
	PROTO_E_BAD_JSON,      /* not JSON, or not an object */
	PROTO_E_TOO_LARGE,     /* message, string, frame or list over its limit */
	PROTO_E_TOO_DEEP,      /* nesting over PROTO_MAX_DEPTH */
	PROTO_E_DUPLICATE_KEY, /* an object names a key twice */
	PROTO_E_BAD_REQUEST,   /* missing or ill-typed field */
	PROTO_E_UNKNOWN_OP,
	PROTO_E_DUPLICATE_ID, /* a request id still in use */
	PROTO_E_BAD_FRAME,    /* binary frame header wrong */
	PROTO_E_BAD_SEQUENCE, /* binary frame out of order */
	PROTO_E_NOT_FOUND,
	PROTO_E_DENIED, /* the agent may not (EACCES/EPERM as the agent) */
	PROTO_E_LIMIT,	/* a concurrency or buffer limit */
	PROTO_E_EXISTS,
	PROTO_E_NOT_UNIQUE,  /* fs.edit: the old text occurs more than once */
	PROTO_E_UNAVAILABLE, /* sandbox not connected, feature not in this build */
	PROTO_E_UNAUTHORIZED,
	PROTO_E_INTERNAL,
	PROTO_E_CANNOT_EXEC, /* exec.start: the program is there but execve refused it */
	_PROTO_E_MAX,
};

const char *proto_err_name(enum proto_err e);
/* Map -errno from a failed operation to the closest protocol error. */
enum proto_err proto_err_from_errno(int negative_errno);

struct proto_error {
	enum proto_err code;
	char message[200];
};

/* Parse one inbound control message: size, depth and string-length pre-check (before cJSON
 * allocates anything), cJSON parse, duplicate keys, an object at the top. On success *ret is
 * the root object (cJSON_Delete it). Errors fill err and return -EINVAL (-E2BIG for size). */
int proto_parse(const char *buf, size_t len, cJSON **ret, struct proto_error *err);
/* proto_parse, and *ret_values: about how many JSON values the text holds (1 + its commas and
 * opening brackets outside strings, counted by the pre-check as far as it read, failure or
 * not). What parsing a message costs grows with its values, not its bytes: 1 MiB of "[0,0,…]"
 * is half a million cJSON nodes, ~80 ms of CPU, where 1 MiB of one string takes ~1.5 ms. A
 * receiver that meters a peer (server-min's message rate per sandbox) charges by it. */
int proto_parse_values(const char *buf, size_t len, cJSON **ret, struct proto_error *err,
		       size_t *ret_values);
/* Is s[0..n) well-formed UTF-8 (RFC 3629)? proto_parse refuses a message whose strings are
 * not, so a string from elsewhere (a file name) must be checked before it goes into one. */
bool proto_utf8_valid(const char *s, size_t n);

/* The code unit of the JSON escape "\uXXXX" at p (left bytes readable), 0..0xFFFF, or -1
 * when p does not hold one with four hex digits. cJSON reads "\u" with anything else
 * ("\uZZZZ") as U+0000, which cuts the C string it hands out: its callers refuse both. */
long proto_json_u_escape(const char *p, size_t left);

/* A parsed request: op and id validated. Fields point into the cJSON tree. */
struct proto_request {
	enum proto_op op;
	const char *op_name;
	const char *id;
	cJSON *root;
};

/* Check a parsed root as a request: "op" (known), "id" (1..max_id bytes of [A-Za-z0-9._:-]).
 * err gets PROTO_E_UNKNOWN_OP / PROTO_E_BAD_REQUEST. The id, when readable, is kept in
 * ret->id even on error so the answer can name it. */
int proto_request_parse(cJSON *root, size_t max_id, struct proto_request *ret,
			struct proto_error *err);

bool proto_id_valid(const char *id, size_t max);

/* Typed field access with limits; all return 0, -ENOENT (absent: caller decides) or -EINVAL
 * (wrong type or out of range; err filled). */
int proto_get_string(cJSON *obj, const char *key, size_t max, const char **ret,
		     struct proto_error *err);
int proto_get_u64(cJSON *obj, const char *key, uint64_t max, uint64_t *ret,
		  struct proto_error *err);
int proto_get_bool(cJSON *obj, const char *key, bool *ret, struct proto_error *err);

/* exec.start */
enum proto_stdin_mode {
	PROTO_STDIN_NULL = 0,
	PROTO_STDIN_PIPE,
};

struct proto_exec_start {
	const char *agent;
	char **argv; /* NULL-terminated; points into the tree (free only the vector) */
	size_t argc;
	const char *shell; /* exclusive with argv: run through /bin/sh -c */
	const char *cwd;   /* NULL: the agent's home */
	char **env;	   /* "PI_NAME=value", NULL-terminated, malloc'd strings */
	size_t n_env;
	enum proto_stdin_mode stdin_mode;
	bool pty;
	unsigned rows, cols;
	const char *term;    /* with pty: the client's TERM, [A-Za-z0-9_.+-]{1,64}; NULL: none */
	uint64_t timeout_ms; /* 0: none */
	uint64_t output_cap; /* bytes of stdout+stderr; 0: none */
	const char *tag;
};

int proto_exec_start_parse(cJSON *root, struct proto_exec_start *ret, struct proto_error *err);
void proto_exec_start_done(struct proto_exec_start *s);

/* Answers and events. Each returns a malloc'd NUL-terminated JSON text or NULL on ENOMEM. */
/* in as valid UTF-8 in out (size bytes with the NUL): each byte that does not start a
 * valid sequence becomes '?', and the copy stops before a character that would not fit.
 * Returns its length. */
size_t proto_utf8_sanitize(const char *in, char *out, size_t size);
/* An error answer; message is made valid UTF-8 (proto_utf8_sanitize), at most
 * PROTO_MAX_ERROR_MESSAGE - 1 bytes. */
#define PROTO_MAX_ERROR_MESSAGE 1024
char *proto_error_build(const char *id, enum proto_err code, const char *message);

/* A name a peer sent, between double quotes, for an error message (raw text: JSON escapes
 * it, a log escapes it): whole up to PROTO_PEER_NAME_SHOWN bytes, else cut before a whole
 * UTF-8 character and ended "..."[cut: N bytes] with its length after the quote, so a cut
 * name never reads as a whole, shorter one. out: PROTO_PEER_NAME_SIZE bytes. */
#define PROTO_PEER_NAME_SHOWN 64
#define PROTO_PEER_NAME_SIZE (PROTO_PEER_NAME_SHOWN + 40)
const char *proto_peer_name(const char *s, char *out, size_t size);
/* {"id":id,"ok":true, ...fields of extra (taken over, may be NULL)} */
char *proto_ok_build(const char *id, cJSON *extra);
/* {"event":name,"id":id, ...fields of extra (taken over)} */
char *proto_event_build(const char *name, const char *id, cJSON *extra);

/* Binary frames: a 16-byte big-endian header, then payload.
 *   u8 version (1) | u8 stream | u16 flags | u32 cmd | u64 seq */
enum proto_stream {
	PROTO_STREAM_STDIN = 0,
	PROTO_STREAM_STDOUT = 1,
	PROTO_STREAM_STDERR = 2,
	_PROTO_STREAM_MAX,
};

enum {
	PROTO_FRAME_EOF = 1 << 0, /* last frame of this stream (payload may be empty) */
};

struct proto_frame {
	uint8_t stream;
	uint16_t flags;
	uint32_t cmd;
	uint64_t seq;
	const uint8_t *payload;
	size_t len;
};

void proto_frame_header_put(uint8_t out[PROTO_FRAME_HEADER], uint8_t stream, uint16_t flags,
			    uint32_t cmd, uint64_t seq);
/* Validate and split a frame; -EINVAL with err on a bad header, -E2BIG over the payload limit. */
int proto_frame_parse(const uint8_t *buf, size_t len, struct proto_frame *ret,
		      struct proto_error *err);

/* The WebSocket header (RFC 6455, 5.2) at the start of buf, n bytes peeked from a socket,
 * for a reader that takes some frames off the socket itself (pistis's splice path) and
 * leaves every other one to libwebsockets. Returns the header's length (2, 4 or 10) and
 * the payload length in *plen only for the whole header of a final, unmasked binary frame
 * with no reserved bit and a minimally encoded length below 2^63; else 0: another opcode,
 * a fragment, a mask, a reserved bit, a length in more bytes than it needs, or a header
 * not all in buf. */
#define PROTO_WS_HEADER_MAX 10 /* unmasked: 2 + 8 length bytes */
size_t proto_ws_binary_header(const uint8_t *buf, size_t n, uint64_t *plen);

/* base64 (RFC 4648, with padding) for JSON-carried bytes. decode returns -EINVAL on any
 * character outside the alphabet or bad padding. */
char *proto_base64_encode(const uint8_t *in, size_t len);
int proto_base64_decode(const char *in, size_t in_len, uint8_t **ret, size_t *ret_len);

/* Comparison of two secrets whose time depends on neither one's content nor the other's
 * length (a: the peer's guess, b: the secret). */
bool proto_secret_equal(const char *a, size_t a_len, const char *b, size_t b_len);
