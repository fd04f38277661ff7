// CRC32C by carry-less multiplication (VPCLMULQDQ on 512-bit registers): the
// bytes are folded 256 at a time into four registers, each fold a multiply by
// x^2048 modulo the polynomial, and only the last 16 bytes and the tail go
// through the crc32 instruction. The crc32 instruction alone retires 8 bytes a
// cycle at best (three interleaved streams, crc32c.cc): 70 ms per GiB on the
// 2-vCPU VM, more than the memcpy the loads do beside it. Folding runs at
// memory speed. crc32c.cc calls it where the CPU has the instructions.
#ifndef GANDIVA_CHECKPOINT_CRC32C_FOLD_H_
#define GANDIVA_CHECKPOINT_CRC32C_FOLD_H_

#include <cstddef>
#include <cstdint>

namespace gandiva::checkpoint {

// True when this CPU has AVX-512F, VPCLMULQDQ and SSE4.2.
bool Crc32cCanFold();

// Extends `crc` over data[0, n) as Crc32c() does. Only where Crc32cCanFold().
uint32_t Crc32cFold(const void* data, size_t n, uint32_t crc);

// Copies src[0, n) to dst and extends `crc` over it in the same pass: the
// bytes are read once, and stored past the caches (non-temporal) from dst's
// first 64-byte boundary on. Only where Crc32cCanFold().
uint32_t Crc32cFoldCopy(void* dst, const void* src, size_t n, uint32_t crc);

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_CRC32C_FOLD_H_
