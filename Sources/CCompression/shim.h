#pragma once
// RFC 8879's three certificate compression algorithms, decoders only, from Debian's zlib1g-dev,
// libbrotli-dev and libzstd-dev. Used by TLSInspection alone.
#include <zlib.h>
#include <brotli/decode.h>
#include <zstd.h>
#include <zstd_errors.h>

// inflateInit is a macro (it passes the header's version and sizeof(z_stream) for zlib to check),
// which Swift cannot call.
static inline int ccompression_inflate_init(z_stream *stream) {
    return inflateInit(stream);
}
