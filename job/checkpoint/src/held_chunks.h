// What a migration's destination job holds already, as its source job sees
// it: the chunks of the destination's own fresh state (fresh_state.h), each
// by its place (section name, index among the section's chunks), length,
// CRC32C and tag (gandiva/sealed/chunk_tag.h). The source's stream writer
// sends a "same" frame instead of a chunk the destination holds, and the
// chunk's bytes do not cross the wire: frozen layers, embeddings, data a job
// keeps in memory, anything that is as it was when the job started.
//
// The manifest, the destination's one reply on the bulk connection
// (sealed::SendReply), little-endian: "GDHELD1\n", the tag key (32 bytes), u32
// section count, and per section: u16 name length, the name, u32 chunk count,
// and per chunk: u32 length, u32 CRC32C, 16-byte tag. An empty manifest holds
// nothing.
#ifndef GANDIVA_CHECKPOINT_HELD_CHUNKS_H_
#define GANDIVA_CHECKPOINT_HELD_CHUNKS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gandiva/sealed/chunk_tag.h"
#include "gandiva/status.h"

namespace gandiva::checkpoint {

struct HeldChunk {
  uint32_t length = 0;
  uint32_t crc = 0;
  sealed::ChunkTag tag{};
};

struct HeldSection {
  std::string name;
  std::vector<HeldChunk> chunks;
};

std::vector<uint8_t> EncodeHeldChunks(const sealed::BulkKey& key,
                                      const std::vector<HeldSection>& sections);

class HeldChunks {
 public:
  // DataLoss for a malformed manifest.
  static StatusOr<HeldChunks> Parse(std::span<const uint8_t> manifest);

  // The tag of `bytes` if the receiver holds them as chunk `index` of
  // `section`: same length and CRC32C (`crc`, which the writer has computed
  // anyway), then the same tag, computed only then. Else nullopt.
  std::optional<sealed::ChunkTag> Holds(const std::string& section, size_t index,
                                        std::span<const uint8_t> bytes, uint32_t crc);
  size_t chunks() const { return chunks_; }
  // Bytes the source did not send because the receiver held them.
  uint64_t bytes_held() const { return bytes_held_; }

 private:
  explicit HeldChunks(const sealed::BulkKey& key) : tagger_(key) {}
  sealed::ChunkTagger tagger_;
  // By name: the section's position in the manifest (its chunks' tags name
  // it, chunk_tag.h) and its chunks.
  struct Placed {
    uint32_t position = 0;
    std::vector<HeldChunk> chunks;
  };
  std::unordered_map<std::string, Placed> sections_;
  size_t chunks_ = 0;
  uint64_t bytes_held_ = 0;
};

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_HELD_CHUNKS_H_
