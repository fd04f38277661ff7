// libFuzzer harness: the checkpoint stream reader (job/checkpoint/src/stream.h)
// on arbitrary bytes, then every section read back as a load function would;
// or (kHeldList) the list of chunks a migration's destination holds, which the
// source job reads from its peer (held_chunks.h).
//
// The input is one flags byte, then the stream. Every frame carries CRC32Cs,
// which random mutation almost never gets right, so that the parser behind
// them is reached the harness can repair them first (kFixChecksums): it walks
// the frames as the format lays them out and rewrites the preamble, header and
// payload checksums, the section-end totals and the end frame's totals and
// digest. Without the flag the bytes go in as they are (the checks themselves).
//
// Streamed, the reader is a migration's warm copy: it holds a fresh state of
// a 64 KiB buffer section named "model" (StateRegistry::RegisterBuffer) and
// receives that section straight into the buffer; guard bytes around it must
// come out untouched.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "crc32c.h"
#include "format.h"
#include "fresh_state.h"
#include "held_chunks.h"
#include "io.h"
#include "stream.h"

namespace ck = gandiva::checkpoint;

namespace {

enum Flags : uint8_t {
  kFixChecksums = 1,  // repair checksums and totals before reading
  kStreamed = 2,      // read through Source::Read (a socket), not in place (a file)
  // bits 2..7 when streamed: the source's read size, (value + 1) * 7 bytes
  kCheckAsLoaded = 4,  // in place: chunks checked as loaded (RestoreCheck::kWhileLoading)
  kHeldList = 8,       // in place: the bytes are a held-chunks list, not a stream
};

// A list either parses, and answers for any chunk, or is DataLoss.
int FuzzHeldList(std::span<const uint8_t> bytes) {
  auto held = ck::HeldChunks::Parse(bytes);
  if (!held.ok()) {
    if (held.status().code() != gandiva::StatusCode::kDataLoss) std::abort();
    return 0;
  }
  const uint8_t chunk[64] = {};
  for (size_t i = 0; i < 3; ++i)
    (void)held->Holds("model", i, std::span<const uint8_t>(chunk, 16 * i),
                      ck::Crc32c(chunk, 16 * i));
  return 0;
}

// A source without a mapping that returns at most `step` bytes a read, as a
// socket does: the reader's copying path and its slabs.
class StreamedSource final : public ck::Source {
 public:
  StreamedSource(std::span<const uint8_t> bytes, size_t step, std::unique_ptr<ck::FreshState> fresh)
      : bytes_(bytes), step_(step), fresh_(std::move(fresh)) {}
  std::unique_ptr<ck::FreshState> TakeFresh() override { return std::move(fresh_); }
  gandiva::StatusOr<size_t> Read(void* buf, size_t n) override {
    const size_t got = std::min({n, step_, bytes_.size() - pos_});
    if (got) std::memcpy(buf, bytes_.data() + pos_, got);  // an empty span's data() may be null
    pos_ += got;
    return got;
  }
  std::string Describe() const override { return "fuzz stream"; }

 private:
  std::span<const uint8_t> bytes_;
  size_t step_;
  size_t pos_ = 0;
  std::unique_ptr<ck::FreshState> fresh_;
};

// The warm copy's buffer section, with guard bytes on both sides.
class WarmBuffer {
 public:
  static constexpr size_t kGuard = 4096, kSize = 64u << 10;
  static constexpr uint8_t kFill = 0xa5;
  WarmBuffer() : memory_(kGuard + kSize + kGuard, kFill) {
    const std::span<uint8_t> place(memory_.data() + kGuard, kSize);
    entries_.push_back(std::make_shared<ck::StateEntry>(ck::StateEntry{
        "model", [place](ck::SectionWriter& w) { return w.Write(place.data(), place.size()); },
        [](ck::SectionReader&) { return gandiva::Status::Ok(); }, nullptr, place}));
  }
  const std::vector<std::shared_ptr<const ck::StateEntry>>& entries() const { return entries_; }
  void CheckGuards() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (memory_[i] != kFill || memory_[kGuard + kSize + i] != kFill) std::abort();
  }

 private:
  std::vector<uint8_t> memory_;
  std::vector<std::shared_ptr<const ck::StateEntry>> entries_;
};

void Put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void Put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

// Rewrites what a writer computes (checksums, totals) so that the frames' other
// bytes decide what the reader sees. Frames are walked as laid out; a frame cut
// short by the end of the input is left as it is.
void FixChecksums(std::vector<uint8_t>& s) {
  if (s.size() < ck::kPreambleSize) return;
  Put32(&s[12], ck::Crc32c(s.data(), 12));
  uint64_t off = ck::kPreambleSize, chunks = 0, sections = 0, section_bytes = 0;
  uint32_t digest = 0;
  while (s.size() - off >= sizeof(ck::FrameHeader)) {
    ck::FrameHeader h;
    std::memcpy(&h, &s[off], sizeof(h));
    const uint64_t at = off + sizeof(h);
    if (s.size() - at < h.length) break;
    uint8_t* payload = &s[at];
    if (h.type == ck::kFrameSectionBegin) {
      ++sections;
      section_bytes = 0;
    } else if (h.type == ck::kFrameChunk) {
      ++chunks;
      section_bytes += h.length;
    } else if (h.type == ck::kFrameSectionEnd && h.length == sizeof(ck::SectionEndPayload)) {
      Put64(payload, section_bytes);
    } else if (h.type == ck::kFrameEnd && h.length == sizeof(ck::EndPayload)) {
      Put64(payload, off);
      Put64(payload + 8, chunks);
      Put64(payload + 16, sections);
      Put32(payload + 24, digest);
    }
    h.payload_crc = ck::Crc32c(payload, h.length);
    h.header_crc = ck::Crc32c(&h, offsetof(ck::FrameHeader, header_crc));
    std::memcpy(&s[off], &h, sizeof(h));
    digest = ck::Crc32c(&h.header_crc, sizeof(h.header_crc), digest);
    off = at + h.length;
  }
}

// Reads a section to its end, alternating the two ways a load function reads,
// and checks the reader's accounting: whole, unless a chunk checked as it is
// loaded failed its check (the reader then ends the section short).
gandiva::Status ReadWhole(gandiva::checkpoint::SectionReader& reader) {
  uint8_t buf[97];
  uint64_t total = 0;
  for (bool copy = true;; copy = !copy) {
    const size_t n = copy ? reader.Read(buf, sizeof(buf)) : reader.Next(61).size();
    if (n == 0) break;
    total += n;
  }
  const auto& chunked = dynamic_cast<const ck::ChunkSectionReader&>(reader);
  const bool whole = total == reader.size() && reader.remaining() == 0;
  if (whole == !chunked.error().ok()) std::abort();
  return gandiva::Status::Ok();
}

// Reads a section to its end as ReadWhole does, for a section pulled as the
// stream arrives: whole unless the stream failed (the load then fails).
gandiva::Status ReadWholeLive(gandiva::checkpoint::SectionReader& reader) {
  uint8_t buf[97];
  for (bool copy = true;; copy = !copy) {
    const size_t n = copy ? reader.Read(buf, sizeof(buf)) : reader.Next(61).size();
    if (n == 0) break;
  }
  return gandiva::Status::Ok();
}

// The same stream loaded as it arrives (LoadWhileReading, a warm copy of its
// own), with a loader for every section the whole read found: it must load
// exactly the streams the whole read accepted, and keep the guard bytes.
void LoadLive(std::span<const uint8_t> stream, size_t step,
              const gandiva::StatusOr<ck::VerifiedStream>& verified) {
  WarmBuffer warm;
  auto fresh = ck::FreshState::Capture(warm.entries(), {});
  if (!fresh.ok()) std::abort();
  StreamedSource source(stream, step * 7, std::move(*fresh));
  std::vector<std::shared_ptr<const ck::StateEntry>> entries;
  if (verified.ok()) {
    for (const auto& section : verified->sections)
      entries.push_back(section.name == "model"
                            ? warm.entries()[0]
                            : std::make_shared<ck::StateEntry>(ck::StateEntry{
                                  section.name, nullptr,
                                  [](ck::SectionReader& r) { return ReadWholeLive(r); }, nullptr}));
  } else {
    entries = warm.entries();
  }
  auto loaded = ck::LoadWhileReading(&source, entries);
  warm.CheckGuards();
  if (loaded.ok() != verified.ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  std::vector<uint8_t> stream(data + 1, data + size);
  if (!(flags & kStreamed) && (flags & kHeldList)) return FuzzHeldList(stream);
  if (flags & kFixChecksums) FixChecksums(stream);

  WarmBuffer warm;
  std::unique_ptr<ck::Source> source;
  if (flags & kStreamed) {
    auto fresh = ck::FreshState::Capture(warm.entries(), {});
    if (!fresh.ok()) std::abort();
    source = std::make_unique<StreamedSource>(stream, ((flags >> 2) + 1) * 7, std::move(*fresh));
  } else {
    source = std::make_unique<ck::MemorySource>(stream);
  }
  const bool as_loaded = !(flags & kStreamed) && (flags & kCheckAsLoaded);
  auto verified = ck::ReadStream(
      source.get(), as_loaded ? ck::RestoreCheck::kWhileLoading : ck::RestoreCheck::kBeforeLoading,
      warm.entries());
  warm.CheckGuards();
  if (flags & kStreamed) LoadLive(stream, (flags >> 2) + 1, verified);
  if (!verified.ok()) return 0;

  // Load every section through an entry of its name, as a restoring job does.
  std::vector<std::shared_ptr<const ck::StateEntry>> entries;
  for (const auto& section : verified->sections)
    entries.push_back(std::make_shared<ck::StateEntry>(ck::StateEntry{
        section.name, nullptr, [](ck::SectionReader& r) { return ReadWhole(r); }, nullptr}));
  const gandiva::Status loaded = ck::LoadStream(*verified, entries);  // every section has its entry
  if (!as_loaded) {
    if (!loaded.ok()) std::abort();
    return 0;
  }
  // Checked as loaded, the stream is good exactly when checked before loading.
  ck::MemorySource again(stream);
  if (loaded.ok() != ck::ReadStream(&again).ok()) std::abort();
  if (!loaded.ok() && loaded.code() != gandiva::StatusCode::kDataLoss) std::abort();
  return 0;
}
