// AES-256-GCM frames (aes_gcm.h); see sealed_frames.h.
#include "gandiva/sealed/sealed_frames.h"

#include <bit>
#include <cstring>

#include "aes_gcm.h"

namespace gandiva::sealed {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");
static_assert(kSealedNonceBytes == AesGcm::kNonceBytes && kSealedTagBytes == AesGcm::kTagBytes);
static_assert(kBulkKeyBytes == AesGcm::kKeyBytes);

namespace {

Status NotOpened(uint64_t seq) {
  return DataLoss("bulk frame " + std::to_string(seq) +
                  " failed authentication (modified on the way, or not sealed with this "
                  "migration's key)");
}

}  // namespace

std::array<uint8_t, kSealedNonceBytes> FrameNonce(uint64_t seq) {
  std::array<uint8_t, kSealedNonceBytes> nonce{};
  std::memcpy(nonce.data(), &seq, sizeof seq);
  return nonce;
}

FrameSealer::FrameSealer(const BulkKey& key, uint64_t first_seq)
    : gcm_(std::make_unique<AesGcm>(key.data(), AesGcm::Direction::kSeal)), seq_(first_seq) {}
FrameSealer::~FrameSealer() = default;

Status FrameSealer::Seal(uint32_t flags, std::span<const uint8_t> payload, uint8_t* out) {
  if (payload.size() > kMaxSealedPayload) return InvalidArgument("frame payload too large");
  const SealedHeader header{seq_, static_cast<uint32_t>(payload.size()), flags};
  // Before the cipher writes: when sealing in place, payload starts right after it.
  std::memcpy(out, &header, sizeof header);
  uint8_t* cipher = out + kSealedHeaderBytes;
  const auto nonce = FrameNonce(seq_);
  GD_RETURN_IF_ERROR(gcm_->Seal(nonce.data(), {out, kSealedHeaderBytes}, payload.data(), cipher,
                                payload.size(), cipher + payload.size()));
  ++seq_;
  return Status::Ok();
}

FrameOpener::FrameOpener(const BulkKey& key, uint64_t first_seq)
    : gcm_(std::make_unique<AesGcm>(key.data(), AesGcm::Direction::kOpen)), seq_(first_seq) {}
FrameOpener::~FrameOpener() = default;

StatusOr<SealedHeader> FrameOpener::CheckHeader(const uint8_t* bytes) const {
  SealedHeader header;
  std::memcpy(&header, bytes, sizeof header);
  if (header.seq != seq_)
    return DataLoss("bulk frame " + std::to_string(header.seq) + " arrived where frame " +
                    std::to_string(seq_) + " was due (replayed, reordered or lost)");
  if (header.length > kMaxSealedPayload)
    return DataLoss("bulk frame " + std::to_string(seq_) + " claims " +
                    std::to_string(header.length) + " bytes");
  return header;
}

Status FrameOpener::Open(const uint8_t* header_bytes, uint8_t* ciphertext, const uint8_t* tag) {
  GD_ASSIGN_OR_RETURN(SealedHeader header, CheckHeader(header_bytes));
  const auto nonce = FrameNonce(seq_);
  Status s =
      gcm_->Open(nonce.data(), {header_bytes, kSealedHeaderBytes}, ciphertext, header.length, tag);
  if (s.code() == StatusCode::kDataLoss) return NotOpened(seq_);
  GD_RETURN_IF_ERROR(s);
  ++seq_;
  return Status::Ok();
}

}  // namespace gandiva::sealed
