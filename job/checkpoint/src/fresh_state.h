// A migration's warm copy keeps its own fresh state, as written at its first
// boundary, as the pre-copy of the state that will arrive.
//
// The copy (GANDIVA_ARRIVING) runs its save functions while the source still
// trains: into memory it keeps for the arriving stream, so that memory is
// faulted in before the downtime (on fresh memory the kernel's page zeroing
// alone cost as much as the transfer). Each chunk of that fresh stream is
// tagged under a key drawn then (gandiva/sealed/chunk_tag.h), and the list
// (held_chunks.h) is the copy's one reply to the source job on the bulk
// connection. At the stop, the source sends a "same" frame for every chunk the
// copy holds already, and the reader takes that chunk where it lies; a chunk
// that changed arrives in place over the copy's own at the same place. Nothing
// of this asks more of a save function than a checkpoint does.
#ifndef GANDIVA_CHECKPOINT_FRESH_STATE_H_
#define GANDIVA_CHECKPOINT_FRESH_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gandiva/checkpoint/registry.h"
#include "gandiva/sealed/chunk_tag.h"
#include "gandiva/status.h"
#include "stream.h"

namespace gandiva::checkpoint {

class FreshState {
 public:
  struct Chunk {
    uint8_t* bytes;
    uint32_t length;
    uint32_t crc;
    sealed::ChunkTag tag;
    bool overwritten;  // an arriving chunk took its place
    bool in_buffer;    // the job's own buffer section, not a copy: checked as it loads
  };

  // Writes the registered state as a stream into memory kept for the arriving
  // one (with a little room for a state that grew, faulted in), finds its
  // chunks in place and tags each under a new key. A buffer section
  // (StateEntry::place) is not copied: its chunks are the buffer itself,
  // which arriving chunks then overwrite in place.
  static StatusOr<std::unique_ptr<FreshState>> Capture(
      const std::vector<std::shared_ptr<const StateEntry>>& entries, const Metadata& metadata);

  // What the copy holds, for its source (held_chunks.h); empty when the list
  // would not fit the reply.
  std::vector<uint8_t> Manifest() const;
  // Chunk `index` of section `section`, as written; nullptr if there is none.
  Chunk* Find(const std::string& section, size_t index);
  // The memory the chunks lie in, with its unused room; the chunks stay valid
  // while the slab lives.
  std::unique_ptr<Slab> TakeMemory() { return std::move(memory_); }
  uint64_t stream_bytes() const { return stream_bytes_; }

 private:
  FreshState() = default;
  sealed::BulkKey key_{};
  std::unique_ptr<Slab> memory_;
  // The buffer sections whose chunks are their own memory: kept registered
  // as captured (a Python buffer's export with them).
  std::vector<std::shared_ptr<const StateEntry>> buffers_;
  uint64_t stream_bytes_ = 0;
  std::vector<std::pair<std::string, std::vector<Chunk>>> sections_;
};

// The one fresh state a process keeps between its first boundary and the
// restore it is for (which takes it). Thread-safe.
void KeepFreshState(std::unique_ptr<FreshState> fresh);
std::unique_ptr<FreshState> TakeFreshState();

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_FRESH_STATE_H_
