// GMAC chunk tags with OpenSSL's AES-256-GCM (aes_gcm.h); see chunk_tag.h.
#include "gandiva/sealed/chunk_tag.h"

#include <cstring>

#include "aes_gcm.h"

namespace gandiva::sealed {

ChunkTagger::ChunkTagger(const BulkKey& key)
    : gcm_(std::make_unique<AesGcm>(key.data(), AesGcm::Direction::kSeal)) {}
ChunkTagger::~ChunkTagger() = default;
ChunkTagger::ChunkTagger(ChunkTagger&&) noexcept = default;
ChunkTagger& ChunkTagger::operator=(ChunkTagger&&) noexcept = default;

StatusOr<ChunkTag> ChunkTagger::Of(ChunkPlace place, std::span<const uint8_t> bytes) {
  if (!gcm_) return Internal("the chunk tagger was moved from");
  uint8_t nonce[AesGcm::kNonceBytes];
  static_assert(sizeof nonce == sizeof place.section + sizeof place.index);
  std::memcpy(nonce, &place.section, sizeof place.section);  // little-endian (sealed_frames.cc)
  std::memcpy(nonce + sizeof place.section, &place.index, sizeof place.index);
  ChunkTag tag;
  GD_RETURN_IF_ERROR(gcm_->Seal(nonce, bytes, nullptr, nullptr, 0, tag.data()));
  return tag;
}

}  // namespace gandiva::sealed
