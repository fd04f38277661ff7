// OpenSSL's AES-256-GCM as the sealed component drives it (aes_gcm.h), against
// the AES-256 test cases of the GCM specification (McGrew and Viega, "The
// Galois/Counter Mode of Operation", appendix B, cases 13 to 16; the same in
// NIST's CAVP files), and every one of them made to fail: a flipped bit of the
// tag, of the ciphertext or of the associated data, another nonce, a
// ciphertext cut short, another key. A failed open zeroes what it decrypted.
#include "aes_gcm.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_hex.h"

namespace gandiva::sealed {
namespace {

using testing::FromHex;

struct Vector {
  const char* name;
  const char* key;
  const char* nonce;
  const char* plain;
  const char* aad;
  const char* cipher;
  const char* tag;
};

constexpr char kZeroKey[] = "0000000000000000000000000000000000000000000000000000000000000000";
constexpr char kKey[] = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308";
constexpr char kNonce[] = "cafebabefacedbaddecaf888";
constexpr char kPlain64[] =
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
    "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255";
constexpr char kCipher64[] =
    "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
    "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad";

const Vector kVectors[] = {
    {"case 13: empty", kZeroKey, "000000000000000000000000", "", "", "",
     "530f8afbc74536b9a963b4f1c4cb738b"},
    {"case 14: one zero block", kZeroKey, "000000000000000000000000",
     "00000000000000000000000000000000", "", "cea7403d4d606b6e074ec5d3baf39d18",
     "d0d1c8a799996bf0265b98b5d48ab919"},
    {"case 15: four blocks", kKey, kNonce, kPlain64, "", kCipher64,
     "b094dac5d93471bdec1a502270e3cc6c"},
    {"case 16: 60 bytes and associated data", kKey, kNonce,
     "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
     "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
     "feedfacedeadbeeffeedfacedeadbeefabaddad2",
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
     "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
     "76fc6ece0f4e1768cddf8853bb2d551b"},
};

// One vector's bytes, and an open of (possibly changed) copies of them.
struct Case {
  explicit Case(const Vector& v)
      : key(FromHex(v.key)),
        nonce(FromHex(v.nonce)),
        plain(FromHex(v.plain)),
        aad(FromHex(v.aad)),
        cipher(FromHex(v.cipher)),
        tag(FromHex(v.tag)) {}
  Status Open(std::vector<uint8_t> c, std::vector<uint8_t> n, std::vector<uint8_t> a,
              std::vector<uint8_t> t, std::vector<uint8_t> k, std::vector<uint8_t>* out) const {
    AesGcm gcm(k.data(), AesGcm::Direction::kOpen);
    Status s = gcm.Open(n.data(), a, c.data(), c.size(), t.data());
    *out = c;
    return s;
  }
  std::vector<uint8_t> key, nonce, plain, aad, cipher, tag;
};

TEST(AesGcmTest, SealsTheSpecificationVectors) {
  for (const Vector& v : kVectors) {
    SCOPED_TRACE(v.name);
    const Case c(v);
    AesGcm gcm(c.key.data(), AesGcm::Direction::kSeal);
    std::vector<uint8_t> out(c.plain.size()), tag(AesGcm::kTagBytes);
    ASSERT_TRUE(
        gcm.Seal(c.nonce.data(), c.aad, c.plain.data(), out.data(), out.size(), tag.data()).ok());
    EXPECT_EQ(out, c.cipher);
    EXPECT_EQ(tag, c.tag);
    // In place, as the frames are sealed, and a second message on the same context.
    std::vector<uint8_t> in_place = c.plain;
    ASSERT_TRUE(gcm.Seal(c.nonce.data(), c.aad, in_place.data(), in_place.data(), in_place.size(),
                         tag.data())
                    .ok());
    EXPECT_EQ(in_place, c.cipher);
    EXPECT_EQ(tag, c.tag);
  }
}

TEST(AesGcmTest, OpensTheSpecificationVectors) {
  for (const Vector& v : kVectors) {
    SCOPED_TRACE(v.name);
    const Case c(v);
    std::vector<uint8_t> out;
    ASSERT_TRUE(c.Open(c.cipher, c.nonce, c.aad, c.tag, c.key, &out).ok());
    EXPECT_EQ(out, c.plain);
  }
}

// The must-fail vectors: each case with one thing changed fails with DataLoss.
TEST(AesGcmTest, RefusesEveryChangedVector) {
  for (const Vector& v : kVectors) {
    SCOPED_TRACE(v.name);
    const Case c(v);
    std::vector<uint8_t> out;
    auto refused = [&](const char* what, Status s) {
      EXPECT_EQ(s.code(), StatusCode::kDataLoss) << what << ": " << s.ToString();
      EXPECT_EQ(out, std::vector<uint8_t>(out.size(), 0)) << what << ": not zeroed";
    };
    for (size_t bit : {size_t{0}, size_t{77}, size_t{127}}) {
      auto t = c.tag;
      t[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      refused("flipped tag", c.Open(c.cipher, c.nonce, c.aad, t, c.key, &out));
    }
    if (!c.cipher.empty()) {
      for (size_t at : {size_t{0}, c.cipher.size() - 1}) {
        auto x = c.cipher;
        x[at] ^= 0x80;
        refused("flipped ciphertext", c.Open(x, c.nonce, c.aad, c.tag, c.key, &out));
      }
      auto cut = c.cipher;
      cut.pop_back();
      refused("truncated ciphertext", c.Open(cut, c.nonce, c.aad, c.tag, c.key, &out));
    }
    auto longer = c.cipher;
    longer.push_back(0);
    refused("extended ciphertext", c.Open(longer, c.nonce, c.aad, c.tag, c.key, &out));
    auto a = c.aad;
    if (a.empty())
      a.push_back(0);
    else
      a[a.size() / 2] ^= 1;
    refused("other associated data", c.Open(c.cipher, c.nonce, a, c.tag, c.key, &out));
    auto n = c.nonce;
    n[11] ^= 1;
    refused("other nonce", c.Open(c.cipher, n, c.aad, c.tag, c.key, &out));
    auto k = c.key;
    k[31] ^= 1;
    refused("other key", c.Open(c.cipher, c.nonce, c.aad, c.tag, k, &out));
  }
}

TEST(AesGcmTest, AContextOpensOnlyInItsDirection) {
  const Case c(kVectors[2]);
  AesGcm seal(c.key.data(), AesGcm::Direction::kSeal);
  auto bytes = c.cipher;
  EXPECT_EQ(seal.Open(c.nonce.data(), c.aad, bytes.data(), bytes.size(), c.tag.data()).code(),
            StatusCode::kInternal);
  AesGcm moved = std::move(seal);
  std::vector<uint8_t> tag(AesGcm::kTagBytes);
  EXPECT_TRUE(
      moved.Seal(c.nonce.data(), c.aad, c.plain.data(), bytes.data(), bytes.size(), tag.data())
          .ok());
  EXPECT_EQ(tag, c.tag);
  EXPECT_EQ(seal.Seal(c.nonce.data(), c.aad, c.plain.data(), bytes.data(), bytes.size(), tag.data())
                .code(),
            StatusCode::kInternal)
      << "moved from";
}

}  // namespace
}  // namespace gandiva::sealed
