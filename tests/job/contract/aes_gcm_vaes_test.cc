// The VAES AES-256-GCM (aes_gcm_vaes.h) against OpenSSL's, which is the
// reference: the same ciphertext and tag for every length that exercises a
// different path (whole 256-byte groups, a partial register, a partial block,
// nothing at all), any associated data, and chunk tags both ways. On a CPU
// without VAES the direct checks skip; the tag checks still run (both then
// use OpenSSL).
#include "aes_gcm_vaes.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstring>
#include <random>
#include <vector>

#include "gandiva/contract/chunk_tag.h"

namespace gandiva::sealed {
namespace {

struct Sealed {
  std::vector<uint8_t> ciphertext;
  std::array<uint8_t, 16> tag{};
};

Sealed SealWithOpenSsl(const uint8_t* key, const uint8_t* nonce, const std::vector<uint8_t>& aad,
                       const std::vector<uint8_t>& plain) {
  Sealed out;
  out.ciphertext.resize(plain.size() + 16);
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  int n = 0;
  EXPECT_EQ(EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), nullptr, key, nonce), 1);
  if (!aad.empty()) {
    EXPECT_EQ(EVP_EncryptUpdate(c, nullptr, &n, aad.data(), static_cast<int>(aad.size())), 1);
  }
  if (!plain.empty()) {
    EXPECT_EQ(EVP_EncryptUpdate(c, out.ciphertext.data(), &n, plain.data(),
                                static_cast<int>(plain.size())),
              1);
  }
  EXPECT_EQ(EVP_EncryptFinal_ex(c, out.ciphertext.data() + plain.size(), &n), 1);
  EXPECT_EQ(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, out.tag.data()), 1);
  EVP_CIPHER_CTX_free(c);
  out.ciphertext.resize(plain.size());
  return out;
}

std::vector<uint8_t> RandomBytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Every length to 1100 bytes, then lengths around the group size up to a few
// groups, each with a fresh key and nonce and 0..47 bytes of associated data.
std::vector<size_t> MessageLengths() {
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 1100; ++n) lengths.push_back(n);
  for (size_t groups : {5, 16, 63}) {
    for (size_t d = 0; d < 20; ++d) {
      lengths.push_back(groups * 256 - d);
      lengths.push_back(groups * 256 + d);
    }
  }
  lengths.push_back(512 * 1024);  // a frame as the bulk channel sends it
  return lengths;
}

TEST(AesGcmVaesTest, SealsAsOpenSslDoes) {
  if (!AesGcmVaesAvailable()) GTEST_SKIP() << "this CPU has no AVX-512 VAES/VPCLMULQDQ";
  std::mt19937_64 rng(20261125);
  for (size_t n : MessageLengths()) {
    const auto key = RandomBytes(rng, 32), nonce = RandomBytes(rng, 12),
               aad = RandomBytes(rng, n % 48);
    const auto plain = RandomBytes(rng, n);
    const Sealed want = SealWithOpenSsl(key.data(), nonce.data(), aad, plain);
    const AesGcmVaes gcm(key.data());
    std::vector<uint8_t> got(n);
    std::array<uint8_t, 16> tag{};
    gcm.Seal(nonce.data(), aad.data(), aad.size(), plain.data(), got.data(), n, tag.data());
    ASSERT_EQ(got, want.ciphertext) << "length " << n << ", aad " << aad.size();
    ASSERT_EQ(tag, want.tag) << "length " << n << ", aad " << aad.size();
    // In place, as a frame is sealed.
    std::vector<uint8_t> in_place = plain;
    gcm.Seal(nonce.data(), aad.data(), aad.size(), in_place.data(), in_place.data(), n, tag.data());
    ASSERT_EQ(in_place, want.ciphertext) << "length " << n;
  }
}

TEST(AesGcmVaesTest, OpensWhatOpenSslSealedAndNothingChanged) {
  if (!AesGcmVaesAvailable()) GTEST_SKIP() << "this CPU has no AVX-512 VAES/VPCLMULQDQ";
  std::mt19937_64 rng(7);
  for (size_t n : MessageLengths()) {
    const auto key = RandomBytes(rng, 32), nonce = RandomBytes(rng, 12), aad = RandomBytes(rng, 16);
    const auto plain = RandomBytes(rng, n);
    const Sealed sealed = SealWithOpenSsl(key.data(), nonce.data(), aad, plain);
    const AesGcmVaes gcm(key.data());
    std::vector<uint8_t> data = sealed.ciphertext;
    ASSERT_TRUE(gcm.Open(nonce.data(), aad.data(), aad.size(), data.data(), n, sealed.tag.data()))
        << "length " << n;
    ASSERT_EQ(data, plain) << "length " << n;

    // One bit anywhere (ciphertext, associated data, tag), or another nonce:
    // refused.
    auto bit = [&](size_t bytes) { return std::pair{rng() % bytes, 1u << (rng() % 8)}; };
    if (n > 0) {
      data = sealed.ciphertext;
      const auto [at, mask] = bit(n);
      data[at] ^= mask;
      EXPECT_FALSE(
          gcm.Open(nonce.data(), aad.data(), aad.size(), data.data(), n, sealed.tag.data()))
          << "ciphertext bit, length " << n;
    }
    auto bad_aad = aad;
    const auto [at, mask] = bit(bad_aad.size());
    bad_aad[at] ^= mask;
    data = sealed.ciphertext;
    EXPECT_FALSE(
        gcm.Open(nonce.data(), bad_aad.data(), bad_aad.size(), data.data(), n, sealed.tag.data()))
        << "header bit, length " << n;
    auto bad_tag = sealed.tag;
    bad_tag[rng() % 16] ^= 0x80;
    data = sealed.ciphertext;
    EXPECT_FALSE(gcm.Open(nonce.data(), aad.data(), aad.size(), data.data(), n, bad_tag.data()))
        << "tag bit, length " << n;
    auto other_nonce = nonce;
    other_nonce[11] ^= 1;
    data = sealed.ciphertext;
    EXPECT_FALSE(
        gcm.Open(other_nonce.data(), aad.data(), aad.size(), data.data(), n, sealed.tag.data()))
        << "other nonce, length " << n;
  }
}

// A test vector of NIST's GCM validation suite (gcmEncryptExtIV256.rsp, Count
// 0 of Keylen 256, IVlen 96, PTlen 128, AADlen 128), so the reference is not
// the only check.
TEST(AesGcmVaesTest, MatchesAPublishedTestVector) {
  if (!AesGcmVaesAvailable()) GTEST_SKIP() << "this CPU has no AVX-512 VAES/VPCLMULQDQ";
  auto hex = [](std::string_view h) {
    std::vector<uint8_t> v;
    for (size_t i = 0; i + 1 < h.size(); i += 2)
      v.push_back(static_cast<uint8_t>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
    return v;
  };
  const auto key = hex("92e11dcdaa866f5ce790fd24501f92509aacf4cb8b1339d50c9c1240935dd08b");
  const auto nonce = hex("ac93a1a6145299bde902f21a");
  const auto plain = hex("2d71bcfa914e4ac045b2aa60955fad24");
  const auto aad = hex("1e0889016f67601c8ebea4943bc23ad6");
  const auto want_cipher = hex("8995ae2e6df3dbf96fac7b7137bae67f");
  const auto want_tag = hex("eca5aa77d51d4a0a14d9c51e1da474ab");
  const AesGcmVaes gcm(key.data());
  std::vector<uint8_t> got(plain.size());
  std::vector<uint8_t> tag(16);
  gcm.Seal(nonce.data(), aad.data(), aad.size(), plain.data(), got.data(), plain.size(),
           tag.data());
  EXPECT_EQ(got, want_cipher);
  EXPECT_EQ(tag, want_tag);
}

// A chunk's tag is the same whichever code computes it (the destination's
// copy and the source job may differ), and one bit changes it.
TEST(AesGcmVaesTest, ChunkTagsAgreeBetweenTheTwoImplementations) {
  std::mt19937_64 rng(11);
  BulkKey key;
  for (auto& b : key) b = static_cast<uint8_t>(rng());
  ChunkTagger fastest(key, SealedCipher::kFastest), openssl(key, SealedCipher::kBaseline);
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{16}, size_t{300}, size_t{4} << 20, (size_t{4} << 20) + 5}) {
    auto chunk = RandomBytes(rng, n);
    auto a = fastest.Of(chunk), b = openssl.Of(chunk);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b) << "length " << n;
    if (n == 0) continue;
    chunk[rng() % n] ^= 0x01;
    auto changed = fastest.Of(chunk);
    ASSERT_TRUE(changed.ok());
    EXPECT_NE(*changed, *a) << "length " << n;
    EXPECT_EQ(*changed, *openssl.Of(chunk)) << "length " << n;
  }
}

}  // namespace
}  // namespace gandiva::sealed
