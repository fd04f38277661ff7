// AES-256-GCM frames, with the VAES code (aes_gcm_vaes.h) or OpenSSL's EVP
// interface; see sealed_frames.h.
#include "gandiva/contract/sealed_frames.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <bit>
#include <cstring>

#include "cipher_context.h"

namespace gandiva::sealed {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

namespace {

constexpr size_t kNonceBytes = 12;

// The nonce of frame `seq`: never repeats under one key, and is not sent (the
// receiver counts), so a frame moved to another place in the stream cannot open.
std::array<uint8_t, kNonceBytes> NonceOf(uint64_t seq) {
  std::array<uint8_t, kNonceBytes> nonce{};
  std::memcpy(nonce.data() + 4, &seq, sizeof seq);
  return nonce;
}

Status NotOpened(uint64_t seq) {
  return DataLoss("bulk frame " + std::to_string(seq) +
                  " failed authentication (modified on the way, or not sealed with this "
                  "migration's key)");
}

}  // namespace

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
    : ctx_(KeyedContext(key, true, cipher)), seq_(first_seq) {}
FrameSealer::~FrameSealer() = default;

Status FrameSealer::Seal(uint32_t flags, std::span<const uint8_t> payload, uint8_t* out) {
  if (payload.size() > kMaxSealedPayload) return InvalidArgument("frame payload too large");
  const SealedHeader header{seq_, static_cast<uint32_t>(payload.size()), flags};
  // Before the cipher writes: when sealing in place, payload starts right after it.
  std::memcpy(out, &header, sizeof header);
  uint8_t* cipher = out + kSealedHeaderBytes;
  const auto nonce = NonceOf(seq_);
  if (ctx_->vaes) {
    ctx_->vaes->Seal(nonce.data(), out, kSealedHeaderBytes, payload.data(), cipher, payload.size(),
                     cipher + payload.size());
    ++seq_;
    return Status::Ok();
  }
  EVP_CIPHER_CTX* c = ctx_->ctx;
  int n = 0;
  if (!c || EVP_EncryptInit_ex(c, nullptr, nullptr, nullptr, nonce.data()) != 1 ||
      EVP_EncryptUpdate(c, nullptr, &n, out, kSealedHeaderBytes) != 1 ||
      (!payload.empty() &&
       EVP_EncryptUpdate(c, cipher, &n, payload.data(), static_cast<int>(payload.size())) != 1) ||
      EVP_EncryptFinal_ex(c, cipher + payload.size(), &n) != 1 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, kSealedTagBytes, cipher + payload.size()) != 1)
    return Internal("AES-256-GCM sealing failed");
  ++seq_;
  return Status::Ok();
}

FrameOpener::FrameOpener(const BulkKey& key, uint64_t first_seq, SealedCipher cipher)
    : ctx_(KeyedContext(key, false, cipher)), seq_(first_seq) {}
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
  if (ctx_->vaes) {
    if (!ctx_->vaes->Open(nonce.data(), header_bytes, kSealedHeaderBytes, ciphertext, header.length,
                          tag))
      return NotOpened(seq_);
    ++seq_;
    return Status::Ok();
  }
  EVP_CIPHER_CTX* c = ctx_->ctx;
  uint8_t tag_copy[kSealedTagBytes];  // SET_TAG takes a non-const pointer
  std::memcpy(tag_copy, tag, sizeof tag_copy);
  uint8_t final_block[16];
  int n = 0;
  const bool opened =
      c && EVP_DecryptInit_ex(c, nullptr, nullptr, nullptr, nonce.data()) == 1 &&
      EVP_DecryptUpdate(c, nullptr, &n, header_bytes, kSealedHeaderBytes) == 1 &&
      (header.length == 0 ||
       EVP_DecryptUpdate(c, ciphertext, &n, ciphertext, static_cast<int>(header.length)) == 1) &&
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, kSealedTagBytes, tag_copy) == 1 &&
      EVP_DecryptFinal_ex(c, final_block, &n) == 1;
  if (!opened) return NotOpened(seq_);
  ++seq_;
  return Status::Ok();
}

}  // namespace gandiva::sealed
