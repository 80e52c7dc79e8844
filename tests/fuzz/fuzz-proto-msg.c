/* Every inbound JSON control message, on both ends: parse, request, exec.start fields. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The answer to a refused message is valid UTF-8, whatever the message quoted. */
static void answer_is_utf8(const struct proto_error *err)
{
	char *a = proto_error_build("f", err->code, err->message);

	if (a && !proto_utf8_valid(a, strlen(a)))
		__builtin_trap();
	free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_error err = {0};
	struct proto_request req;
	struct proto_exec_start st;
	cJSON *root = NULL;
	uint64_t u;
	bool b;
	const char *s;

	if (proto_parse((const char *)data, size, &root, &err) < 0) {
		if (err.code == PROTO_E_OK || !memchr(err.message, 0, sizeof(err.message)))
			__builtin_trap();
		answer_is_utf8(&err);
		return 0;
	}
	if (proto_request_parse(root, PROTO_MAX_ID, &req, &err) < 0)
		answer_is_utf8(&err);
	if (proto_exec_start_parse(root, &st, &err) == 0)
		proto_exec_start_done(&st);
	else
		answer_is_utf8(&err);
	(void)proto_get_u64(root, "seq", UINT64_MAX, &u, &err);
	(void)proto_get_bool(root, "pty", &b, &err);
	if (proto_get_string(root, "data", PROTO_MAX_STRING, &s, &err) == 0) {
		uint8_t *d = NULL;
		size_t n;
		if (proto_base64_decode(s, strlen(s), &d, &n) == 0)
			free(d);
	}
	cJSON_Delete(root);
	return 0;
}
