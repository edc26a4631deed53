#pragma once
// The encoders of RFC 8879's three algorithms, for tests that build CompressedCertificate
// messages (pinproxy itself links the decoders only, Sources/CCompression).
#include <zlib.h>
#include <brotli/encode.h>
#include <zstd.h>
