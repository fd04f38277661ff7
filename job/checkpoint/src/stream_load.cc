// Loading a verified checkpoint stream (stream.h) into the registered states,
// and the section reader that load functions read through.
#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "chunk_checker.h"
#include "chunk_copy.h"
#include "crc32c.h"
#include "stream.h"

namespace gandiva::checkpoint {

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
  ChunkChecker checker(stream);  // ahead of the loads, for the chunks left unchecked
  for (size_t k = 0; k < stream.sections.size(); ++k) {
    const VerifiedSection& s = stream.sections[k];
    ChunkSectionReader reader(s, &checker, checker.FirstOf(k));
    Status loaded = by_name[s.name]->load(reader);
    // A corrupt chunk is the reason, whatever the load function made of its short read.
    GD_RETURN_IF_ERROR(reader.error());
    if (!loaded.ok())
      return Status(loaded.code(), "loading section '" + s.name + "': " + loaded.message());
    GD_RETURN_IF_ERROR(reader.CheckRest());
  }
  return Status::Ok();
}

Status ChunkSectionReader::Corrupt(size_t i, uint32_t crc) const {
  const UncheckedChunk& c = section_.unchecked[i];
  // Worded as the reader's check before loading words it (stream_reader.cc).
  return DataLoss("corrupt chunk " + std::to_string(c.number) + " at offset " +
                  std::to_string(c.offset) + " in section '" + section_.name + "' (its chunk " +
                  std::to_string(i + 1) + "), found as it loaded: CRC32C " + Hex(crc) +
                  " != stored " + Hex(c.crc));
}

bool ChunkSectionReader::Checked(size_t i) {
  if (section_.unchecked.empty() || i < checked_) return true;
  if (!error_.ok()) return false;
  // Chunks are reached in order: i == checked_.
  const UncheckedChunk& c = section_.unchecked[i];
  uint32_t crc = 0;
  bool good;
  if (c.good) {
    good = true;
  } else if (checker_) {
    good = checker_->Good(first_ + i, &crc);
  } else {
    crc = Crc32c(section_.chunks[i].data(), section_.chunks[i].size());
    good = crc == c.crc;
  }
  if (!good) {
    error_ = Corrupt(i, crc);
    return false;
  }
  checked_ = i + 1;
  return true;
}

void ChunkSectionReader::SkipReadChunks() {
  while (chunk_ < section_.chunks.size() && pos_ == section_.chunks[chunk_].size()) {
    ++chunk_;
    pos_ = 0;
  }
}

size_t ChunkSectionReader::CopyWholeUnchecked(uint8_t* dst, size_t room) {
  SkipReadChunks();
  if (pos_ != 0 || chunk_ != checked_ || section_.unchecked.empty() || !error_.ok()) return 0;
  // The run of chunks from the cursor still to be checked that the read
  // wants whole, each taken from the checker (which may have one already).
  std::vector<ChunkCopy> run;
  size_t filled = 0;
  for (size_t i = chunk_; i < section_.chunks.size(); ++i) {
    const std::span<const uint8_t> bytes = section_.chunks[i];
    if (section_.unchecked[i].good || bytes.size() > room - filled ||
        bytes.data() == dst + filled || (checker_ && !checker_->Claim(first_ + i)))
      break;
    run.push_back({bytes, dst + filled, 0});
    filled += bytes.size();
  }
  if (run.empty()) return 0;
  CopyAndChecksum(run);
  size_t copied = 0, good = 0;
  for (size_t k = 0; k < run.size(); ++k) {
    if (checker_) checker_->Settle(first_ + chunk_ + k, run[k].crc);
    if (!error_.ok()) continue;  // settled all the same: the checker may be waiting on it
    if (run[k].crc != section_.unchecked[chunk_ + k].crc) {
      // Its bytes are in dst, but no read returns them: the read ends before.
      error_ = Corrupt(chunk_ + k, run[k].crc);
      continue;
    }
    copied += run[k].from.size();
    ++good;
  }
  // The cursor after the good chunks, as if each had been read.
  chunk_ += good;
  checked_ = chunk_;
  consumed_ += copied;
  return copied;
}

Status ChunkSectionReader::CheckRest() {
  for (size_t i = checked_; i < section_.unchecked.size(); ++i)
    if (!Checked(i)) break;
  return error_;
}

size_t ChunkSectionReader::Read(void* out, size_t n) {
  auto* dst = static_cast<uint8_t*>(out);
  size_t copied = 0;
  while (copied < n) {
    // A chunk still to be checked that the read wants whole: copied and
    // checked in one pass over its bytes.
    if (const size_t whole = CopyWholeUnchecked(dst + copied, n - copied)) {
      copied += whole;
      continue;
    }
    std::span<const uint8_t> piece = Next(n - copied);
    if (piece.empty()) break;
    // A buffer section's chunk received where it belongs is there already.
    if (piece.data() != dst + copied) std::memcpy(dst + copied, piece.data(), piece.size());
    copied += piece.size();
  }
  return copied;
}

std::span<const uint8_t> ChunkSectionReader::Next(size_t max) {
  SkipReadChunks();
  if (chunk_ == section_.chunks.size() || max == 0 || !Checked(chunk_)) return {};
  std::span<const uint8_t> piece =
      section_.chunks[chunk_].subspan(pos_, std::min(max, section_.chunks[chunk_].size() - pos_));
  pos_ += piece.size();
  consumed_ += piece.size();
  return piece;
}

}  // namespace gandiva::checkpoint
