// Copying chunks out of a checkpoint stream into a load function's memory,
// checking them in the same pass (Crc32cCopy) where they still need it, on
// two cores where there are several: a restore is a copy bound by memory,
// which one core does not saturate (the other is idle at a job's start-up,
// and after a migration's stream).
#ifndef GANDIVA_CHECKPOINT_CHUNK_COPY_H_
#define GANDIVA_CHECKPOINT_CHUNK_COPY_H_

#include <cstdint>
#include <span>

namespace gandiva::checkpoint {

struct ChunkCopy {
  std::span<const uint8_t> from;
  uint8_t* to;   // from.size() bytes, overlapping no other copy's
  uint32_t crc;  // out: the CRC32C of the bytes copied
};

// Does every copy, each with its checksum: on this thread and, for more than
// one, a helper thread too (when one can be had).
void CopyAndChecksum(std::span<ChunkCopy> copies);
// The same without the checksums (chunks checked already; crc is left as it is).
void CopyInParallel(std::span<ChunkCopy> copies);

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_CHUNK_COPY_H_
