// The checkpoint stream parser (stream.h's reader), private to the
// checkpoint code: ReadStream runs it over a whole stream; LoadWhileReading
// pulls it a chunk at a time, as load functions read.
#ifndef GANDIVA_CHECKPOINT_STREAM_PARSER_H_
#define GANDIVA_CHECKPOINT_STREAM_PARSER_H_

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "crc32c.h"
#include "format.h"
#include "fresh_state.h"
#include "gandiva/common/helper_thread.h"
#include "stream.h"

namespace gandiva::checkpoint {

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Faults in a fresh slab's pages on a second thread while the receiving
// thread fills it: on fresh memory the page faults cost as much as the copy
// from the socket. Contents are never touched, so racing the receiver is safe.
class Prefaulter {
 public:
  ~Prefaulter() { Stop(); }
  void Start(uint8_t* p, size_t n) {
    Stop();
    stop_.store(false, std::memory_order_relaxed);
    // Without a thread the receiving thread faults the pages in itself.
    (void)StartHelperThread(&thread_, [this, p, n] {
      constexpr size_t kStep = 2u << 20;
      for (size_t off = 0; off < n && !stop_.load(std::memory_order_relaxed); off += kStep)
        if (::madvise(p + off, std::min(kStep, n - off), MADV_POPULATE_WRITE) != 0) return;
    });
  }
  void Stop() {
    stop_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class Parser {
 public:
  // Chunk checks as `check` says, except that a stream pulled chunk by chunk
  // (NextChunk) has every chunk checked before it is handed out. A source
  // with a fresh state (a migration's warm copy) gives its memory to the
  // stream, and its buffer sections among `entries` are received in place.
  Parser(Source* source, RestoreCheck check,
         const std::vector<std::shared_ptr<const StateEntry>>& entries, VerifiedStream* out);

  // The whole stream, every frame verified.
  Status Run();

  // Pulled as load functions read (LoadWhileReading): the preamble and
  // header frame, ...
  Status Begin();
  // ... then the next section (its begin frame read; the rest of the one
  // before it read and checked first), or nullptr after the end frame, ...
  StatusOr<const VerifiedSection*> NextSection();
  // ... and the open section's next chunk, checked: received into `into`
  // when it fits there whole, else into the stream's own memory. Empty at
  // the section's end.
  StatusOr<std::span<const uint8_t>> NextChunk(std::span<uint8_t> into);

 private:
  // One frame at offset_: read, verified, taken in.
  Status Step();
  // Up to n bytes read from the source into dst; with `crc`, their CRC32C
  // too, each piece as it lands (a bulk connection's piece is one opened frame,
  // still in the cache).
  StatusOr<size_t> Fill(uint8_t* dst, size_t n, uint32_t* crc = nullptr);
  // Where the cursor is, for messages.
  std::string Where() const;
  std::string Describe() const { return " [" + source_->Describe() + "]"; }
  // Where the next chunk of the open section (n bytes) lands: in its buffer
  // section's place; where the puller wants it (into_); over the fresh chunk
  // at its place, if it has the same length; else in slab memory.
  StatusOr<uint8_t*> ChunkMemory(size_t n);
  // The fresh chunk at the place of the open section's next chunk, if it is
  // still as written.
  FreshState::Chunk* FreshAtCursor();
  Status SameChunk(std::span<const uint8_t> payload);
  StatusOr<uint8_t*> Allocate(size_t n);
  // Up to n bytes at stream offset `at` copied into dst: from the mapping, or
  // read from the source (whose cursor is then at `at`).
  StatusOr<size_t> Copy(uint64_t at, uint8_t* dst, size_t n);
  // A frame's text for messages: "chunk N" or "<type> frame".
  std::string FrameWhat(uint8_t type) const;
  Status ReadPreamble();
  // The frame header at offset_, checked (checksum, known type, length bound).
  Status ReadFrameHeader(FrameHeader* h);
  // The payload of the frame whose header is at offset_, checksum verified.
  Status ReadPayload(const FrameHeader& h, std::span<const uint8_t>* payload);
  Status Frame(const FrameHeader& h, std::span<const uint8_t> payload);

  Source* source_;
  std::span<const uint8_t> mapped_;
  std::unique_ptr<FreshState> fresh_;                           // its memory is in out_->storage
  std::unordered_map<std::string, std::span<uint8_t>> places_;  // buffer sections by name
  std::span<uint8_t> place_;                                    // the open section's, if it is one
  std::span<uint8_t> into_;        // where the puller wants the next chunk, if it fits
  const bool defer_chunk_checks_;  // chunk payloads checked by the section readers
  bool payload_checked_ = false;   // the payload just read was checked as it arrived
  VerifiedStream* out_;
  uint64_t offset_ = 0;
  uint32_t digest_ = 0;
  bool seen_header_ = false;
  bool in_section_ = false;
  bool done_ = false;
  VerifiedSection* section_ = nullptr;
  std::vector<uint8_t> scratch_;
  static constexpr size_t kMaxSlab = 256u << 20;
  Prefaulter prefaulter_;
  size_t slab_size_ = 2u << 20;
};

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_STREAM_PARSER_H_
