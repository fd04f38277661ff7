// Checkpoint stream writer (stream.h): frames with checksums, small writes
// coalesced into chunks, large ones emitted in place.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>

#include "crc32c.h"
#include "crc_ahead.h"
#include "format.h"
#include "held_chunks.h"
#include "stream.h"

namespace gandiva::checkpoint {
namespace {

// Writes at least this large bypass the coalescing buffer: no extra copy.
constexpr size_t kDirectWrite = 256u << 10;

std::string EncodeMetadata(const Metadata& metadata) {
  std::string out;
  for (const auto& [key, value] : metadata) {
    std::string v = value;
    std::replace(v.begin(), v.end(), '\n', ' ');
    out += key + "=" + v + "\n";
  }
  return out;
}

}  // namespace

class StreamWriter::Section : public SectionWriter {
 public:
  explicit Section(StreamWriter* w) : w_(w) {}
  Status Write(const void* data, size_t n) override { return w_->Write(data, n); }
  uint64_t written() const override { return w_->section_bytes_ + w_->buffered_; }

 private:
  StreamWriter* w_;
};

StreamWriter::StreamWriter(Sink* sink)
    : sink_(sink), held_(sink->held()), section_writer_(new Section(this)) {}
StreamWriter::~StreamWriter() = default;

SectionWriter& StreamWriter::section() { return *section_writer_; }

Status StreamWriter::Fail(Status s) {
  if (error_.ok()) error_ = s;
  return error_;
}

Status StreamWriter::WriteFrame(uint8_t type, const void* payload, uint32_t length) {
  return WriteFrame(type, payload, length, Crc32c(payload, length));
}

Status StreamWriter::WriteFrame(uint8_t type, const void* payload, uint32_t length,
                                uint32_t payload_crc) {
  if (!error_.ok()) return error_;
  FrameHeader h{};
  h.type = type;
  h.length = length;
  h.payload_crc = payload_crc;
  h.header_crc = Crc32c(&h, offsetof(FrameHeader, header_crc));
  digest_ = Crc32c(&h.header_crc, sizeof(h.header_crc), digest_);
  struct iovec iov[2] = {{&h, sizeof(h)}, {const_cast<void*>(payload), length}};
  Status s = sink_->WriteV(iov, length ? 2 : 1);
  if (!s.ok()) return Fail(s);
  offset_ += sizeof(h) + length;
  return Status::Ok();
}

Status StreamWriter::Begin(const Metadata& metadata) {
  uint8_t preamble[kPreambleSize];
  std::memcpy(preamble, kMagic, sizeof(kMagic));
  std::memcpy(preamble + 8, &kFormatVersion, 4);
  const uint32_t crc = Crc32c(preamble, 12);
  std::memcpy(preamble + 12, &crc, 4);
  struct iovec iov = {preamble, sizeof(preamble)};
  Status s = sink_->WriteV(&iov, 1);
  if (!s.ok()) return Fail(s);
  offset_ += sizeof(preamble);
  const std::string text = EncodeMetadata(metadata);
  if (text.size() > kMaxHeaderPayload)
    return Fail(InvalidArgument("checkpoint metadata too large"));
  return WriteFrame(kFrameHeader, text.data(), static_cast<uint32_t>(text.size()));
}

Status StreamWriter::BeginSection(const std::string& name) {
  if (in_section_) return Fail(FailedPrecondition("section '" + section_name_ + "' is still open"));
  if (name.empty() || name.size() > kMaxSectionName)
    return Fail(InvalidArgument("bad section name '" + name + "'"));
  GD_RETURN_IF_ERROR(
      WriteFrame(kFrameSectionBegin, name.data(), static_cast<uint32_t>(name.size())));
  in_section_ = true;
  section_name_ = name;
  section_bytes_ = 0;
  section_chunks_ = 0;
  return Status::Ok();
}

Status StreamWriter::EmitChunk(const uint8_t* data, uint32_t length) {
  return EmitChunk(data, length, Crc32c(data, length));
}

Status StreamWriter::EmitChunk(const uint8_t* data, uint32_t length, uint32_t crc) {
  if (!error_.ok()) return error_;
  // A chunk the reader holds already (a migration's destination) is named,
  // not sent.
  std::optional<sealed::ChunkTag> tag;
  if (held_) tag = held_->Holds(section_name_, section_chunks_, {data, length}, crc);
  if (tag) {
    SameChunkPayload same{length, crc, {}};
    std::memcpy(same.tag, tag->data(), sizeof(same.tag));
    GD_RETURN_IF_ERROR(WriteFrame(kFrameChunkSame, &same, sizeof(same)));
  } else {
    GD_RETURN_IF_ERROR(WriteFrame(kFrameChunk, data, length, crc));
  }
  ++chunks_;
  ++section_chunks_;
  section_bytes_ += length;
  return Status::Ok();
}

Status StreamWriter::FlushBuffer() {
  if (buffered_ == 0) return Status::Ok();
  const uint32_t n = buffered_;
  buffered_ = 0;
  return EmitChunk(buffer_.get(), n);
}

Status StreamWriter::Write(const void* data, size_t n) {
  if (!error_.ok()) return error_;
  if (!in_section_) return Fail(FailedPrecondition("checkpoint data written outside a section"));
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    if (n >= kDirectWrite) {
      GD_RETURN_IF_ERROR(FlushBuffer());
      return WriteDirect(p, n);
    }
    if (!buffer_) buffer_.reset(new uint8_t[kMaxChunkPayload]);
    const size_t take = std::min<size_t>(n, kMaxChunkPayload - buffered_);
    std::memcpy(buffer_.get() + buffered_, p, take);
    buffered_ += static_cast<uint32_t>(take);
    p += take;
    n -= take;
    if (buffered_ == kMaxChunkPayload) GD_RETURN_IF_ERROR(FlushBuffer());
  }
  return Status::Ok();
}

// Whole chunks straight from the caller's bytes (the rest, under
// kDirectWrite, buffered), each chunk's checksum computed ahead, beside the
// write of the one before it.
Status StreamWriter::WriteDirect(const uint8_t* p, size_t n) {
  if (!crc_ahead_) crc_ahead_ = std::make_unique<CrcAhead>();
  CrcAhead& ahead = *crc_ahead_;
  Status s;
  while (s.ok() && n >= kDirectWrite) {
    const uint32_t len = static_cast<uint32_t>(std::min<size_t>(n, kMaxChunkPayload));
    const uint32_t crc = ahead.Of(p, len);
    const size_t rest = n - len;
    if (rest >= kDirectWrite) ahead.Start(p + len, std::min<size_t>(rest, kMaxChunkPayload));
    s = EmitChunk(p, len, crc);
    p += len;
    n = rest;
  }
  ahead.Settle();  // nothing reads the caller's bytes once this returns
  if (!s.ok() || n == 0) return s;
  return Write(p, n);
}

Status StreamWriter::EndSection() {
  if (!in_section_) return Fail(FailedPrecondition("no section is open"));
  GD_RETURN_IF_ERROR(FlushBuffer());
  SectionEndPayload end{section_bytes_, section_chunks_};
  GD_RETURN_IF_ERROR(WriteFrame(kFrameSectionEnd, &end, sizeof(end)));
  in_section_ = false;
  ++sections_;
  return Status::Ok();
}

Status StreamWriter::Finish() {
  if (in_section_) return Fail(FailedPrecondition("section '" + section_name_ + "' is still open"));
  EndPayload end{};
  end.stream_bytes = offset_;
  end.chunks = chunks_;
  end.sections = sections_;
  end.digest = digest_;
  GD_RETURN_IF_ERROR(WriteFrame(kFrameEnd, &end, sizeof(end)));
  Status s = sink_->Commit();
  if (!s.ok()) return Fail(s);
  return Status::Ok();
}

Metadata WithSectionList(Metadata metadata,
                         const std::vector<std::shared_ptr<const StateEntry>>& entries) {
  std::string names;
  for (const auto& e : entries) names += (names.empty() ? "" : ",") + e->name;
  metadata.emplace_back("sections", names);
  return metadata;
}

Status WriteStream(Sink* sink, const std::vector<std::shared_ptr<const StateEntry>>& entries,
                   const Metadata& metadata, uint64_t* bytes) {
  StreamWriter w(sink);
  *bytes = 0;
  Status s = w.Begin(metadata);
  for (size_t i = 0; s.ok() && i < entries.size(); ++i) {
    const StateEntry& e = *entries[i];
    s = w.BeginSection(e.name);
    if (!s.ok()) break;
    Status saved = e.save(w.section());
    // A failed write is the root cause of a save function's failure: say that.
    Status written = w.section().Write(nullptr, 0);
    if (!written.ok()) {
      s = Status(written.code(), "saving section '" + e.name + "' to " + sink->Describe() + ": " +
                                     written.message());
      break;
    }
    if (!saved.ok()) {
      s = Status(saved.code(), "saving section '" + e.name + "': " + saved.message());
      break;
    }
    s = w.EndSection();
  }
  if (s.ok()) s = w.Finish();
  *bytes = w.bytes();
  if (!s.ok() && s.message().find(sink->Describe()) == std::string::npos)
    s = Status(s.code(), s.message() + " (" + sink->Describe() + ")");
  return s;
}

}  // namespace gandiva::checkpoint
