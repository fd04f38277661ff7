// AEGIS-256X4 (aegis256x4.h) against RFC 10032's test vectors, and its three
// codes (512-bit VAES, 128-bit AES instructions, portable) against each other
// on every length that takes a different path: whole 64-byte blocks, a partial
// block, nothing at all, with and without associated data, in place. A code
// this CPU does not run is skipped; the portable one runs everywhere.
#include "aegis256x4.h"

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gandiva/contract/sealed_frames.h"

namespace gandiva::sealed {
namespace {

constexpr AegisCode kCodes[] = {AegisCode::kVaes512, AegisCode::kAes128, AegisCode::kPortable};

std::vector<uint8_t> Hex(std::string_view h) {
  std::vector<uint8_t> v;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    v.push_back(static_cast<uint8_t>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
  return v;
}

std::vector<uint8_t> Random(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(Aegis256x4Test, PortableAesRoundMatchesThePublishedRound) {
  const auto in = Hex("000102030405060708090a0b0c0d0e0f");
  const auto rk = Hex("101112131415161718191a1b1c1d1e1f");
  std::vector<uint8_t> out(16);
  aegis::PortableAesRound(in.data(), rk.data(), out.data());
  EXPECT_EQ(out, Hex("7a7b4e5638782546a8c0477a3b813f43"));
}

struct Vector {
  const char* name;
  const char* ad;
  const char* msg;
  const char* ct;
  const char* tag128;
};

// RFC 10032's AEGIS-256X4 vectors (key 00..1f, nonce 10..2f).
constexpr Vector kVectors[] = {
    {"test vector 1", "", "", "", "3b7fee6cee7bf17888ad11ed2397beb4"},
    {"test vector 2", "0102030401020304",
     "040506070405060704050607040506070405060704050607040506070405060704050607040506070405060704050"
     "607"
     "040506070405060704050607040506070405060704050607040506070405060704050607040506070405060704050"
     "607"
     "040506070405060704050607040506070405060704050607",
     "bfc2085b7e8017da99b0b6d646ae4d01f4ba8f2e7dfca1d759ae48a135139b9aaac6b4f5db810d426be1fdaff4e1"
     "454153a34b11da78ed7e418ee2ee9853042e95536aecbb694cea1b16a478eb0d4d1bf6509b1ce652a45af58e0e46"
     "ffccfa2d0426e702391d2ff5813808b81748a490dd656465fed61f09",
     "b63b611b13975e2f3dc3cb6c2397bfcd"},
};

TEST(Aegis256x4Test, EachCodeMatchesTheRfcVectors) {
  const auto key = Hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
  const auto nonce = Hex("101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f");
  for (AegisCode code : kCodes) {
    if (!AegisCodeRuns(code)) continue;
    const Aegis256x4 aegis(key.data(), code);
    for (const Vector& v : kVectors) {
      const auto ad = Hex(v.ad), msg = Hex(v.msg), ct = Hex(v.ct), tag = Hex(v.tag128);
      std::vector<uint8_t> got(msg.size());
      std::vector<uint8_t> got_tag(16);
      aegis.Seal(nonce.data(), ad.data(), ad.size(), msg.data(), got.data(), msg.size(),
                 got_tag.data());
      EXPECT_EQ(got, ct) << AegisCodeName(code) << ", " << v.name;
      EXPECT_EQ(got_tag, tag) << AegisCodeName(code) << ", " << v.name;
      std::vector<uint8_t> opened = ct;
      EXPECT_TRUE(
          aegis.Open(nonce.data(), ad.data(), ad.size(), opened.data(), opened.size(), tag.data()))
          << AegisCodeName(code) << ", " << v.name;
      EXPECT_EQ(opened, msg) << AegisCodeName(code) << ", " << v.name;
    }
  }
}

// Every length to 1100 bytes, then around a few sizes of whole blocks, and a
// frame as the bulk channel sends it.
std::vector<size_t> Lengths() {
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 1100; ++n) lengths.push_back(n);
  for (size_t blocks : {31, 64, 257})
    for (size_t d = 0; d < 5; ++d) {
      lengths.push_back(blocks * 64 - d);
      lengths.push_back(blocks * 64 + d);
    }
  lengths.push_back(512 * 1024);
  return lengths;
}

TEST(Aegis256x4Test, TheCodesSealTheSameBytes) {
  std::mt19937_64 rng(20261127);
  for (size_t n : Lengths()) {
    const auto key = Random(rng, 32), nonce = Random(rng, 32), aad = Random(rng, n % 150);
    const auto plain = Random(rng, n);
    const Aegis256x4 portable(key.data(), AegisCode::kPortable);
    std::vector<uint8_t> want(n);
    std::array<uint8_t, 16> want_tag{};
    portable.Seal(nonce.data(), aad.data(), aad.size(), plain.data(), want.data(), n,
                  want_tag.data());
    for (AegisCode code : kCodes) {
      if (!AegisCodeRuns(code) || code == AegisCode::kPortable) continue;
      const Aegis256x4 aegis(key.data(), code);
      std::vector<uint8_t> got = plain;  // in place, as a frame is sealed
      std::array<uint8_t, 16> tag{};
      aegis.Seal(nonce.data(), aad.data(), aad.size(), got.data(), got.data(), n, tag.data());
      ASSERT_EQ(got, want) << AegisCodeName(code) << ", length " << n << ", aad " << aad.size();
      ASSERT_EQ(tag, want_tag) << AegisCodeName(code) << ", length " << n;
    }
  }
}

TEST(Aegis256x4Test, OpensOnlyWhatWasSealedAndZeroesTheRest) {
  std::mt19937_64 rng(7);
  for (AegisCode code : kCodes) {
    if (!AegisCodeRuns(code)) continue;
    for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{1000},
                     size_t{64 * 1024 + 3}}) {
      const auto key = Random(rng, 32), nonce = Random(rng, 32), aad = Random(rng, 16);
      const auto plain = Random(rng, n);
      const Aegis256x4 aegis(key.data(), code);
      std::vector<uint8_t> sealed(n);
      std::array<uint8_t, 16> tag{};
      aegis.Seal(nonce.data(), aad.data(), aad.size(), plain.data(), sealed.data(), n, tag.data());
      std::vector<uint8_t> data = sealed;
      ASSERT_TRUE(aegis.Open(nonce.data(), aad.data(), aad.size(), data.data(), n, tag.data()))
          << AegisCodeName(code) << ", length " << n;
      ASSERT_EQ(data, plain);

      // One bit anywhere (ciphertext, associated data, tag), or another nonce
      // or key: refused, and nothing of the plaintext is left.
      const std::vector<uint8_t> zeros(n);
      auto refused = [&](const Aegis256x4& a, const std::vector<uint8_t>& aad_used,
                         const std::vector<uint8_t>& nonce_used, std::vector<uint8_t> bytes,
                         const std::array<uint8_t, 16>& tag_used, const char* what) {
        EXPECT_FALSE(a.Open(nonce_used.data(), aad_used.data(), aad_used.size(), bytes.data(), n,
                            tag_used.data()))
            << AegisCodeName(code) << ", " << what << ", length " << n;
        EXPECT_EQ(bytes, zeros) << what;
      };
      if (n > 0) {
        data = sealed;
        data[rng() % n] ^= static_cast<uint8_t>(1u << (rng() % 8));
        refused(aegis, aad, nonce, data, tag, "ciphertext bit");
      }
      auto bad_aad = aad;
      bad_aad[rng() % 16] ^= 0x04;
      refused(aegis, bad_aad, nonce, sealed, tag, "associated data bit");
      auto bad_tag = tag;
      bad_tag[rng() % 16] ^= 0x80;
      refused(aegis, aad, nonce, sealed, bad_tag, "tag bit");
      auto other_nonce = nonce;
      other_nonce[31] ^= 1;
      refused(aegis, aad, other_nonce, sealed, tag, "other nonce");
      auto other_key = key;
      other_key[0] ^= 1;
      refused(Aegis256x4(other_key.data(), code), aad, nonce, sealed, tag, "other key");
    }
  }
}

// Frames sealed by either code open with the other, in sequence, and a frame
// modified on the way fails either.
TEST(Aegis256x4Test, FramesCrossBetweenTheCodes) {
  std::mt19937_64 rng(3);
  BulkKey key;
  for (auto& b : key) b = static_cast<uint8_t>(rng());
  for (const auto& [seal_with, open_with] :
       {std::pair{SealedCipher::kFastest, SealedCipher::kBaseline},
        std::pair{SealedCipher::kBaseline, SealedCipher::kFastest}}) {
    FrameSealer sealer(key, 0, seal_with);
    FrameOpener opener(key, 0, open_with);
    for (size_t n : {size_t{0}, size_t{1}, size_t{255}, size_t{4096 + 17}, size_t{512 * 1024}}) {
      const auto payload = Random(rng, n);
      std::vector<uint8_t> wire(kSealedHeaderBytes + n + kSealedTagBytes);
      ASSERT_TRUE(sealer.Seal(kSealedData, payload, wire.data()).ok());
      uint8_t* cipher = wire.data() + kSealedHeaderBytes;
      if (n > 0) {  // damaged, it fails, and the opener still waits for that frame
        std::vector<uint8_t> damaged = wire;
        damaged[kSealedHeaderBytes + rng() % n] ^= 0x10;
        const Status bad = opener.Open(damaged.data(), damaged.data() + kSealedHeaderBytes,
                                       damaged.data() + kSealedHeaderBytes + n);
        EXPECT_EQ(bad.code(), StatusCode::kDataLoss) << bad.ToString();
      }
      const Status ok = opener.Open(wire.data(), cipher, cipher + n);
      ASSERT_TRUE(ok.ok()) << ok.ToString() << " length " << n;
      EXPECT_EQ(std::vector<uint8_t>(cipher, cipher + n), payload);
    }
  }
}

}  // namespace
}  // namespace gandiva::sealed
