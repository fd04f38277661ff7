// CRC32C (Castagnoli), the checksum of every checkpoint chunk: carry-less
// multiplies on 512-bit registers where the CPU has them (crc32c_fold.h), else
// SSE4.2 crc32 instructions on three interleaved streams, else a slicing-by-8
// table. All give the same values.
#ifndef GANDIVA_CHECKPOINT_CRC32C_H_
#define GANDIVA_CHECKPOINT_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace gandiva::checkpoint {

// Extends `crc` (0 for a fresh checksum) over data[0, n).
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// Copies src[0, n) to dst (not overlapping) and extends `crc` over the bytes:
// in one pass where the CPU folds (crc32c_fold.h), else memcpy then Crc32c.
uint32_t Crc32cCopy(void* dst, const void* src, size_t n, uint32_t crc = 0);

// The portable implementation, always; for tests and for CPUs without SSE4.2.
uint32_t Crc32cPortable(const void* data, size_t n, uint32_t crc = 0);

// The crc32-instruction path, always; only where Crc32cIsHardware() (else
// the portable one). For tests and benchmarks: Crc32c() folds where it can.
uint32_t Crc32cSse42(const void* data, size_t n, uint32_t crc = 0);

// True when Crc32c() uses the hardware instructions.
bool Crc32cIsHardware();

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_CRC32C_H_
