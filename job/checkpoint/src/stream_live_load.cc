// Loading a stream as it is read (stream.h, LoadWhileReading): the load
// functions run while the stream still arrives, and pull it a chunk at a time.
#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "chunk_copy.h"
#include "stream.h"
#include "stream_parser.h"

namespace gandiva::checkpoint {
namespace {

// A section as its load function reads it, pulled from the parser. A read
// that wants a whole chunk or more gets the chunk received straight into its
// memory; anything else lands in the stream's memory first and is copied out.
// The section's size is known only at its end: size() and remaining() read
// the rest of it first (into the stream's memory, so that later reads copy).
class LiveSectionReader : public SectionReader {
 public:
  LiveSectionReader(Parser* parser, const VerifiedSection& section)
      : parser_(parser), section_(section) {}

  size_t Read(void* out, size_t n) override {
    auto* dst = static_cast<uint8_t*>(out);
    size_t copied = 0;
    while (copied < n) {
      if (queued_.empty()) {
        size_t landed = 0;
        if (!Pull({dst + copied, n - copied}, &landed)) break;
        copied += landed;
        continue;
      }
      // Whole chunks read first (the size was asked), wanted whole: copied
      // on two cores.
      if (const size_t whole = CopyWholeQueued(dst + copied, n - copied)) {
        copied += whole;
        continue;
      }
      std::span<const uint8_t>& front = queued_.front();
      const size_t take = std::min(front.size(), n - copied);
      // A buffer section's chunk received where it belongs is there already.
      if (front.data() != dst + copied) std::memcpy(dst + copied, front.data(), take);
      Consume(take);
      copied += take;
    }
    return copied;
  }

  std::span<const uint8_t> Next(size_t max) override {
    if (max == 0) return {};
    if (queued_.empty() && (!Pull({}) || queued_.empty())) return {};
    const std::span<const uint8_t> piece =
        queued_.front().first(std::min(max, queued_.front().size()));
    Consume(piece.size());
    return piece;
  }

  uint64_t size() const override {
    // Reading on to the section's end changes what is queued, not what the
    // load function has read: const to it.
    auto* self = const_cast<LiveSectionReader*>(this);
    while (!self->ended_ && self->Pull({})) {
    }
    return section_.bytes;
  }
  uint64_t remaining() const override { return size() - consumed_; }

  // The first failure (a corrupt chunk, a cut stream): the section's end for
  // the load function, the restore's reason.
  const Status& error() const { return error_; }

 private:
  // The next chunk from the parser: into `into` if it fits there whole (then
  // it counts as read, *landed bytes of it), else queued. False at the
  // section's end or a failure.
  bool Pull(std::span<uint8_t> into, size_t* landed = nullptr) {
    if (ended_ || !error_.ok()) return false;
    StatusOr<std::span<const uint8_t>> chunk = parser_->NextChunk(into);
    if (!chunk.ok()) {
      error_ = chunk.status();
      return false;
    }
    if (chunk->empty()) {
      ended_ = true;
      return false;
    }
    if (!into.empty() && chunk->data() == into.data()) {
      consumed_ += chunk->size();
      *landed = chunk->size();
    } else {
      queued_.push_back(*chunk);
    }
    return true;
  }
  // The queued chunks from the front that fit `room` whole, copied to dst;
  // their length, or 0 when there are not two of them to share.
  size_t CopyWholeQueued(uint8_t* dst, size_t room) {
    std::vector<ChunkCopy> run;
    size_t filled = 0;
    for (const auto& chunk : queued_) {
      if (chunk.size() > room - filled || chunk.data() == dst + filled) break;
      run.push_back({chunk, dst + filled, 0});
      filled += chunk.size();
    }
    if (run.size() < 2) return 0;
    CopyInParallel(run);
    for (size_t k = 0; k < run.size(); ++k) Consume(run[k].from.size());
    return filled;
  }
  void Consume(size_t n) {
    consumed_ += n;
    queued_.front() = queued_.front().subspan(n);
    if (queued_.front().empty()) queued_.pop_front();
  }

  Parser* const parser_;
  const VerifiedSection& section_;  // its byte count grows as chunks arrive
  std::deque<std::span<const uint8_t>> queued_;
  uint64_t consumed_ = 0;
  bool ended_ = false;
  Status error_;
};

std::string Joined(const std::set<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

// The header's list of sections (WithSectionList), if it has one.
bool SectionsNamed(const Metadata& metadata, std::set<std::string>* names) {
  for (const auto& [key, value] : metadata) {
    if (key != "sections") continue;
    for (size_t at = 0; at <= value.size();) {
      const size_t comma = std::min(value.find(',', at), value.size());
      if (comma > at) names->insert(value.substr(at, comma - at));
      at = comma + 1;
    }
    return true;
  }
  return false;
}

// The first difference between the registered states and the sections
// `present`, worded as LoadStream words it; Ok if there is none.
Status Mismatch(const std::set<std::string>& registered, const std::set<std::string>& present) {
  for (const auto& n : present)
    if (!registered.count(n))
      return FailedPrecondition("checkpoint section '" + n +
                                "' has no registered loader; registered: " + Joined(registered));
  for (const auto& n : registered)
    if (!present.count(n))
      return FailedPrecondition("state '" + n +
                                "' is registered but the checkpoint has no section for it; "
                                "sections: " +
                                Joined(present));
  return Status::Ok();
}

}  // namespace

StatusOr<VerifiedStream> LoadWhileReading(
    Source* source, const std::vector<std::shared_ptr<const StateEntry>>& entries) {
  VerifiedStream out;
  // Every chunk is checked before a load function is handed a byte of it:
  // as it arrives from a socket, or here, from a mapping.
  Parser parser(source, RestoreCheck::kBeforeLoading, entries, &out);
  GD_RETURN_IF_ERROR(parser.Begin());

  std::map<std::string, const StateEntry*> by_name;
  std::set<std::string> registered;
  for (const auto& e : entries) {
    by_name[e->name] = e.get();
    registered.insert(e->name);
  }
  // The header names the sections: a mismatch fails before the first load,
  // as LoadStream's does. The frames that follow are held to it below.
  // (A name with a comma in it cannot be told apart in that list: then only
  // the frames tell.)
  std::set<std::string> named;
  const bool listable = std::none_of(registered.begin(), registered.end(),
                                     [](const std::string& n) { return n.find(',') != n.npos; });
  if (listable && SectionsNamed(out.metadata, &named))
    GD_RETURN_IF_ERROR(Mismatch(registered, named));

  std::set<std::string> loaded;
  for (;;) {
    GD_ASSIGN_OR_RETURN(const VerifiedSection* s, parser.NextSection());
    if (!s) break;
    const auto entry = by_name.find(s->name);
    if (entry == by_name.end())
      return FailedPrecondition("checkpoint section '" + s->name + "' (offset " +
                                std::to_string(s->offset) +
                                ") has no registered loader; registered: " + Joined(registered));
    LiveSectionReader reader(&parser, *s);
    Status status = entry->second->load(reader);
    // A corrupt chunk is the reason, whatever the load function made of its short read.
    GD_RETURN_IF_ERROR(reader.error());
    if (!status.ok())
      return Status(status.code(), "loading section '" + s->name + "': " + status.message());
    loaded.insert(s->name);
  }
  GD_RETURN_IF_ERROR(Mismatch(registered, loaded));
  return out;
}

}  // namespace gandiva::checkpoint
