// CopyAndChecksum: see chunk_copy.h.
#include "chunk_copy.h"

#include <atomic>
#include <thread>

#include "crc32c.h"
#include "helper_thread.h"

namespace gandiva::checkpoint {

void CopyAndChecksum(std::span<ChunkCopy> copies) {
  // The two threads take the chunks in turn, from one cursor.
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < copies.size();)
      copies[i].crc = Crc32cCopy(copies[i].to, copies[i].from.data(), copies[i].from.size());
  };
  std::thread helper;
  const bool helped = copies.size() > 1 && StartHelperThread(&helper, work);
  work();
  if (helped) helper.join();
}

}  // namespace gandiva::checkpoint
