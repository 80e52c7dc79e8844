/* The WebSocket header that pistis's splice path reads off the socket itself
 * (proto_ws_binary_header), against a plain field-by-field decode of RFC 6455 5.2: it
 * takes exactly the whole headers of final, unmasked binary frames with no reserved bit
 * and a minimal length, with that length, and nothing else. */
#include <stddef.h>
#include <stdint.h>

#include "lib/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t plen = 0x5a5a5a5a5a5a5a5aull, want_len = 0;
	size_t got = proto_ws_binary_header(data, size, &plen), want = 0;

	if (size >= 2) {
		unsigned fin = data[0] >> 7, rsv = (data[0] >> 4) & 7, opcode = data[0] & 15;
		unsigned masked = data[1] >> 7, len7 = data[1] & 127;
		size_t ext = len7 == 126 ? 2 : len7 == 127 ? 8 : 0;
		int minimal = 1;

		if (size >= 2 + ext) {
			want_len = len7;
			if (ext) {
				want_len = 0;
				for (size_t i = 0; i < ext; i++)
					want_len = want_len * 256 + data[2 + i];
				minimal = ext == 2 ? want_len > 125 : want_len > 65535;
				if (ext == 8 && want_len >= (1ull << 63))
					minimal = 0;
			}
			if (fin && !rsv && opcode == 2 && !masked && minimal)
				want = 2 + ext;
		}
	}
	if (got != want)
		__builtin_trap();
	if (got && plen != want_len)
		__builtin_trap();
	if (!got && plen != 0x5a5a5a5a5a5a5a5aull)
		__builtin_trap(); /* *plen untouched on a refusal */
	return 0;
}
