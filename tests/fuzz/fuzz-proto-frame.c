/* Every inbound binary frame, on both ends. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "lib/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_frame f;
	struct proto_error err = {0};

	if (proto_frame_parse(data, size, &f, &err) == 0) {
		if (f.len + PROTO_FRAME_HEADER != size || f.seq == 0 ||
		    f.stream >= _PROTO_STREAM_MAX)
			__builtin_trap();
		uint8_t h[PROTO_FRAME_HEADER];
		proto_frame_header_put(h, f.stream, f.flags, f.cmd, f.seq);
		for (size_t i = 0; i < PROTO_FRAME_HEADER; i++)
			if (h[i] != data[i])
				__builtin_trap();
	}
	return 0;
}
