// AES-256-GCM over OpenSSL's EVP interface; see aes_gcm.h.
#include "aes_gcm.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <climits>
#include <utility>

namespace gandiva::sealed {

namespace {

// EVP takes int lengths: longer inputs go in pieces (a chunk tag's input may
// be larger than 2 GiB; GCM's result does not depend on how it is cut).
constexpr size_t kEvpPiece = size_t{1} << 30;

using EvpUpdate = int (*)(EVP_CIPHER_CTX*, unsigned char*, int*, const unsigned char*, int);

bool UpdateInPieces(EvpUpdate update, EVP_CIPHER_CTX* ctx, const uint8_t* in, uint8_t* out,
                    size_t n) {
  for (size_t off = 0; off < n; off += kEvpPiece) {
    const size_t len = std::min(kEvpPiece, n - off);
    int done = 0;
    if (update(ctx, out ? out + off : nullptr, &done, in + off, static_cast<int>(len)) != 1)
      return false;
  }
  return true;
}

}  // namespace

AesGcm::AesGcm(const uint8_t* key, Direction direction)
    : ctx_(EVP_CIPHER_CTX_new()), direction_(direction) {
  if (!ctx_) return;
  const int ok = direction == Direction::kSeal
                     ? EVP_EncryptInit_ex(ctx_, EVP_aes_256_gcm(), nullptr, key, nullptr)
                     : EVP_DecryptInit_ex(ctx_, EVP_aes_256_gcm(), nullptr, key, nullptr);
  if (ok != 1) {
    EVP_CIPHER_CTX_free(ctx_);
    ctx_ = nullptr;
  }
}

AesGcm::~AesGcm() { EVP_CIPHER_CTX_free(ctx_); }  // frees and wipes the key schedule

AesGcm::AesGcm(AesGcm&& other) noexcept
    : ctx_(std::exchange(other.ctx_, nullptr)), direction_(other.direction_) {}

AesGcm& AesGcm::operator=(AesGcm&& other) noexcept {
  if (this != &other) {
    EVP_CIPHER_CTX_free(ctx_);
    ctx_ = std::exchange(other.ctx_, nullptr);
    direction_ = other.direction_;
  }
  return *this;
}

Status AesGcm::Seal(const uint8_t* nonce, std::span<const uint8_t> aad, const uint8_t* in,
                    uint8_t* out, size_t n, uint8_t* tag) {
  if (!ctx_ || direction_ != Direction::kSeal) return Internal("no AES-256-GCM context to seal");
  int len = 0;
  uint8_t none[kTagBytes];  // GCM's final step writes no bytes
  if (EVP_EncryptInit_ex(ctx_, nullptr, nullptr, nullptr, nonce) != 1 ||
      !UpdateInPieces(EVP_EncryptUpdate, ctx_, aad.data(), nullptr, aad.size()) ||
      !UpdateInPieces(EVP_EncryptUpdate, ctx_, in, out, n) ||
      EVP_EncryptFinal_ex(ctx_, none, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), tag) != 1)
    return Internal("OpenSSL's AES-256-GCM failed to seal");
  return Status::Ok();
}

Status AesGcm::Open(const uint8_t* nonce, std::span<const uint8_t> aad, uint8_t* data, size_t n,
                    const uint8_t* tag) {
  if (!ctx_ || direction_ != Direction::kOpen) return Internal("no AES-256-GCM context to open");
  int len = 0;
  uint8_t none[kTagBytes];
  uint8_t expected[kTagBytes];
  std::copy(tag, tag + kTagBytes, expected);  // EVP's set-tag takes a non-const pointer
  if (EVP_DecryptInit_ex(ctx_, nullptr, nullptr, nullptr, nonce) != 1 ||
      !UpdateInPieces(EVP_DecryptUpdate, ctx_, aad.data(), nullptr, aad.size()) ||
      !UpdateInPieces(EVP_DecryptUpdate, ctx_, data, data, n) ||
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes), expected) != 1)
    return Internal("OpenSSL's AES-256-GCM failed to open");
  // The tag is compared in constant time inside OpenSSL's final step.
  if (EVP_DecryptFinal_ex(ctx_, none, &len) != 1) {
    OPENSSL_cleanse(data, n);
    return DataLoss("AES-256-GCM authentication failed");
  }
  return Status::Ok();
}

}  // namespace gandiva::sealed
