// ChunkChecker: see chunk_checker.h.
#include "chunk_checker.h"

#include "crc32c.h"
#include "gandiva/common/helper_thread.h"

namespace gandiva::checkpoint {

ChunkChecker::ChunkChecker(const VerifiedStream& stream) {
  for (const auto& section : stream.sections) {
    first_.push_back(chunks_.size());
    for (size_t i = 0; i < section.unchecked.size(); ++i)
      chunks_.push_back({section.chunks[i], section.unchecked[i].crc, section.unchecked[i].good});
  }
  if (chunks_.empty()) return;
  state_ = std::make_unique<std::atomic<uint8_t>[]>(chunks_.size());
  crc_ = std::make_unique<uint32_t[]>(chunks_.size());
  for (size_t i = 0; i < chunks_.size(); ++i) {
    crc_[i] = chunks_[i].stored_crc;
    state_[i].store(chunks_[i].good ? kGood : kPending, std::memory_order_relaxed);
    pending_ |= !chunks_[i].good;
  }
}

ChunkChecker::~ChunkChecker() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

bool ChunkChecker::TryCheck(size_t i) {
  if (!Claim(i)) return false;
  Settle(i, Crc32c(chunks_[i].bytes.data(), chunks_[i].bytes.size()));
  return true;
}

bool ChunkChecker::Claim(size_t index) {
  uint8_t expected = kPending;
  return state_[index].compare_exchange_strong(expected, kChecking, std::memory_order_acquire);
}

void ChunkChecker::Settle(size_t index, uint32_t crc) {
  crc_[index] = crc;
  state_[index].store(crc == chunks_[index].stored_crc ? kGood : kBad, std::memory_order_release);
}

void ChunkChecker::Run() {
  for (size_t i = 0; i < chunks_.size() && !stop_.load(std::memory_order_relaxed); ++i)
    (void)TryCheck(i);
}

bool ChunkChecker::Good(size_t index, uint32_t* crc) {
  // Started at the first chunk a load reads other than whole (a load that
  // reads whole chunks checks them as it copies them, Claim): every chunk
  // checked as it arrived (a migration that sent them all) needs no thread,
  // and without one the loading thread checks every chunk itself.
  if (pending_ && !thread_.joinable()) {
    pending_ = false;
    (void)StartHelperThread(&thread_, [this] { Run(); });
  }
  (void)TryCheck(index);
  uint8_t s;
  // The other thread is checking it: at most one chunk's check (~0.3 ms per 4 MiB).
  while ((s = state_[index].load(std::memory_order_acquire)) == kChecking)
    std::this_thread::yield();
  *crc = crc_[index];
  return s == kGood;
}

}  // namespace gandiva::checkpoint
