// Writing and reading checkpoint streams (format.h). The writer emits frames
// as save functions produce bytes; the reader verifies a whole stream — every
// frame and chunk checksum, the section and end totals — before anything is
// loaded, so a corrupt stream never half-loads a job. Where a failed restore
// ends the process anyway (a job's start-up restore, a migration's copy), the
// chunks may instead be checked as they load (RestoreCheck::kWhileLoading), and still no
// load function sees an unchecked byte.
#ifndef GANDIVA_CHECKPOINT_STREAM_H_
#define GANDIVA_CHECKPOINT_STREAM_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gandiva/checkpoint/registry.h"
#include "gandiva/checkpoint/state_transfer.h"
#include "gandiva/status.h"
#include "io.h"

namespace gandiva::checkpoint {

// Header metadata, in order: job_id, job_name, created_unix_ms, host, pid,
// sections... Values are single-line text.
using Metadata = std::vector<std::pair<std::string, std::string>>;

class CrcAhead;  // crc_ahead.h

class StreamWriter {
 public:
  explicit StreamWriter(Sink* sink);
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Preamble and header frame.
  Status Begin(const Metadata& metadata);
  Status BeginSection(const std::string& name);
  // Section data; see SectionWriter::Write.
  Status Write(const void* data, size_t n);
  Status EndSection();
  // End frame, then Sink::Commit.
  Status Finish();

  // The open section's writer (valid between BeginSection and EndSection).
  SectionWriter& section();
  uint64_t bytes() const { return offset_; }
  uint64_t chunks() const { return chunks_; }

 private:
  class Section;
  Status WriteFrame(uint8_t type, const void* payload, uint32_t length);
  Status WriteFrame(uint8_t type, const void* payload, uint32_t length, uint32_t payload_crc);
  Status EmitChunk(const uint8_t* data, uint32_t length);
  Status EmitChunk(const uint8_t* data, uint32_t length, uint32_t crc);
  Status WriteDirect(const uint8_t* p, size_t n);
  Status FlushBuffer();
  Status Fail(Status s);

  Sink* sink_;
  HeldChunks* const held_;  // what the reader holds already, or nullptr
  Status error_;            // sticky: the first failure
  uint64_t offset_ = 0;
  uint64_t chunks_ = 0;
  uint64_t sections_ = 0;
  uint32_t digest_ = 0;
  bool in_section_ = false;
  std::string section_name_;
  uint64_t section_bytes_ = 0;
  uint64_t section_chunks_ = 0;
  std::unique_ptr<uint8_t[]> buffer_;  // coalesces small writes into one chunk
  uint32_t buffered_ = 0;
  std::unique_ptr<Section> section_writer_;
  std::unique_ptr<CrcAhead> crc_ahead_;  // large writes' checksums, a chunk ahead
};

// A chunk whose payload checksum is still to be checked (RestoreCheck::kWhileLoading).
struct UncheckedChunk {
  uint32_t crc;     // what its frame header says
  uint64_t number;  // its place among the stream's chunks, from 1 (for messages)
  uint64_t offset;  // stream offset of its frame header (for messages)
  // Nothing (more) to check: checked as it arrived from a stream, or the
  // reader's own bytes (a "same" frame that is not a chunk of a buffer).
  bool good = false;
};

struct VerifiedSection {
  std::string name;
  uint64_t bytes = 0;
  uint64_t offset = 0;  // stream offset of its begin frame
  std::vector<std::span<const uint8_t>> chunks;
  // Empty when every chunk was checked as the stream was read; else one per
  // chunk, checked by the section's reader before it hands out a byte of it.
  std::vector<UncheckedChunk> unchecked;
};

// Memory for chunks received from a stream source: large anonymous mappings,
// pre-faulted in one go (per-page faults on fresh memory dominate otherwise).
class Slab {
 public:
  static StatusOr<std::unique_ptr<Slab>> Create(size_t size);
  ~Slab();
  uint8_t* Take(size_t n);  // nullptr when the slab is full
  // Grows the mapping to `size` bytes, keeping its contents; it may move, so
  // only while nothing points into it.
  Status Grow(size_t size);
  // Makes the mapping exactly `size` bytes (at least what was taken): grows
  // as Grow does, or gives the pages past `size` back.
  Status Resize(size_t size);
  // Faults in [offset, size()) for writing (contents unchanged), off the path
  // that will write there.
  void FaultIn(size_t offset);
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  Slab(uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t* data_;
  size_t size_;
  size_t used_ = 0;
};

// A whole stream, checked; its chunks point into the source's mapping or into
// slabs it owns.
struct VerifiedStream {
  Metadata metadata;
  std::vector<VerifiedSection> sections;
  uint64_t stream_bytes = 0;  // end frame included
  uint64_t chunks = 0;
  std::vector<std::unique_ptr<Slab>> storage;
};

// A checksum as error messages show it: "0x%08x".
std::string Hex(uint32_t crc);

// Reads and verifies a stream from source, which must outlive the result
// (its mapping may back the chunks). A stream that is not mapped lands first
// in the memory of the fresh state the source gives (Source::TakeFresh), its
// chunks in place where they match a fresh chunk's place and length, and a
// "same" frame takes the fresh chunk itself. Stops after the end frame: a socket is
// read no further; a mapped file with bytes after it is DataLoss. With
// kWhileLoading, frame headers and the section and end totals are still all
// checked here; the payloads of a mapped stream's chunks and of chunks taken
// from the fresh state are left to LoadStream (`unchecked`), while a streamed
// chunk is checked as it arrives, piece by piece while each is in the cache.
// For a migration's warm copy (a source with a fresh state), a chunk of a
// buffer section in `entries` (StateEntry::place) is received straight into
// the buffer at its offset: the copy is discarded if the restore fails.
StatusOr<VerifiedStream> ReadStream(
    Source* source, RestoreCheck check = RestoreCheck::kBeforeLoading,
    const std::vector<std::shared_ptr<const StateEntry>>& entries = {});

// `metadata` with the header's list of the sections `entries` write, in
// order ("sections": a,b,c), which every reader holds the stream to at its
// end frame and a load as the stream arrives trusts before the sections come.
Metadata WithSectionList(Metadata metadata,
                         const std::vector<std::shared_ptr<const StateEntry>>& entries);

// Writes one section per entry, in order, through the entries' save functions.
Status WriteStream(Sink* sink, const std::vector<std::shared_ptr<const StateEntry>>& entries,
                   const Metadata& metadata, uint64_t* bytes);

// Loads every section of stream into the entry with its name. Checks first,
// before calling any load function, that every section has an entry and every
// entry a section. A chunk left unchecked (RestoreCheck::kWhileLoading) that fails its
// check is DataLoss, whether the load function noticed its short read or not;
// chunks a load function did not read are checked after it returns.
Status LoadStream(const VerifiedStream& stream,
                  const std::vector<std::shared_ptr<const StateEntry>>& entries);

// Reads a stream and loads it as it arrives, for a restore whose failure ends
// the process or discards it (RestoreCheck::kWhileLoading) from a source that
// is not mapped: each load function runs as soon as its section begins, and a
// chunk that its read wants whole is received straight into the load
// function's memory (checked as it arrives: no gd_read returns an unchecked
// byte, but a failed restore may leave unchecked bytes in that memory). The
// section names are checked against the header's list before the first load
// and against the frames that follow. A load function that asks its
// section's size before reading has the rest of the section read first into
// the stream's memory, and copied from there. The result holds that memory
// (the caller frees it off the critical path); its sections' chunks point
// wherever the chunks landed.
StatusOr<VerifiedStream> LoadWhileReading(
    Source* source, const std::vector<std::shared_ptr<const StateEntry>>& entries);

class ChunkChecker;

// A reader over one verified section (what load functions get). A chunk still
// unchecked is checked when the reader first reaches it (by `checker`, which
// may have checked it already, from chunk `first` of its count; here if
// none); a corrupt one ends the section there (short reads) and sets error().
class ChunkSectionReader : public SectionReader {
 public:
  explicit ChunkSectionReader(const VerifiedSection& section, ChunkChecker* checker = nullptr,
                              size_t first = 0)
      : section_(section), checker_(checker), first_(first) {}
  size_t Read(void* out, size_t n) override;
  std::span<const uint8_t> Next(size_t max) override;
  uint64_t size() const override { return section_.bytes; }
  uint64_t remaining() const override { return section_.bytes - consumed_; }
  // Checks the chunks the load function did not reach.
  Status CheckRest();
  const Status& error() const { return error_; }

 private:
  // Whether chunk i may be handed out: checked now if it was not.
  bool Checked(size_t i);
  // Moves the cursor past chunks read to their end.
  void SkipReadChunks();
  // The next chunk, if it is still to be checked, starts at the cursor and
  // fits `room`: copied to dst and checked in the same pass. Its length, or
  // 0 (then nothing was read; error() says if it was corrupt).
  size_t CopyWholeUnchecked(uint8_t* dst, size_t room);
  Status Corrupt(size_t i, uint32_t crc) const;

  const VerifiedSection& section_;
  ChunkChecker* const checker_;
  const size_t first_;
  size_t chunk_ = 0;
  size_t pos_ = 0;  // within chunk_
  uint64_t consumed_ = 0;
  size_t checked_ = 0;  // chunks [0, checked_) passed their check
  Status error_;
};

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_STREAM_H_
