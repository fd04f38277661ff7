// Sizes as people write them on a command line: "4GiB", "512MiB", "64KiB", "1TiB",
// or a plain byte count ("1048576", "1048576B"). Binary units only, so that "4GiB"
// means one thing; decimal ones (GB, MB) are refused rather than guessed at.
#ifndef GANDIVA_COMMON_BYTE_SIZE_H_
#define GANDIVA_COMMON_BYTE_SIZE_H_

#include <cstdint>
#include <string_view>

#include "gandiva/status.h"

namespace gandiva {

// A positive byte count; kInvalidArgument (saying what is accepted) for anything else,
// zero and sizes beyond 64 bits included.
StatusOr<uint64_t> ParseByteSize(std::string_view text);

}  // namespace gandiva

#endif  // GANDIVA_COMMON_BYTE_SIZE_H_
