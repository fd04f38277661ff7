// The checkpoint stream: round trips of several sections, and every kind of
// damage (truncation, bit flips, bad magic/version, missing end frame, unknown
// or missing sections) detected with a precise message before any load runs.
#include "stream.h"

#include <gtest/gtest.h>

#include <cstring>

#include "crc32c.h"
#include "format.h"
#include "test_state.h"

namespace gandiva::checkpoint {
namespace {

// A memory source that does not offer its bytes in place: the socket path.
class StreamedSource : public MemorySource {
 public:
  using MemorySource::MemorySource;
  std::span<const uint8_t> Mapped() const override { return {}; }
};

struct FrameInfo {
  size_t offset;
  uint8_t type;
  uint32_t length;
};

std::vector<FrameInfo> Frames(const std::vector<uint8_t>& bytes) {
  std::vector<FrameInfo> out;
  size_t off = kPreambleSize;
  while (off + sizeof(FrameHeader) <= bytes.size()) {
    FrameHeader h;
    std::memcpy(&h, bytes.data() + off, sizeof(h));
    out.push_back({off, h.type, h.length});
    off += sizeof(h) + h.length;
  }
  return out;
}

// The stream once for each of its chunks, with a bit of that chunk's payload flipped.
struct FlippedChunk {
  int number;     // the chunk's place among the stream's chunks, from 1
  size_t offset;  // of its frame header
  std::vector<uint8_t> bytes;
};
std::vector<FlippedChunk> EachChunkFlipped(const std::vector<uint8_t>& bytes) {
  std::vector<FlippedChunk> out;
  for (const auto& f : Frames(bytes)) {
    if (f.type != kFrameChunk) continue;
    auto bad = bytes;
    bad[f.offset + 16 + f.length / 2] ^= 0x10;
    out.push_back({static_cast<int>(out.size()) + 1, f.offset, std::move(bad)});
  }
  return out;
}

// A failed restore that names the corrupt chunk by its number and offset.
void ExpectCorruptChunk(const Status& s, int chunk, size_t offset) {
  ASSERT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("corrupt chunk " + std::to_string(chunk) + " at offset " +
                             std::to_string(offset)),
            std::string::npos)
      << s.ToString();
}

class StreamTest : public ::testing::Test {
 protected:
  void AddState(const std::string& name, size_t size, uint32_t seed) {
    states_.push_back(RandomState(name, size, seed));
  }
  void SetUp() override {
    AddState("model", 9 * (1 << 20) + 123, 1);  // spans several 4 MiB chunks
    AddState("optimizer", 1000, 2);             // one small chunk
    AddState("empty", 0, 3);                    // no chunks at all
    AddState("rng", 70000, 4);
  }

  std::vector<std::shared_ptr<const StateEntry>> Entries() {
    std::vector<std::shared_ptr<const StateEntry>> out;
    for (auto& s : states_) {
      TestState* st = s.get();
      out.push_back(std::make_shared<StateEntry>(StateEntry{
          st->name,
          [st](SectionWriter& w) {
            // Mixed sizes: buffered small writes, direct big ones, and back.
            size_t pos = 0;
            for (size_t piece : {size_t{1}, size_t{999}, size_t{300000}, size_t{5} << 20}) {
              const size_t n = std::min(piece, st->data.size() - pos);
              GD_RETURN_IF_ERROR(w.Write(st->data.data() + pos, n));
              pos += n;
            }
            return w.Write(st->data.data() + pos, st->data.size() - pos);
          },
          [st](SectionReader& r) {
            ++st->loads;
            st->loaded.resize(r.size());
            size_t got = 0;
            while (size_t n = r.Read(st->loaded.data() + got, 77777)) got += n;
            EXPECT_EQ(got, st->loaded.size());
            EXPECT_EQ(r.remaining(), 0u);
            return Status::Ok();
          },
          /*check=*/nullptr}));
    }
    return out;
  }

  std::vector<uint8_t> Write() {
    MemorySink sink;
    uint64_t bytes = 0;
    Status s = WriteStream(&sink, Entries(), {{"job_id", "7"}, {"job_name", "unit"}}, &bytes);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(bytes, sink.bytes().size());
    return sink.bytes();
  }

  Status Restore(const std::vector<uint8_t>& bytes, bool mapped) {
    std::unique_ptr<Source> src(mapped ? new MemorySource(bytes)
                                       : new StreamedSource(std::span<const uint8_t>(bytes)));
    auto stream = ReadStream(src.get());
    if (!stream.ok()) return stream.status();
    return LoadStream(*stream, Entries());
  }

  int Loads() const {
    int n = 0;
    for (const auto& s : states_) n += s->loads;
    return n;
  }

  std::vector<std::shared_ptr<TestState>> states_;
};

TEST_F(StreamTest, RoundTripSeveralSectionsInPlaceAndStreamed) {
  const auto bytes = Write();
  for (bool mapped : {true, false}) {
    for (auto& s : states_) s->loaded.clear();
    Status s = Restore(bytes, mapped);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (const auto& st : states_) EXPECT_EQ(st->loaded, st->data) << st->name;
  }
  MemorySource src(bytes);
  auto stream = ReadStream(&src);
  ASSERT_TRUE(stream.ok());
  ASSERT_EQ(stream->sections.size(), 4u);
  EXPECT_EQ(stream->sections[0].name, "model");
  // 1 KB of small writes coalesced, then 300000 B, 4 MiB, 1 MiB and the rest direct.
  EXPECT_EQ(stream->sections[0].chunks.size(), 5u);
  EXPECT_EQ(stream->sections[2].bytes, 0u);
  EXPECT_EQ(stream->stream_bytes, bytes.size());
  EXPECT_EQ(stream->metadata[1], (std::pair<std::string, std::string>("job_name", "unit")));
}

TEST_F(StreamTest, EmptyStateRoundTrips) {
  states_.clear();
  const auto bytes = Write();
  EXPECT_TRUE(Restore(bytes, true).ok());
  EXPECT_TRUE(Restore(bytes, false).ok());
}

TEST_F(StreamTest, ZeroCopyNextWalksTheChunks) {
  const auto bytes = Write();
  MemorySource src(bytes);
  auto stream = ReadStream(&src);
  ASSERT_TRUE(stream.ok());
  ChunkSectionReader r(stream->sections[0]);
  std::vector<uint8_t> got;
  while (true) {
    auto piece = r.Next(3 << 20);
    if (piece.empty()) break;
    EXPECT_LE(piece.size(), size_t{3} << 20);
    got.insert(got.end(), piece.begin(), piece.end());
  }
  EXPECT_EQ(got, states_[0]->data);
}

TEST_F(StreamTest, EveryTruncationIsDetectedBeforeAnyLoad) {
  const auto bytes = Write();
  std::vector<size_t> cuts = {0, 5, 8, 15, 16, 17, 31};
  for (const auto& f : Frames(bytes)) {
    for (size_t d : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}})
      if (f.offset + d < bytes.size()) cuts.push_back(f.offset + d);
    cuts.push_back(f.offset + 16 + f.length / 2);
  }
  cuts.push_back(bytes.size() - 1);
  for (size_t cut : cuts) {
    if (cut >= bytes.size()) continue;
    std::vector<uint8_t> truncated(bytes.begin(), bytes.begin() + cut);
    for (bool mapped : {true, false}) {
      Status s = Restore(truncated, mapped);
      ASSERT_FALSE(s.ok()) << "cut at " << cut;
      EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
      const bool named = s.message().find("truncated") != std::string::npos ||
                         s.message().find("missing end frame") != std::string::npos ||
                         s.message().find("empty checkpoint") != std::string::npos ||
                         s.message().find("bad magic") != std::string::npos;
      EXPECT_TRUE(named) << "cut at " << cut << ": " << s.ToString();
    }
  }
  EXPECT_EQ(Loads(), 0);
}

TEST_F(StreamTest, MissingEndFrameIsNamed) {
  const auto bytes = Write();
  const auto frames = Frames(bytes);
  ASSERT_EQ(frames.back().type, kFrameEnd);
  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + frames.back().offset);
  Status s = Restore(cut, false);
  EXPECT_NE(s.message().find("missing end frame"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("after section 'rng'"), std::string::npos) << s.ToString();
  EXPECT_EQ(Loads(), 0);
}

TEST_F(StreamTest, CorruptChunkIsNamedBySectionChunkAndOffset) {
  const auto flipped = EachChunkFlipped(Write());
  for (const auto& [chunk, offset, bad] : flipped) {
    for (bool mapped : {true, false}) {
      Status s = Restore(bad, mapped);
      ASSERT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
      EXPECT_NE(s.message().find("corrupt chunk " + std::to_string(chunk) + " "), std::string::npos)
          << s.ToString();
      EXPECT_NE(s.message().find("offset " + std::to_string(offset)), std::string::npos)
          << s.ToString();
      EXPECT_NE(s.message().find("section '"), std::string::npos) << s.ToString();
    }
  }
  EXPECT_EQ(flipped.size(), 7u);  // model 5, optimizer 1, rng 1
  EXPECT_EQ(Loads(), 0);
}

// Checked as loaded (a start-up restore from a file): the stream reads fine,
// each chunk is checked when a load function first reaches it, and no load
// function gets a byte of a corrupt chunk or anything after it. A load
// function that ignores its short read still fails the load, and chunks a
// load function never read are checked after it returns. A streamed chunk (a
// migration's) is checked as it arrives instead: a corrupt one fails the
// read, before any load function runs.
TEST_F(StreamTest, ChunksCheckedAsLoadedNeverHandOutACorruptByte) {
  const auto bytes = Write();
  struct Seen {
    std::vector<uint8_t> bytes;
    bool called = false;
  };
  std::vector<Seen> seen(states_.size());
  auto entries = [&](bool read) {
    std::vector<std::shared_ptr<const StateEntry>> out;
    for (size_t k = 0; k < states_.size(); ++k)
      out.push_back(std::make_shared<StateEntry>(StateEntry{states_[k]->name, nullptr,
                                                            [&, k, read](SectionReader& r) {
                                                              seen[k].called = true;
                                                              std::vector<uint8_t> buf(r.size());
                                                              size_t got = 0;
                                                              while (read && got < buf.size()) {
                                                                const size_t n =
                                                                    r.Read(buf.data() + got, 77777);
                                                                if (n == 0) break;
                                                                got += n;
                                                              }
                                                              seen[k].bytes.assign(
                                                                  buf.begin(), buf.begin() + got);
                                                              return Status::Ok();  // short or not
                                                            },
                                                            nullptr}));
    return out;
  };
  auto load = [&](const std::vector<uint8_t>& stream_bytes, bool read, bool mapped = true) {
    for (auto& s : seen) s = Seen{};
    std::unique_ptr<Source> src(mapped
                                    ? new MemorySource(stream_bytes)
                                    : new StreamedSource(std::span<const uint8_t>(stream_bytes)));
    auto stream = ReadStream(src.get(), RestoreCheck::kWhileLoading);
    if (mapped) {
      EXPECT_TRUE(stream.ok()) << stream.status().ToString();
    }
    return stream.ok() ? LoadStream(*stream, entries(read)) : stream.status();
  };
  for (bool mapped : {true, false}) {
    ASSERT_TRUE(load(bytes, true, mapped).ok());
    for (size_t k = 0; k < states_.size(); ++k) EXPECT_EQ(seen[k].bytes, states_[k]->data);
  }

  const auto flipped = EachChunkFlipped(bytes);
  for (const auto& [chunk, offset, bad] : flipped) {
    for (int way = 0; way < 3; ++way) {  // read from a file, not read, read from a socket
      Status s = load(bad, way != 1, way != 2);
      ExpectCorruptChunk(s, chunk, offset);
      // Every byte any load function got is the saved byte at its place.
      for (size_t k = 0; k < states_.size(); ++k) {
        if (way == 2) {
          EXPECT_FALSE(seen[k].called) << "checked as it arrived, before any load";
        }
        const auto& got = seen[k].bytes;
        ASSERT_LE(got.size(), states_[k]->data.size());
        EXPECT_TRUE(std::equal(got.begin(), got.end(), states_[k]->data.begin())) << k;
      }
    }
  }
  EXPECT_EQ(flipped.size(), 7u);
  // Frame headers and totals are still all checked before any load.
  auto bad = bytes;
  bad[Frames(bytes).back().offset + 4] ^= 1;  // the end frame's length
  MemorySource src(bad);
  EXPECT_EQ(ReadStream(&src, RestoreCheck::kWhileLoading).status().code(), StatusCode::kDataLoss);
  // Checked before loading, nothing is left for the load.
  auto stream = ReadStream(&src, RestoreCheck::kBeforeLoading);
  ASSERT_TRUE(stream.status().code() == StatusCode::kDataLoss);
  MemorySource good(bytes);
  stream = ReadStream(&good, RestoreCheck::kBeforeLoading);
  ASSERT_TRUE(stream.ok());
  for (const auto& section : stream->sections) EXPECT_TRUE(section.unchecked.empty());
}

// A load that reads whole chunks at once from a mapped stream checked as it
// loads has each copied and checked in one pass: the same bytes, and a
// corrupt chunk still ends the read before it.
TEST_F(StreamTest, WholeChunkReadsAreCopiedAndCheckedInOnePass) {
  const auto bytes = Write();
  std::vector<std::vector<uint8_t>> got(states_.size());
  std::vector<std::shared_ptr<const StateEntry>> entries;
  for (size_t k = 0; k < states_.size(); ++k)
    entries.push_back(std::make_shared<StateEntry>(StateEntry{states_[k]->name, nullptr,
                                                              [&got, k](SectionReader& r) {
                                                                got[k].assign(r.size(), 0);
                                                                got[k].resize(r.Read(
                                                                    got[k].data(), got[k].size()));
                                                                return Status::Ok();
                                                              },
                                                              nullptr}));
  auto load = [&](const std::vector<uint8_t>& stream_bytes) {
    MemorySource src(stream_bytes);
    auto stream = ReadStream(&src, RestoreCheck::kWhileLoading);
    EXPECT_TRUE(stream.ok()) << stream.status().ToString();
    return stream.ok() ? LoadStream(*stream, entries) : stream.status();
  };
  ASSERT_TRUE(load(bytes).ok());
  for (size_t k = 0; k < states_.size(); ++k) EXPECT_EQ(got[k], states_[k]->data) << k;
  for (const auto& [chunk, offset, bad] : EachChunkFlipped(bytes)) {
    for (auto& g : got) g.clear();
    Status s = load(bad);
    ExpectCorruptChunk(s, chunk, offset);
    for (size_t k = 0; k < states_.size(); ++k) {
      ASSERT_LE(got[k].size(), states_[k]->data.size());
      EXPECT_TRUE(std::equal(got[k].begin(), got[k].end(), states_[k]->data.begin())) << k;
    }
  }
}

TEST_F(StreamTest, CorruptFrameHeaderIsDetected) {
  const auto bytes = Write();
  for (const auto& f : Frames(bytes)) {
    for (size_t byte : {size_t{0}, size_t{4}, size_t{9}, size_t{13}}) {
      auto bad = bytes;
      bad[f.offset + byte] ^= 0x01;
      Status s = Restore(bad, true);
      EXPECT_NE(s.message().find("corrupt frame header at offset " + std::to_string(f.offset)),
                std::string::npos)
          << s.ToString();
    }
  }
  EXPECT_EQ(Loads(), 0);
}

TEST_F(StreamTest, AnySingleBitFlipIsDetected) {
  states_.resize(2);
  states_[0]->data.resize(10000);  // small: flip a bit everywhere in reasonable time
  const auto bytes = Write();
  for (size_t i = 0; i < bytes.size(); i += (i < 200 ? 1 : 97)) {
    auto bad = bytes;
    bad[i] ^= static_cast<uint8_t>(1u << (i % 8));
    Status s = Restore(bad, i % 2 == 0);
    ASSERT_FALSE(s.ok()) << "flip at byte " << i;
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  }
  EXPECT_EQ(Loads(), 0);
}

TEST_F(StreamTest, BadMagicAndVersion) {
  auto bytes = Write();
  auto bad = bytes;
  bad[0] = 'X';
  Status s = Restore(bad, true);
  EXPECT_NE(s.message().find("not a gandiva checkpoint: bad magic"), std::string::npos)
      << s.ToString();

  bad = bytes;
  const uint32_t version = 2;
  std::memcpy(bad.data() + 8, &version, 4);
  const uint32_t crc = Crc32c(bad.data(), 12);
  std::memcpy(bad.data() + 12, &crc, 4);
  s = Restore(bad, false);
  EXPECT_NE(s.message().find("unsupported checkpoint format version 2"), std::string::npos)
      << s.ToString();

  bad = bytes;
  bad[9] ^= 1;  // version damaged, preamble checksum now wrong
  s = Restore(bad, true);
  EXPECT_NE(s.message().find("corrupt checkpoint preamble"), std::string::npos) << s.ToString();
  EXPECT_EQ(Loads(), 0);
}

TEST_F(StreamTest, UnknownSectionIsAnErrorNotSkipped) {
  const auto bytes = Write();
  states_.erase(states_.begin() + 3);  // nobody registered "rng" in the new process
  Status s = Restore(bytes, true);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("section 'rng'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("no registered loader"), std::string::npos) << s.ToString();
  EXPECT_EQ(Loads(), 0);
}

TEST_F(StreamTest, RegisteredStateMissingFromTheStreamIsAnError) {
  const auto bytes = Write();
  AddState("data_position", 8, 5);
  Status s = Restore(bytes, true);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("state 'data_position' is registered"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(Loads(), 0);
}

// The header's list of sections is the stream's: a load as the stream
// arrives checks the registered states against it before the sections come.
TEST_F(StreamTest, AHeaderListingOtherSectionsThanTheStreamHolds) {
  for (const char* listed : {"model,optimizer,empty", "model,optimizer,empty,rng,extra",
                             "optimizer,model,empty,rng", ""}) {
    MemorySink sink;
    uint64_t n = 0;
    ASSERT_TRUE(WriteStream(&sink, Entries(), {{"sections", listed}}, &n).ok());
    for (bool mapped : {true, false}) {
      std::unique_ptr<Source> src(mapped
                                      ? new MemorySource(sink.bytes())
                                      : new StreamedSource(std::span<const uint8_t>(sink.bytes())));
      auto stream = ReadStream(src.get());
      ASSERT_EQ(stream.status().code(), StatusCode::kDataLoss) << listed;
      EXPECT_NE(stream.status().message().find("the header lists sections '" + std::string(listed) +
                                               "' but the stream has 'model,optimizer,empty,rng'"),
                std::string::npos)
          << stream.status().ToString();
    }
  }
  MemorySink sink;
  uint64_t n = 0;
  ASSERT_TRUE(WriteStream(&sink, Entries(), {{"sections", "model,optimizer,empty,rng"}}, &n).ok());
  MemorySource good(sink.bytes());
  EXPECT_TRUE(ReadStream(&good).ok());
}

TEST_F(StreamTest, TrailingBytesAfterTheEndFrame) {
  auto bytes = Write();
  bytes.push_back(0);
  Status s = Restore(bytes, true);
  EXPECT_NE(s.message().find("1 unexpected bytes after the end frame"), std::string::npos)
      << s.ToString();
}

TEST_F(StreamTest, DroppedChunkIsCaughtBySectionTotals) {
  const auto bytes = Write();
  for (const auto& f : Frames(bytes)) {
    if (f.type != kFrameChunk) continue;
    std::vector<uint8_t> bad(bytes.begin(), bytes.begin() + f.offset);
    bad.insert(bad.end(), bytes.begin() + f.offset + 16 + f.length, bytes.end());
    Status s = Restore(bad, true);
    EXPECT_NE(s.message().find("but its section-end frame says"), std::string::npos)
        << s.ToString();
    break;
  }
  EXPECT_EQ(Loads(), 0);
}

// Large writes have each chunk's checksum computed a chunk ahead, on another
// thread: a buffer written again with other bytes (same address, same size)
// gets its new checksums, and every chunk reads back as written.
TEST_F(StreamTest, ChecksumsComputedAheadFollowTheBytes) {
  std::vector<uint8_t> buffer((13u << 20) + 5);
  MemorySink sink;
  StreamWriter w(&sink);
  ASSERT_TRUE(w.Begin({}).ok());
  ASSERT_TRUE(w.BeginSection("again").ok());
  std::vector<uint8_t> expected;
  for (uint8_t round = 1; round <= 3; ++round) {
    std::fill(buffer.begin(), buffer.end(), round);
    buffer[round * 1000] = 0;
    ASSERT_TRUE(w.Write(buffer.data(), buffer.size()).ok());
    expected.insert(expected.end(), buffer.begin(), buffer.end());
  }
  ASSERT_TRUE(w.EndSection().ok());
  ASSERT_TRUE(w.Finish().ok());
  MemorySource src(sink.bytes());
  auto stream = ReadStream(&src);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  ChunkSectionReader r(stream->sections[0]);
  std::vector<uint8_t> back(r.size());
  ASSERT_EQ(r.Read(back.data(), back.size()), back.size());
  EXPECT_TRUE(back == expected);
}

TEST_F(StreamTest, SaveAndLoadFailuresNameTheSection) {
  auto entries = Entries();
  entries.push_back(std::make_shared<StateEntry>(
      StateEntry{"broken", [](SectionWriter&) { return Internal("no memory for the buffer"); },
                 [](SectionReader&) { return Status::Ok(); }, /*check=*/nullptr}));
  MemorySink sink;
  uint64_t bytes = 0;
  Status s = WriteStream(&sink, entries, {}, &bytes);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("saving section 'broken': no memory"), std::string::npos)
      << s.ToString();

  const auto good = Write();
  MemorySource src(good);
  auto stream = ReadStream(&src);
  ASSERT_TRUE(stream.ok());
  entries = Entries();
  entries[1] = std::make_shared<StateEntry>(
      StateEntry{"optimizer", [](SectionWriter&) { return Status::Ok(); },
                 [](SectionReader&) { return InvalidArgument("shape mismatch"); },
                 /*check=*/nullptr});
  s = LoadStream(*stream, entries);
  EXPECT_NE(s.message().find("loading section 'optimizer': shape mismatch"), std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace gandiva::checkpoint
