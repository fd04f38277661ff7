// Loading a stream as it arrives (stream.h, LoadWhileReading): load functions
// run during the stream, a read that wants whole chunks has them received
// into its own memory, a load that asks its size first still gets every byte,
// and every kind of damage fails the restore with no read returning a byte
// that did not pass its check.
#include <gtest/gtest.h>

#include <cstring>

#include "format.h"
#include "stream.h"
#include "test_state.h"

namespace gandiva::checkpoint {
namespace {

// A socket-like source (nothing mapped) that records where each read went
// and how far the stream had been read.
class RecordingSource : public MemorySource {
 public:
  explicit RecordingSource(const std::vector<uint8_t>& bytes) : MemorySource(bytes) {}
  std::span<const uint8_t> Mapped() const override { return {}; }
  StatusOr<size_t> Read(void* buf, size_t n) override {
    StatusOr<size_t> got = MemorySource::Read(buf, n);
    if (got.ok()) {
      reads.push_back({static_cast<uint8_t*>(buf), *got});
      delivered += *got;
    }
    return got;
  }
  std::vector<std::pair<uint8_t*, size_t>> reads;
  size_t delivered = 0;
};

// Bytes of the recorded reads that went straight into [begin, begin + n).
size_t BytesReadInto(const RecordingSource& src, const uint8_t* begin, size_t n) {
  size_t total = 0;
  for (const auto& [p, len] : src.reads)
    if (p >= begin && p + len <= begin + n) total += len;
  return total;
}

enum class LoadStyle { kReadFirst, kSizeFirst, kNoRead, kZeroCopy };

struct Loaded {
  std::vector<uint8_t> bytes;  // what reads returned, in order
  size_t delivered_at_call = 0;
  bool called = false;
};

class LiveLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Add("model", (9u << 20) + 123, 1);  // chunks of 4, 4, 1 MiB + 123 B
    Add("step", 8, 2);                  // one small chunk
    Add("empty", 0, 3);                 // no chunk at all
    Add("optimizer", 70000, 4);
  }
  void Add(const std::string& name, size_t size, uint32_t seed) {
    states_.push_back(RandomState(name, size, seed));
  }

  std::vector<std::shared_ptr<const StateEntry>> Entries(LoadStyle style,
                                                         RecordingSource* source = nullptr) {
    loaded_.assign(states_.size(), Loaded{});
    std::vector<std::shared_ptr<const StateEntry>> out;
    for (size_t k = 0; k < states_.size(); ++k) {
      TestState* st = states_[k].get();
      Loaded* seen = &loaded_[k];
      out.push_back(std::make_shared<StateEntry>(StateEntry{
          st->name, [st](SectionWriter& w) { return w.Write(st->data.data(), st->data.size()); },
          [st, seen, style, source](SectionReader& r) {
            seen->called = true;
            if (source) seen->delivered_at_call = source->delivered;
            if (style == LoadStyle::kNoRead) return Status::Ok();
            if (style == LoadStyle::kSizeFirst) {
              EXPECT_EQ(r.size(), st->data.size());
            }
            // Into memory of the state's size, as a job's own state is.
            st->loaded.assign(st->data.size(), 0);
            size_t got = 0;
            if (style == LoadStyle::kZeroCopy) {
              for (auto piece = r.Next(1u << 30); !piece.empty(); piece = r.Next(1u << 30)) {
                std::memcpy(st->loaded.data() + got, piece.data(), piece.size());
                got += piece.size();
              }
            } else {
              got = r.Read(st->loaded.data(), st->loaded.size());
            }
            seen->bytes.assign(st->loaded.begin(), st->loaded.begin() + got);
            if (got != st->data.size()) return DataLoss("short read");
            EXPECT_EQ(r.remaining(), 0u);
            EXPECT_EQ(r.size(), st->data.size());
            return Status::Ok();
          },
          nullptr}));
    }
    return out;
  }

  std::vector<uint8_t> Write() {
    MemorySink sink;
    uint64_t bytes = 0;
    Status s = WriteStream(&sink, Entries(LoadStyle::kReadFirst), {{"sections", Names()}}, &bytes);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return sink.bytes();
  }
  std::string Names() const {
    std::string s;
    for (const auto& st : states_) s += (s.empty() ? "" : ",") + st->name;
    return s;
  }

  std::vector<std::shared_ptr<TestState>> states_;
  std::vector<Loaded> loaded_;
};

TEST_F(LiveLoadTest, WholeChunksAreReceivedIntoTheMemoryTheLoadReadsInto) {
  const auto bytes = Write();
  RecordingSource source(bytes);
  auto stream = LoadWhileReading(&source, Entries(LoadStyle::kReadFirst, &source));
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ(stream->stream_bytes, bytes.size());
  for (const auto& s : states_) EXPECT_EQ(s->loaded, s->data) << s->name;
  // The model's three chunks and the step's one arrived where the loads wanted them.
  const TestState& model = *states_[0];
  EXPECT_EQ(BytesReadInto(source, model.loaded.data(), model.loaded.size()), model.data.size());
  EXPECT_EQ(BytesReadInto(source, states_[1]->loaded.data(), 8), 8u);
  // Each load ran while the stream was still arriving: before the bytes
  // after its section had been read.
  EXPECT_LT(loaded_[0].delivered_at_call, (1u << 20)) << "the model's load waited for its section";
  EXPECT_LT(loaded_[3].delivered_at_call, bytes.size() - 70000);
}

TEST_F(LiveLoadTest, ALoadThatAsksItsSizeFirstStillGetsEveryByte) {
  const auto bytes = Write();
  for (LoadStyle style : {LoadStyle::kSizeFirst, LoadStyle::kZeroCopy}) {
    RecordingSource source(bytes);
    auto stream = LoadWhileReading(&source, Entries(style, &source));
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    for (const auto& s : states_) EXPECT_EQ(s->loaded, s->data) << s->name;
    // Read whole before the load, into the stream's memory, then copied.
    EXPECT_EQ(BytesReadInto(source, states_[0]->loaded.data(), states_[0]->loaded.size()), 0u);
  }
}

TEST_F(LiveLoadTest, EveryCorruptChunkFailsAndNoReadReturnsItsBytes) {
  const auto bytes = Write();
  int chunk = 0;
  for (size_t off = kPreambleSize; off + sizeof(FrameHeader) <= bytes.size();) {
    FrameHeader h;
    std::memcpy(&h, bytes.data() + off, sizeof(h));
    if (h.type == kFrameChunk) {
      ++chunk;
      for (LoadStyle style : {LoadStyle::kReadFirst, LoadStyle::kNoRead}) {
        auto bad = bytes;
        bad[off + sizeof(h) + h.length / 2] ^= 0x04;
        RecordingSource source(bad);
        auto stream = LoadWhileReading(&source, Entries(style));
        ASSERT_EQ(stream.status().code(), StatusCode::kDataLoss) << stream.status().ToString();
        EXPECT_NE(stream.status().message().find("corrupt chunk " + std::to_string(chunk)),
                  std::string::npos)
            << stream.status().ToString();
        // What reads returned is the saved bytes, up to the corrupt chunk.
        for (size_t k = 0; k < states_.size(); ++k) {
          const auto& got = loaded_[k].bytes;
          ASSERT_LE(got.size(), states_[k]->data.size());
          EXPECT_TRUE(std::equal(got.begin(), got.end(), states_[k]->data.begin())) << k;
        }
      }
    }
    off += sizeof(h) + h.length;
  }
  EXPECT_EQ(chunk, 5);
}

TEST_F(LiveLoadTest, AStreamCutShortOrWithBadTotalsFails) {
  const auto bytes = Write();
  for (size_t cut :
       {size_t{0}, size_t{10}, kPreambleSize + 20, bytes.size() / 2, bytes.size() - 1}) {
    std::vector<uint8_t> part(bytes.begin(), bytes.begin() + cut);
    RecordingSource source(part);
    EXPECT_EQ(LoadWhileReading(&source, Entries(LoadStyle::kReadFirst)).status().code(),
              StatusCode::kDataLoss)
        << cut;
  }
  // Any byte of the end frame (its totals and digest) changed.
  for (size_t back = 1; back <= 16; ++back) {
    auto bad = bytes;
    bad[bad.size() - back] ^= 1;
    RecordingSource source(bad);
    EXPECT_EQ(LoadWhileReading(&source, Entries(LoadStyle::kReadFirst)).status().code(),
              StatusCode::kDataLoss)
        << back;
  }
}

TEST_F(LiveLoadTest, SectionsTheHeaderNamesMustMatchTheRegisteredOnesBeforeAnyLoad) {
  const auto bytes = Write();
  const auto all = states_;
  // One registered state fewer, then one more than the stream holds.
  states_.pop_back();
  {
    RecordingSource source(bytes);
    auto stream = LoadWhileReading(&source, Entries(LoadStyle::kReadFirst));
    ASSERT_EQ(stream.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(stream.status().message().find("'optimizer' has no registered loader"),
              std::string::npos)
        << stream.status().ToString();
    for (const auto& l : loaded_) EXPECT_FALSE(l.called);
  }
  states_ = all;
  Add("scheduler", 100, 5);
  {
    RecordingSource source(bytes);
    auto stream = LoadWhileReading(&source, Entries(LoadStyle::kReadFirst));
    ASSERT_EQ(stream.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(stream.status().message().find("'scheduler' is registered but the checkpoint has "
                                             "no section for it"),
              std::string::npos)
        << stream.status().ToString();
    for (const auto& l : loaded_) EXPECT_FALSE(l.called);
  }
}

TEST_F(LiveLoadTest, WithoutTheHeadersListTheFramesAreHeldToTheRegisteredStates) {
  MemorySink sink;
  uint64_t n = 0;
  ASSERT_TRUE(WriteStream(&sink, Entries(LoadStyle::kReadFirst), {}, &n).ok());
  const auto all = states_;
  states_.pop_back();  // "optimizer", the last section, has no loader here
  RecordingSource source(sink.bytes());
  auto stream = LoadWhileReading(&source, Entries(LoadStyle::kReadFirst));
  ASSERT_EQ(stream.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stream.status().message().find("'optimizer'"), std::string::npos)
      << stream.status().ToString();
  states_ = all;
  Add("scheduler", 100, 5);  // registered, not in the stream
  RecordingSource again(sink.bytes());
  stream = LoadWhileReading(&again, Entries(LoadStyle::kReadFirst));
  ASSERT_EQ(stream.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stream.status().message().find("'scheduler' is registered"), std::string::npos)
      << stream.status().ToString();
}

}  // namespace
}  // namespace gandiva::checkpoint
