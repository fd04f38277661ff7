// What the copies that store past the caches (non-temporal: Crc32cCopy,
// CopyInParallel) share: when they pay, and where their streamed stores may
// begin.
#ifndef GANDIVA_CHECKPOINT_STREAMED_STORES_H_
#define GANDIVA_CHECKPOINT_STREAMED_STORES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace gandiva::checkpoint {

// Streamed stores pay for large copies only: a small one is read back soon,
// and would then come from memory instead of the cache.
inline constexpr size_t kStreamedCopyMin = 64u << 10;

// The bytes from dst to its next 64-byte boundary (at most n), copied the
// plain way: streamed stores are whole aligned lines, none read in first.
inline size_t BytesToLine(const void* dst, size_t n) {
  return std::min(n, (64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64);
}

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_STREAMED_STORES_H_
