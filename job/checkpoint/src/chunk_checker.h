// Checks the chunks a stream left unchecked (RestoreCheck::kWhileLoading) on a thread
// of its own, running ahead of the load functions on the loading thread: the
// check and the copy into the job's memory then overlap on two cores instead
// of adding up on one. Each chunk is checked exactly once, by whichever
// thread reaches it first; the loading thread waits only for a chunk the
// other is checking at that moment.
#ifndef GANDIVA_CHECKPOINT_CHUNK_CHECKER_H_
#define GANDIVA_CHECKPOINT_CHUNK_CHECKER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "stream.h"

namespace gandiva::checkpoint {

class ChunkChecker {
 public:
  // No thread yet: see Good().
  explicit ChunkChecker(const VerifiedStream& stream);
  ~ChunkChecker();  // stops the thread (at its current chunk) and joins it
  ChunkChecker(const ChunkChecker&) = delete;
  ChunkChecker& operator=(const ChunkChecker&) = delete;

  // Index of the first chunk of the stream's section `section` (for Good).
  size_t FirstOf(size_t section) const { return first_[section]; }
  // Whether chunk `index` (stream-wide, counting unchecked chunks only)
  // matches its checksum; *crc: the checksum its bytes have. The first call
  // starts the thread that checks ahead.
  bool Good(size_t index, uint32_t* crc);
  // Takes chunk `index` for the caller to check itself (copying it as it
  // checks, Crc32cCopy), then Settle() it; false if it is taken already.
  bool Claim(size_t index);
  void Settle(size_t index, uint32_t crc);

 private:
  enum : uint8_t { kPending, kChecking, kGood, kBad };
  struct Chunk {
    std::span<const uint8_t> bytes;
    uint32_t stored_crc;
    bool good;  // checked as it arrived, or the reader's own bytes: good from the start
  };
  // Checks chunk i if nobody has started it; false if somebody had.
  bool TryCheck(size_t i);
  void Run();

  bool pending_ = false;  // some chunk needs a check: a thread would help

  std::vector<Chunk> chunks_;
  std::vector<size_t> first_;
  std::unique_ptr<std::atomic<uint8_t>[]> state_;
  std::unique_ptr<uint32_t[]> crc_;  // written before state_ says kGood/kBad
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_CHUNK_CHECKER_H_
