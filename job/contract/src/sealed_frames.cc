// AEGIS-256X4 frames (aegis256x4.h); see sealed_frames.h.
#include "gandiva/contract/sealed_frames.h"

#include <openssl/rand.h>

#include <bit>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "aegis256x4.h"

namespace gandiva::sealed {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

namespace {

// The nonce of frame `seq` (LE64, then zeros): never repeats under one key,
// and is not sent (the receiver counts), so a frame moved to another place in
// the stream cannot open.
std::array<uint8_t, Aegis256x4::kNonceBytes> NonceOf(uint64_t seq) {
  std::array<uint8_t, Aegis256x4::kNonceBytes> nonce{};
  std::memcpy(nonce.data(), &seq, sizeof seq);
  return nonce;
}

std::unique_ptr<Aegis256x4> FrameCipher(const BulkKey& key, SealedCipher cipher) {
  const bool baseline =
      ChosenCipher(cipher) == SealedCipher::kBaseline && AegisCodeRuns(AegisCode::kAes128);
  return std::make_unique<Aegis256x4>(key.data(),
                                      baseline ? AegisCode::kAes128 : FastestAegisCode());
}

Status NotOpened(uint64_t seq) {
  return DataLoss("bulk frame " + std::to_string(seq) +
                  " failed authentication (modified on the way, or not sealed with this "
                  "migration's key)");
}

}  // namespace

SealedCipher ChosenCipher(SealedCipher wanted) {
  const char* env = std::getenv(kEnvBulkCipher);
  const std::string_view value = env ? env : "";
  return value == "baseline" || value == "openssl" ? SealedCipher::kBaseline : wanted;
}

StatusOr<BulkKey> NewBulkKey() {
  BulkKey key;
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1)
    return Internal("no random bytes for a migration key");
  return key;
}

std::string BulkKeyToHex(const BulkKey& key) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : key) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

StatusOr<BulkKey> BulkKeyFromHex(std::string_view hex) {
  if (hex.size() != 2 * kBulkKeyBytes)
    return InvalidArgument("bulk_key must be " + std::to_string(2 * kBulkKeyBytes) + " hex digits");
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  BulkKey key;
  for (size_t i = 0; i < key.size(); ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return InvalidArgument("bulk_key must be hex digits");
    key[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return key;
}

FrameSealer::FrameSealer(const BulkKey& key, uint64_t first_seq, SealedCipher cipher)
    : aegis_(FrameCipher(key, cipher)), seq_(first_seq) {}
FrameSealer::~FrameSealer() = default;

Status FrameSealer::Seal(uint32_t flags, std::span<const uint8_t> payload, uint8_t* out) {
  if (payload.size() > kMaxSealedPayload) return InvalidArgument("frame payload too large");
  const SealedHeader header{seq_, static_cast<uint32_t>(payload.size()), flags};
  // Before the cipher writes: when sealing in place, payload starts right after it.
  std::memcpy(out, &header, sizeof header);
  uint8_t* cipher = out + kSealedHeaderBytes;
  const auto nonce = NonceOf(seq_);
  aegis_->Seal(nonce.data(), out, kSealedHeaderBytes, payload.data(), cipher, payload.size(),
               cipher + payload.size());
  ++seq_;
  return Status::Ok();
}

FrameOpener::FrameOpener(const BulkKey& key, uint64_t first_seq, SealedCipher cipher)
    : aegis_(FrameCipher(key, cipher)), seq_(first_seq) {}
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
  const auto nonce = NonceOf(seq_);
  if (!aegis_->Open(nonce.data(), header_bytes, kSealedHeaderBytes, ciphertext, header.length, tag))
    return NotOpened(seq_);
  ++seq_;
  return Status::Ok();
}

}  // namespace gandiva::sealed
