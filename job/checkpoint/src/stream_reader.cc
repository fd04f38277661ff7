// Checkpoint stream reader (stream.h): verifies every frame of a stream, from
// a mapped file in place or from a socket into slabs, before anything loads.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "crc32c.h"
#include "format.h"
#include "fresh_state.h"
#include "gandiva/common/helper_thread.h"
#include "stream.h"
#include "stream_parser.h"

namespace gandiva::checkpoint {
namespace {

const char* FrameName(uint8_t type) {
  switch (type) {
    case kFrameHeader:
      return "header";
    case kFrameSectionBegin:
      return "section-begin";
    case kFrameChunk:
      return "chunk";
    case kFrameSectionEnd:
      return "section-end";
    case kFrameEnd:
      return "end";
    case kFrameChunkSame:
      return "same-chunk";
    default:
      return "unknown";
  }
}

uint32_t MaxPayload(uint8_t type) {
  switch (type) {
    case kFrameHeader:
      return kMaxHeaderPayload;
    case kFrameSectionBegin:
      return kMaxSectionName;
    case kFrameChunk:
      return kMaxChunkPayload;
    case kFrameSectionEnd:
      return sizeof(SectionEndPayload);
    case kFrameEnd:
      return sizeof(EndPayload);
    case kFrameChunkSame:
      return sizeof(SameChunkPayload);
    default:
      return 0;
  }
}

Metadata DecodeMetadata(std::string_view text) {
  Metadata out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace_back(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
  }
  return out;
}

}  // namespace

Parser::Parser(Source* source, RestoreCheck check,
               const std::vector<std::shared_ptr<const StateEntry>>& entries, VerifiedStream* out)
    : source_(source),
      mapped_(source->Mapped()),
      defer_chunk_checks_(check == RestoreCheck::kWhileLoading),
      out_(out) {
  // The fresh state kept for this restore: its memory is ready, chunks land
  // there, in place of the fresh chunk at their place when they fit it.
  if (mapped_.empty() && (fresh_ = source->TakeFresh())) {
    if (auto memory = fresh_->TakeMemory()) out_->storage.push_back(std::move(memory));
    // A warm copy is discarded if its restore fails: buffer sections may be
    // received where they belong.
    for (const auto& e : entries)
      if (!e->place.empty()) places_.emplace(e->name, e->place);
  }
}

StatusOr<size_t> Parser::Fill(uint8_t* dst, size_t n, uint32_t* crc) {
  size_t got = 0;
  while (got < n) {
    GD_ASSIGN_OR_RETURN(size_t r, source_->Read(dst + got, n - got));
    if (r == 0) break;
    if (crc) *crc = Crc32c(dst + got, r, *crc);
    got += r;
  }
  return got;
}

std::string Parser::Where() const {
  std::string s = "at offset " + std::to_string(offset_);
  if (in_section_) {
    s += " in section '" + section_->name + "' (section byte " + std::to_string(section_->bytes) +
         ", after its chunk " + std::to_string(section_->chunks.size()) + ")";
  } else if (!out_->sections.empty()) {
    s += " after section '" + out_->sections.back().name + "'";
  }
  return s;
}

StatusOr<uint8_t*> Parser::ChunkMemory(size_t n) {
  if (in_section_ && section_->bytes + n <= place_.size()) return place_.data() + section_->bytes;
  if (n <= into_.size()) return into_.data();
  FreshState::Chunk* c = in_section_ ? FreshAtCursor() : nullptr;
  if (c && c->length == n) {
    c->overwritten = true;
    return c->bytes;
  }
  return Allocate(n);
}

FreshState::Chunk* Parser::FreshAtCursor() {
  if (!fresh_) return nullptr;
  FreshState::Chunk* c = fresh_->Find(section_->name, section_->chunks.size());
  // A chunk of a buffer no longer registered as it was is not touched.
  if (c && c->in_buffer &&
      (c->bytes < place_.data() || c->bytes + c->length > place_.data() + place_.size()))
    return nullptr;
  return c && !c->overwritten ? c : nullptr;
}

StatusOr<uint8_t*> Parser::Allocate(size_t n) {
  uint8_t* p = out_->storage.empty() ? nullptr : out_->storage.back()->Take(n);
  if (!p) {
    // Slabs grow with the stream: small states stay small, big ones take few mappings.
    slab_size_ = std::min<size_t>(slab_size_ * 2, kMaxSlab);
    GD_ASSIGN_OR_RETURN(auto slab, Slab::Create(std::max(slab_size_, n)));
    out_->storage.push_back(std::move(slab));
    p = out_->storage.back()->Take(n);
    prefaulter_.Start(p, out_->storage.back()->size());
  }
  return p;
}

StatusOr<size_t> Parser::Copy(uint64_t at, uint8_t* dst, size_t n) {
  if (mapped_.empty()) return Fill(dst, n);
  const size_t got = std::min<size_t>(mapped_.size() - at, n);
  std::memcpy(dst, mapped_.data() + at, got);
  return got;
}

std::string Parser::FrameWhat(uint8_t type) const {
  return type == kFrameChunk ? "chunk " + std::to_string(out_->chunks + 1)
                             : std::string(FrameName(type)) + " frame";
}

Status Parser::Run() {
  GD_RETURN_IF_ERROR(ReadPreamble());
  offset_ = kPreambleSize;
  while (!done_) GD_RETURN_IF_ERROR(Step());
  out_->stream_bytes = offset_;
  if (!mapped_.empty() && offset_ < mapped_.size())
    return DataLoss(std::to_string(mapped_.size() - offset_) +
                    " unexpected bytes after the end frame at offset " + std::to_string(offset_) +
                    Describe());
  return Status::Ok();
}

Status Parser::Step() {
  FrameHeader h;
  GD_RETURN_IF_ERROR(ReadFrameHeader(&h));
  std::span<const uint8_t> payload;
  GD_RETURN_IF_ERROR(ReadPayload(h, &payload));
  GD_RETURN_IF_ERROR(Frame(h, payload));
  offset_ += sizeof(h) + h.length;
  return Status::Ok();
}

Status Parser::Begin() {
  GD_RETURN_IF_ERROR(ReadPreamble());
  offset_ = kPreambleSize;
  return Step();  // the header frame (Frame() refuses any other first)
}

StatusOr<const VerifiedSection*> Parser::NextSection() {
  // What the last load function left unread is still read and checked.
  while (in_section_) {
    GD_ASSIGN_OR_RETURN(std::span<const uint8_t> rest, NextChunk({}));
    (void)rest;
  }
  while (!done_) {
    GD_RETURN_IF_ERROR(Step());
    if (in_section_) return section_;
  }
  out_->stream_bytes = offset_;
  return nullptr;
}

StatusOr<std::span<const uint8_t>> Parser::NextChunk(std::span<uint8_t> into) {
  while (in_section_) {
    const size_t before = section_->chunks.size();
    into_ = into;
    Status s = Step();
    into_ = {};
    GD_RETURN_IF_ERROR(s);
    if (section_->chunks.size() > before) return section_->chunks.back();
  }
  return std::span<const uint8_t>();
}

Status Parser::ReadPreamble() {
  uint8_t pre[kPreambleSize];
  GD_ASSIGN_OR_RETURN(size_t got, Copy(0, pre, kPreambleSize));
  if (got == 0) return DataLoss("empty checkpoint stream: no bytes at all" + Describe());
  if (std::memcmp(pre, kMagic, std::min(got, sizeof(kMagic))) != 0)
    return DataLoss("not a gandiva checkpoint: bad magic at offset 0" + Describe());
  if (got < kPreambleSize)
    return DataLoss("truncated checkpoint: stream ends at offset " + std::to_string(got) +
                    " inside the 16-byte preamble" + Describe());
  uint32_t version, crc;
  std::memcpy(&version, pre + 8, 4);
  std::memcpy(&crc, pre + 12, 4);
  if (Crc32c(pre, 12) != crc)
    return DataLoss("corrupt checkpoint preamble at offset 0: checksum " + Hex(Crc32c(pre, 12)) +
                    " != stored " + Hex(crc) + Describe());
  if (version != kFormatVersion)
    return DataLoss("unsupported checkpoint format version " + std::to_string(version) +
                    " (this build reads version " + std::to_string(kFormatVersion) + ")" +
                    Describe());
  return Status::Ok();
}

Status Parser::ReadFrameHeader(FrameHeader* h) {
  GD_ASSIGN_OR_RETURN(size_t got, Copy(offset_, reinterpret_cast<uint8_t*>(h), sizeof(*h)));
  if (got == 0)
    return DataLoss("missing end frame: stream ends " + Where() + " after " +
                    std::to_string(out_->chunks) + " chunks; the writer did not finish" +
                    Describe());
  if (got < sizeof(*h))
    return DataLoss("truncated checkpoint: stream ends inside a frame header " + Where() +
                    Describe());
  const uint32_t header_crc = Crc32c(h, offsetof(FrameHeader, header_crc));
  if (header_crc != h->header_crc)
    return DataLoss("corrupt frame header " + Where() + ": checksum " + Hex(header_crc) +
                    " != stored " + Hex(h->header_crc) + Describe());
  if (h->length > MaxPayload(h->type))
    return DataLoss(std::string(MaxPayload(h->type) ? "oversized " : "unknown ") + "frame (type " +
                    std::to_string(h->type) + ", " + std::to_string(h->length) + " bytes) " +
                    Where() + Describe());
  return Status::Ok();
}

Status Parser::ReadPayload(const FrameHeader& h, std::span<const uint8_t>* payload) {
  const uint64_t at = offset_ + sizeof(h);
  payload_checked_ = false;
  size_t got;
  if (!mapped_.empty()) {
    got = std::min<size_t>(mapped_.size() - at, h.length);
    *payload = mapped_.subspan(at, got);
  } else if (h.type == kFrameChunk) {
    // A streamed chunk is checked as it arrives, on bytes still in the cache:
    // the receiving thread has the time (the sender's core paces a migration)
    // where a check before or beside the load would read the chunk again.
    GD_ASSIGN_OR_RETURN(uint8_t * dst, ChunkMemory(h.length));
    uint32_t crc = 0;
    GD_ASSIGN_OR_RETURN(got, Fill(dst, h.length, &crc));
    *payload = {dst, got};
    if (got == h.length && crc != h.payload_crc)
      return DataLoss("corrupt " + FrameWhat(h.type) + " " + Where() + ": CRC32C " + Hex(crc) +
                      " != stored " + Hex(h.payload_crc) + Describe());
    payload_checked_ = true;
  } else {
    scratch_.resize(h.length);
    GD_ASSIGN_OR_RETURN(got, Fill(scratch_.data(), h.length));
    *payload = {scratch_.data(), got};
  }
  if (got < h.length)
    return DataLoss("truncated checkpoint: stream ends inside " + FrameWhat(h.type) + " (" +
                    std::to_string(got) + " of " + std::to_string(h.length) +
                    " payload bytes) whose header is " + Where() + Describe());
  if (payload_checked_) return Status::Ok();
  // Left to the loading (Frame() notes it); an empty one has nothing to defer.
  if (defer_chunk_checks_ && h.type == kFrameChunk && h.length > 0) return Status::Ok();
  const uint32_t payload_crc = Crc32c(payload->data(), payload->size());
  if (payload_crc != h.payload_crc)
    return DataLoss("corrupt " + FrameWhat(h.type) + " " + Where() + ": CRC32C " +
                    Hex(payload_crc) + " != stored " + Hex(h.payload_crc) + Describe());
  return Status::Ok();
}

Status Parser::Frame(const FrameHeader& h, std::span<const uint8_t> payload) {
  const auto bad = [&](const std::string& why) {
    return DataLoss("malformed checkpoint: " + why + " " + Where() + Describe());
  };
  if (!seen_header_ && h.type != kFrameHeader) return bad("first frame is not the header frame");
  const uint32_t digest_before = digest_;
  digest_ = Crc32c(&h.header_crc, sizeof(h.header_crc), digest_);
  switch (h.type) {
    case kFrameHeader:
      if (seen_header_) return bad("a second header frame");
      seen_header_ = true;
      out_->metadata = DecodeMetadata(
          std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size()));
      return Status::Ok();
    case kFrameSectionBegin: {
      if (in_section_) return bad("section-begin inside an open section");
      if (payload.empty()) return bad("a section without a name");
      std::string name(reinterpret_cast<const char*>(payload.data()), payload.size());
      for (const auto& s : out_->sections)
        if (s.name == name) return bad("section '" + name + "' appears twice");
      const auto place = places_.find(name);
      place_ = place == places_.end() ? std::span<uint8_t>() : place->second;
      out_->sections.push_back(VerifiedSection{std::move(name), 0, offset_, {}, {}});
      section_ = &out_->sections.back();
      in_section_ = true;
      return Status::Ok();
    }
    case kFrameChunk:
      if (!in_section_) return bad("a chunk outside any section");
      if (!payload.empty()) {
        section_->chunks.push_back(payload);
        if (defer_chunk_checks_)
          section_->unchecked.push_back(
              {h.payload_crc, out_->chunks + 1, offset_, payload_checked_});
      }
      section_->bytes += payload.size();
      ++out_->chunks;
      return Status::Ok();
    case kFrameChunkSame:
      if (!in_section_) return bad("a chunk outside any section");
      return SameChunk(payload);
    case kFrameSectionEnd: {
      if (!in_section_) return bad("section-end without a section");
      SectionEndPayload end;
      if (payload.size() != sizeof(end)) return bad("section-end frame of the wrong size");
      std::memcpy(&end, payload.data(), sizeof(end));
      if (end.bytes != section_->bytes)
        return bad("section '" + section_->name + "' has " + std::to_string(section_->bytes) +
                   " bytes but its section-end frame says " + std::to_string(end.bytes));
      in_section_ = false;
      place_ = {};
      return Status::Ok();
    }
    case kFrameEnd: {
      if (in_section_) return bad("end frame inside section '" + section_->name + "'");
      EndPayload end;
      if (payload.size() != sizeof(end)) return bad("end frame of the wrong size");
      std::memcpy(&end, payload.data(), sizeof(end));
      if (end.stream_bytes != offset_ || end.chunks != out_->chunks ||
          end.sections != out_->sections.size())
        return bad("end frame says " + std::to_string(end.stream_bytes) + " bytes, " +
                   std::to_string(end.chunks) + " chunks, " + std::to_string(end.sections) +
                   " sections; the stream has " + std::to_string(offset_) + ", " +
                   std::to_string(out_->chunks) + ", " + std::to_string(out_->sections.size()));
      if (end.digest != digest_before)
        return bad("frame digest " + Hex(digest_before) + " != " + Hex(end.digest) +
                   " stored in the end frame");
      // The header's list of sections (WithSectionList), which a
      // load as the stream arrives trusts before the sections come, is theirs.
      for (const auto& [key, value] : out_->metadata) {
        if (key != "sections") continue;
        std::string names;
        for (const auto& s : out_->sections) names += (names.empty() ? "" : ",") + s.name;
        if (value != names)
          return bad("the header lists sections '" + value + "' but the stream has '" + names +
                     "'");
      }
      done_ = true;
      return Status::Ok();
    }
    default:
      return bad("unknown frame type " + std::to_string(h.type));
  }
}

// A chunk the writer says this reader holds already: the fresh chunk at its
// place, if length, checksum and tag all say so.
Status Parser::SameChunk(std::span<const uint8_t> payload) {
  SameChunkPayload same;
  if (payload.size() != sizeof(same))
    return DataLoss("malformed checkpoint: same-chunk frame of the wrong size " + Where() +
                    Describe());
  std::memcpy(&same, payload.data(), sizeof(same));
  FreshState::Chunk* c = FreshAtCursor();
  if (!c || same.length == 0 || c->length != same.length || c->crc != same.crc ||
      std::memcmp(c->tag.data(), same.tag, sizeof(same.tag)) != 0)
    return DataLoss("chunk " + std::to_string(out_->chunks + 1) + " " + Where() +
                    " was sent as one this process holds, but " +
                    (c ? "its own chunk there differs" : "it holds none there") + Describe());
  // A chunk of the job's own buffer is checked again (below, or as it loads):
  // the job might have changed it since the copy was tagged.
  if (c->in_buffer && !defer_chunk_checks_ && Crc32c(c->bytes, c->length) != c->crc)
    return DataLoss("chunk " + std::to_string(out_->chunks + 1) + " " + Where() +
                    " was sent as one this process holds, but its buffer changed since" +
                    Describe());
  c->overwritten = true;  // taken: no later frame may claim it
  section_->chunks.emplace_back(c->bytes, c->length);
  if (defer_chunk_checks_)
    section_->unchecked.push_back({c->crc, out_->chunks + 1, offset_, !c->in_buffer});
  section_->bytes += c->length;
  ++out_->chunks;
  return Status::Ok();
}

StatusOr<std::unique_ptr<Slab>> Slab::Create(size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return ResourceExhausted("no memory to receive a checkpoint (" + std::to_string(size) +
                             " more bytes)");
  return std::unique_ptr<Slab>(new Slab(static_cast<uint8_t*>(p), size));
}

Slab::~Slab() { ::munmap(data_, size_); }

Status Slab::Grow(size_t size) {
  if (size <= size_) return Status::Ok();
  return Resize(size);
}

Status Slab::Resize(size_t size) {
  size = std::max(size, used_);
  if (size == size_) return Status::Ok();
  void* p = ::mremap(data_, size_, size, MREMAP_MAYMOVE);
  if (p == MAP_FAILED)
    return ResourceExhausted("no memory to hold a checkpoint stream (" + std::to_string(size) +
                             " bytes)");
  data_ = static_cast<uint8_t*>(p);
  size_ = size;
  return Status::Ok();
}

void Slab::FaultIn(size_t offset) {
  offset = std::min(size_, (offset + 4095) & ~size_t{4095});
  if (offset < size_ && ::madvise(data_ + offset, size_ - offset, MADV_POPULATE_WRITE) != 0)
    std::memset(data_ + offset, 0, size_ - offset);  // a kernel without it: touch every page
}

uint8_t* Slab::Take(size_t n) {
  if (size_ - used_ < n) return nullptr;
  uint8_t* p = data_ + used_;
  used_ += (n + 63) & ~size_t{63};
  if (used_ > size_) used_ = size_;
  return p;
}

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08" PRIx32, v);
  return buf;
}

StatusOr<VerifiedStream> ReadStream(Source* source, RestoreCheck check,
                                    const std::vector<std::shared_ptr<const StateEntry>>& entries) {
  VerifiedStream out;
  Parser parser(source, check, entries, &out);
  GD_RETURN_IF_ERROR(parser.Run());
  return out;
}

}  // namespace gandiva::checkpoint
