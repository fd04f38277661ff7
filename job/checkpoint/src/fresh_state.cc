// The warm copy's fresh state as a pre-copy (fresh_state.h).
#include "fresh_state.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "crc32c.h"
#include "format.h"
#include "gandiva/sealed/sealed_channel.h"
#include "held_chunks.h"

namespace gandiva::checkpoint {
namespace {

// The first size of the memory a fresh state is written into; it doubles as
// the stream needs (an untouched mapping costs nothing but address space).
constexpr size_t kFirstSlab = 16u << 20;

// Appends a stream to the front of a slab, growing it as it fills.
class SlabSink : public Sink {
 public:
  explicit SlabSink(Slab* slab) : slab_(slab) {}
  Status WriteV(const struct iovec* iov, int count) override {
    for (int i = 0; i < count; ++i) {
      if (slab_->size() - used_ < iov[i].iov_len)
        GD_RETURN_IF_ERROR(slab_->Grow(std::max(2 * slab_->size(), used_ + iov[i].iov_len)));
      std::memcpy(slab_->data() + used_, iov[i].iov_base, iov[i].iov_len);
      used_ += iov[i].iov_len;
    }
    return Status::Ok();
  }
  Status Commit() override { return Status::Ok(); }
  std::string Describe() const override { return "memory kept for the arriving state"; }
  size_t used() const { return used_; }

 private:
  Slab* slab_;
  size_t used_ = 0;
};

std::mutex g_fresh_mu;
std::unique_ptr<FreshState> g_fresh;  // guarded by g_fresh_mu

}  // namespace

StatusOr<std::unique_ptr<FreshState>> FreshState::Capture(
    const std::vector<std::shared_ptr<const StateEntry>>& entries, const Metadata& metadata) {
  std::unique_ptr<FreshState> fresh(new FreshState());
  // Buffer sections are not copied: their chunks are the buffer's own bytes
  // (below). The rest is written as a stream into memory kept for it.
  std::vector<std::shared_ptr<const StateEntry>> written;
  for (const auto& e : entries)
    if (e->place.empty()) written.push_back(e);
  GD_ASSIGN_OR_RETURN(fresh->memory_, Slab::Create(kFirstSlab));
  Slab& slab = *fresh->memory_;
  SlabSink sink(&slab);
  // Its header lists the sections it holds (the reader holds it to that).
  GD_RETURN_IF_ERROR(
      WriteStream(&sink, written, WithSectionList(metadata, written), &fresh->stream_bytes_));
  // Room for a source whose state has grown a little since it started, and
  // for the 64-byte rounding of chunks that arrive elsewhere than in place,
  // faulted in here too, off the migration's downtime. Not more: the sink
  // grew the mapping by doubling, and faulting in all of it took a 1 GiB
  // state's copy to 2 GiB of memory (and twice the time).
  GD_RETURN_IF_ERROR(slab.Resize(sink.used() + sink.used() / 64 + (1u << 20)));
  (void)slab.Take(sink.used());
  slab.FaultIn(sink.used());

  // The stream is ours and whole: its headers are parsed in place, its
  // payload checksums are the ones the writer just computed.
  MemorySource source({slab.data(), sink.used()});
  GD_ASSIGN_OR_RETURN(VerifiedStream parsed, ReadStream(&source, RestoreCheck::kWhileLoading));
  GD_ASSIGN_OR_RETURN(fresh->key_, sealed::NewBulkKey());  // after the chunks were written
  sealed::ChunkTagger tagger(fresh->key_);
  // A chunk's tag names its place (section in the order of the manifest,
  // index), so that no GMAC nonce repeats under the key (chunk_tag.h).
  for (const VerifiedSection& s : parsed.sections) {
    const auto section = static_cast<uint32_t>(fresh->sections_.size());
    std::vector<Chunk> chunks;
    chunks.reserve(s.chunks.size());
    for (size_t i = 0; i < s.chunks.size(); ++i) {
      const std::span<const uint8_t> bytes = s.chunks[i];
      const uint32_t crc =
          s.unchecked.empty() ? Crc32c(bytes.data(), bytes.size()) : s.unchecked[i].crc;
      GD_ASSIGN_OR_RETURN(sealed::ChunkTag tag, tagger.Of({section, i}, bytes));
      chunks.push_back(Chunk{const_cast<uint8_t*>(bytes.data()),
                             static_cast<uint32_t>(bytes.size()), crc, tag, false, false});
    }
    fresh->sections_.emplace_back(s.name, std::move(chunks));
  }
  // A buffer section in the chunks its one write makes (stream_writer.cc):
  // whole chunks, then the rest. The parked copy does not change its buffer
  // (gd_register_buffer's contract); each such chunk is checked again as it
  // loads all the same, so a buffer changed after all fails the restore.
  for (const auto& e : entries) {
    if (e->place.empty()) continue;
    const auto section = static_cast<uint32_t>(fresh->sections_.size());
    std::vector<Chunk> chunks;
    for (size_t off = 0; off < e->place.size(); off += kMaxChunkPayload) {
      const std::span<uint8_t> bytes =
          e->place.subspan(off, std::min<size_t>(kMaxChunkPayload, e->place.size() - off));
      GD_ASSIGN_OR_RETURN(sealed::ChunkTag tag,
                          tagger.Of({section, off / kMaxChunkPayload}, bytes));
      chunks.push_back(Chunk{bytes.data(), static_cast<uint32_t>(bytes.size()),
                             Crc32c(bytes.data(), bytes.size()), tag, false, true});
    }
    fresh->stream_bytes_ += e->place.size();
    fresh->sections_.emplace_back(e->name, std::move(chunks));
    fresh->buffers_.push_back(e);
  }
  return fresh;
}

std::vector<uint8_t> FreshState::Manifest() const {
  std::vector<HeldSection> sections;
  for (const auto& [name, chunks] : sections_) {
    HeldSection held{name, {}};
    for (const Chunk& c : chunks) held.chunks.push_back({c.length, c.crc, c.tag});
    sections.push_back(std::move(held));
  }
  std::vector<uint8_t> manifest = EncodeHeldChunks(key_, sections);
  if (manifest.size() > sealed::kMaxSealedPayload) return {};  // ~1 TiB of state: send it all
  return manifest;
}

FreshState::Chunk* FreshState::Find(const std::string& section, size_t index) {
  for (auto& [name, chunks] : sections_)
    if (name == section) return index < chunks.size() ? &chunks[index] : nullptr;
  return nullptr;
}

void KeepFreshState(std::unique_ptr<FreshState> fresh) {
  std::lock_guard lock(g_fresh_mu);
  g_fresh = std::move(fresh);
}

std::unique_ptr<FreshState> TakeFreshState() {
  std::lock_guard lock(g_fresh_mu);
  return std::move(g_fresh);
}

}  // namespace gandiva::checkpoint
