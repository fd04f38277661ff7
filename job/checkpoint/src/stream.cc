// Checkpoint stream writer and verifying reader.
#include "stream.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

#include "crc32c.h"
#include "format.h"

namespace gandiva::checkpoint {
namespace {

// Writes at least this large bypass the coalescing buffer: no extra copy.
constexpr size_t kDirectWrite = 256u << 10;

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08" PRIx32, v);
  return buf;
}

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
    default:
      return 0;
  }
}

std::string EncodeMetadata(const Metadata& metadata) {
  std::string out;
  for (const auto& [key, value] : metadata) {
    std::string v = value;
    std::replace(v.begin(), v.end(), '\n', ' ');
    out += key + "=" + v + "\n";
  }
  return out;
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

// ---- writer ---------------------------------------------------------------

class StreamWriter::Section : public SectionWriter {
 public:
  explicit Section(StreamWriter* w) : w_(w) {}
  Status Write(const void* data, size_t n) override { return w_->Write(data, n); }
  uint64_t written() const override { return w_->section_bytes_ + w_->buffered_; }

 private:
  StreamWriter* w_;
};

StreamWriter::StreamWriter(Sink* sink) : sink_(sink), section_writer_(new Section(this)) {}
StreamWriter::~StreamWriter() = default;

SectionWriter& StreamWriter::section() { return *section_writer_; }

Status StreamWriter::Fail(Status s) {
  if (error_.ok()) error_ = s;
  return error_;
}

Status StreamWriter::WriteFrame(uint8_t type, const void* payload, uint32_t length) {
  if (!error_.ok()) return error_;
  FrameHeader h{};
  h.type = type;
  h.length = length;
  h.payload_crc = Crc32c(payload, length);
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
  GD_RETURN_IF_ERROR(WriteFrame(kFrameChunk, data, length));
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
      const uint32_t len = static_cast<uint32_t>(std::min<size_t>(n, kMaxChunkPayload));
      GD_RETURN_IF_ERROR(EmitChunk(p, len));
      p += len;
      n -= len;
      continue;
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

// ---- reader ---------------------------------------------------------------

namespace {

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
    thread_ = std::thread([this, p, n] {
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
  Parser(Source* source, VerifiedStream* out)
      : source_(source), mapped_(source->Mapped()), out_(out) {}

  Status Run();

 private:
  // Up to n bytes at the cursor: in place when mapped, else read into dst.
  StatusOr<size_t> Fill(uint8_t* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      GD_ASSIGN_OR_RETURN(size_t r, source_->Read(dst + got, n - got));
      if (r == 0) break;
      got += r;
    }
    return got;
  }
  // Where the cursor is, for messages.
  std::string Where() const {
    std::string s = "at offset " + std::to_string(offset_);
    if (in_section_) {
      s += " in section '" + section_->name + "' (section byte " + std::to_string(section_->bytes) +
           ", after its chunk " + std::to_string(section_->chunks.size()) + ")";
    } else if (!out_->sections.empty()) {
      s += " after section '" + out_->sections.back().name + "'";
    }
    return s;
  }
  std::string Describe() const { return " [" + source_->Describe() + "]"; }
  StatusOr<uint8_t*> Allocate(size_t n) {
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
  Status Frame(const FrameHeader& h, std::span<const uint8_t> payload);

  Source* source_;
  std::span<const uint8_t> mapped_;
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

Status Parser::Run() {
  // Preamble.
  uint8_t pre[kPreambleSize];
  size_t got;
  if (!mapped_.empty()) {
    got = std::min(mapped_.size(), kPreambleSize);
    std::memcpy(pre, mapped_.data(), got);
  } else {
    GD_ASSIGN_OR_RETURN(got, Fill(pre, kPreambleSize));
  }
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
  offset_ = kPreambleSize;

  while (!done_) {
    FrameHeader h;
    if (!mapped_.empty()) {
      got = std::min<size_t>(mapped_.size() - offset_, sizeof(h));
      std::memcpy(&h, mapped_.data() + offset_, got);
    } else {
      GD_ASSIGN_OR_RETURN(got, Fill(reinterpret_cast<uint8_t*>(&h), sizeof(h)));
    }
    if (got == 0)
      return DataLoss("missing end frame: stream ends " + Where() + " after " +
                      std::to_string(out_->chunks) + " chunks; the writer did not finish" +
                      Describe());
    if (got < sizeof(h))
      return DataLoss("truncated checkpoint: stream ends inside a frame header " + Where() +
                      Describe());
    const uint32_t header_crc = Crc32c(&h, offsetof(FrameHeader, header_crc));
    if (header_crc != h.header_crc)
      return DataLoss("corrupt frame header " + Where() + ": checksum " + Hex(header_crc) +
                      " != stored " + Hex(h.header_crc) + Describe());
    if (h.length > MaxPayload(h.type))
      return DataLoss(std::string(MaxPayload(h.type) ? "oversized " : "unknown ") + "frame (type " +
                      std::to_string(h.type) + ", " + std::to_string(h.length) + " bytes) " +
                      Where() + Describe());
    const uint64_t frame_offset = offset_;
    offset_ += sizeof(h);
    std::span<const uint8_t> payload;
    if (!mapped_.empty()) {
      got = std::min<size_t>(mapped_.size() - offset_, h.length);
      payload = mapped_.subspan(offset_, got);
    } else if (h.type == kFrameChunk) {
      GD_ASSIGN_OR_RETURN(uint8_t * dst, Allocate(h.length));
      GD_ASSIGN_OR_RETURN(got, Fill(dst, h.length));
      payload = {dst, got};
    } else {
      scratch_.resize(h.length);
      GD_ASSIGN_OR_RETURN(got, Fill(scratch_.data(), h.length));
      payload = {scratch_.data(), got};
    }
    offset_ = frame_offset;  // messages name the frame's start
    if (got < h.length) {
      return DataLoss("truncated checkpoint: stream ends inside " +
                      std::string(h.type == kFrameChunk
                                      ? "chunk " + std::to_string(out_->chunks + 1)
                                      : std::string(FrameName(h.type)) + " frame") +
                      " (" + std::to_string(got) + " of " + std::to_string(h.length) +
                      " payload bytes) whose header is " + Where() + Describe());
    }
    const uint32_t payload_crc = Crc32c(payload.data(), payload.size());
    if (payload_crc != h.payload_crc) {
      std::string what = h.type == kFrameChunk ? "chunk " + std::to_string(out_->chunks + 1)
                                               : std::string(FrameName(h.type)) + " frame";
      return DataLoss("corrupt " + what + " " + Where() + ": CRC32C " + Hex(payload_crc) +
                      " != stored " + Hex(h.payload_crc) + Describe());
    }
    GD_RETURN_IF_ERROR(Frame(h, payload));
    offset_ = frame_offset + sizeof(h) + h.length;
  }
  out_->stream_bytes = offset_;
  if (!mapped_.empty() && offset_ < mapped_.size())
    return DataLoss(std::to_string(mapped_.size() - offset_) +
                    " unexpected bytes after the end frame at offset " + std::to_string(offset_) +
                    Describe());
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
      out_->sections.push_back(VerifiedSection{std::move(name), 0, offset_, {}});
      section_ = &out_->sections.back();
      in_section_ = true;
      return Status::Ok();
    }
    case kFrameChunk:
      if (!in_section_) return bad("a chunk outside any section");
      if (!payload.empty()) section_->chunks.push_back(payload);
      section_->bytes += payload.size();
      ++out_->chunks;
      return Status::Ok();
    case kFrameSectionEnd: {
      if (!in_section_) return bad("section-end without a section");
      SectionEndPayload end;
      if (payload.size() != sizeof(end)) return bad("section-end frame of the wrong size");
      std::memcpy(&end, payload.data(), sizeof(end));
      if (end.bytes != section_->bytes)
        return bad("section '" + section_->name + "' has " + std::to_string(section_->bytes) +
                   " bytes but its section-end frame says " + std::to_string(end.bytes));
      in_section_ = false;
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
      done_ = true;
      return Status::Ok();
    }
    default:
      return bad("unknown frame type " + std::to_string(h.type));
  }
}

}  // namespace

StatusOr<std::unique_ptr<Slab>> Slab::Create(size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return ResourceExhausted("no memory to receive a checkpoint (" + std::to_string(size) +
                             " more bytes)");
  return std::unique_ptr<Slab>(new Slab(static_cast<uint8_t*>(p), size));
}

Slab::~Slab() { ::munmap(data_, size_); }

uint8_t* Slab::Take(size_t n) {
  if (size_ - used_ < n) return nullptr;
  uint8_t* p = data_ + used_;
  used_ += (n + 63) & ~size_t{63};
  if (used_ > size_) used_ = size_;
  return p;
}

StatusOr<VerifiedStream> ReadStream(Source* source) {
  VerifiedStream out;
  Parser parser(source, &out);
  GD_RETURN_IF_ERROR(parser.Run());
  return out;
}

Status LoadStream(const VerifiedStream& stream,
                  const std::vector<std::shared_ptr<const StateEntry>>& entries) {
  std::map<std::string, const StateEntry*> by_name;
  std::string registered, in_stream;
  for (const auto& e : entries) {
    by_name[e->name] = e.get();
    registered += (registered.empty() ? "" : ", ") + e->name;
  }
  for (const auto& s : stream.sections) in_stream += (in_stream.empty() ? "" : ", ") + s.name;
  // All checks before the first load: a mismatch must not half-load the job.
  for (const auto& s : stream.sections) {
    if (!by_name.count(s.name))
      return FailedPrecondition(
          "checkpoint section '" + s.name + "' (offset " + std::to_string(s.offset) +
          ") has no registered loader; registered: " + (registered.empty() ? "none" : registered));
  }
  for (const auto& e : entries) {
    bool found = false;
    for (const auto& s : stream.sections) found = found || s.name == e->name;
    if (!found)
      return FailedPrecondition(
          "state '" + e->name + "' is registered but the checkpoint has no " +
          "section for it; sections: " + (in_stream.empty() ? "none" : in_stream));
  }
  for (const auto& s : stream.sections) {
    ChunkSectionReader reader(s);
    Status loaded = by_name[s.name]->load(reader);
    if (!loaded.ok())
      return Status(loaded.code(), "loading section '" + s.name + "': " + loaded.message());
  }
  return Status::Ok();
}

size_t ChunkSectionReader::Read(void* out, size_t n) {
  auto* dst = static_cast<uint8_t*>(out);
  size_t copied = 0;
  while (copied < n) {
    std::span<const uint8_t> piece = Next(n - copied);
    if (piece.empty()) break;
    std::memcpy(dst + copied, piece.data(), piece.size());
    copied += piece.size();
  }
  return copied;
}

std::span<const uint8_t> ChunkSectionReader::Next(size_t max) {
  while (chunk_ < section_.chunks.size() && pos_ == section_.chunks[chunk_].size()) {
    ++chunk_;
    pos_ = 0;
  }
  if (chunk_ == section_.chunks.size() || max == 0) return {};
  std::span<const uint8_t> piece =
      section_.chunks[chunk_].subspan(pos_, std::min(max, section_.chunks[chunk_].size() - pos_));
  pos_ += piece.size();
  consumed_ += piece.size();
  return piece;
}

}  // namespace gandiva::checkpoint
