// cipher_speed: the bulk channel's ciphers per GiB, by each code in this build,
// against a memcpy of the same bytes, all in one process on the same
// faulted-in memory: sealing and opening 512 KiB frames in place (as the jobs
// do) with AEGIS-256X4, the frames' cipher, on 512-bit VAES and on 128-bit AES
// instructions; the same with AES-256-GCM, which sealed them before (our VAES
// code and OpenSSL's), for the comparison; and GMAC tags of 4 MiB chunks (as a
// warm copy's pre-copy computes them), VAES and OpenSSL. Each code opens what
// another sealed, so a disagreement fails the run. A code the CPU lacks is
// left out. Prints a table; --json prints one object.
//
// Usage: cipher_speed [--mib N] [--repeat N] [--json]
#include <openssl/evp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "aegis256x4.h"
#include "aes_gcm_vaes.h"
#include "gandiva/contract/chunk_tag.h"
#include "gandiva/contract/sealed_frames.h"
#include "speed_table.h"

namespace {

using namespace gandiva::sealed;
using namespace gandiva::bench;

constexpr size_t kFrame = 512u << 10;  // the jobs' frame payload
constexpr size_t kChunk = 4u << 20;    // a checkpoint chunk
constexpr size_t kHeader = kSealedHeaderBytes, kTag = kSealedTagBytes;
constexpr size_t kWire = kHeader + kFrame + kTag;

void Fail(const char* what) {
  std::fprintf(stderr, "cipher_speed: %s\n", what);
  std::exit(1);
}

// One frame: its header as associated data, its number as the nonce (as
// sealed_frames.cc lays them out), payload and tag after the header.
struct FrameCode {
  std::string name;
  std::function<void(uint64_t seq, const uint8_t* in, uint8_t* frame, size_t n)> seal;
  std::function<bool(uint64_t seq, uint8_t* frame, size_t n)> open;
};

FrameCode Aegis(const BulkKey& key, AegisCode code) {
  auto aegis = std::make_shared<Aegis256x4>(key.data(), code);
  auto nonce = [](uint64_t seq) {
    std::array<uint8_t, Aegis256x4::kNonceBytes> n{};
    std::memcpy(n.data(), &seq, sizeof seq);
    return n;
  };
  return {std::string("aegis256x4_") + AegisCodeName(code),
          [=](uint64_t seq, const uint8_t* in, uint8_t* f, size_t n) {
            aegis->Seal(nonce(seq).data(), f, kHeader, in, f + kHeader, n, f + kHeader + n);
          },
          [=](uint64_t seq, uint8_t* f, size_t n) {
            return aegis->Open(nonce(seq).data(), f, kHeader, f + kHeader, n, f + kHeader + n);
          }};
}

std::array<uint8_t, 12> GcmNonce(uint64_t seq) {
  std::array<uint8_t, 12> n{};
  std::memcpy(n.data() + 4, &seq, sizeof seq);
  return n;
}

FrameCode GcmVaes(const BulkKey& key) {
  auto gcm = std::make_shared<AesGcmVaes>(key.data());
  return {"aes256gcm_vaes512",
          [=](uint64_t seq, const uint8_t* in, uint8_t* f, size_t n) {
            gcm->Seal(GcmNonce(seq).data(), f, kHeader, in, f + kHeader, n, f + kHeader + n);
          },
          [=](uint64_t seq, uint8_t* f, size_t n) {
            return gcm->Open(GcmNonce(seq).data(), f, kHeader, f + kHeader, n, f + kHeader + n);
          }};
}

FrameCode GcmOpenSsl(const BulkKey& key) {
  std::shared_ptr<EVP_CIPHER_CTX> seal(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  std::shared_ptr<EVP_CIPHER_CTX> open(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  EVP_EncryptInit_ex(seal.get(), EVP_aes_256_gcm(), nullptr, key.data(), nullptr);
  EVP_DecryptInit_ex(open.get(), EVP_aes_256_gcm(), nullptr, key.data(), nullptr);
  return {"aes256gcm_openssl",
          [=](uint64_t seq, const uint8_t* in, uint8_t* f, size_t n) {
            EVP_CIPHER_CTX* c = seal.get();
            int len = 0;
            if (EVP_EncryptInit_ex(c, nullptr, nullptr, nullptr, GcmNonce(seq).data()) != 1 ||
                EVP_EncryptUpdate(c, nullptr, &len, f, kHeader) != 1 ||
                EVP_EncryptUpdate(c, f + kHeader, &len, in, static_cast<int>(n)) != 1 ||
                EVP_EncryptFinal_ex(c, f + kHeader + n, &len) != 1 ||
                EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, kTag, f + kHeader + n) != 1)
              Fail("OpenSSL sealing failed");
          },
          [=](uint64_t seq, uint8_t* f, size_t n) {
            EVP_CIPHER_CTX* c = open.get();
            int len = 0;
            uint8_t last[16];
            return EVP_DecryptInit_ex(c, nullptr, nullptr, nullptr, GcmNonce(seq).data()) == 1 &&
                   EVP_DecryptUpdate(c, nullptr, &len, f, kHeader) == 1 &&
                   EVP_DecryptUpdate(c, f + kHeader, &len, f + kHeader, static_cast<int>(n)) == 1 &&
                   EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, kTag, f + kHeader + n) == 1 &&
                   EVP_DecryptFinal_ex(c, last, &len) == 1;
          }};
}

// Seals the n bytes of src into frames laid end to end in `wire` (each header
// written first, as the sealer does).
double SealAll(const FrameCode& code, const uint8_t* src, size_t n, uint8_t* wire) {
  const double t0 = Now();
  for (size_t off = 0, i = 0; off < n; off += kFrame, ++i) {
    const size_t len = std::min(kFrame, n - off);
    uint8_t* frame = wire + i * kWire;
    const SealedHeader header{i, static_cast<uint32_t>(len), kSealedData};
    std::memcpy(frame, &header, sizeof header);
    code.seal(i, src + off, frame, len);
  }
  return Now() - t0;
}

double OpenAll(const FrameCode& code, uint8_t* wire, size_t n) {
  const double t0 = Now();
  for (size_t off = 0, i = 0; off < n; off += kFrame, ++i)
    if (!code.open(i, wire + i * kWire, std::min(kFrame, n - off)))
      Fail("a frame did not open: two codes disagree");
  return Now() - t0;
}

double TagAll(const BulkKey& key, SealedCipher cipher, const uint8_t* src, size_t n,
              std::vector<ChunkTag>* tags) {
  ChunkTagger tagger(key, cipher);
  tags->clear();
  const double t0 = Now();
  for (size_t off = 0; off < n; off += kChunk) {
    auto tag = tagger.Of({src + off, std::min(kChunk, n - off)});
    if (!tag.ok()) Fail("tagging failed");
    tags->push_back(*tag);
  }
  return Now() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  gandiva::bench::SpeedOptions opt;
  if (!gandiva::bench::ParseSpeedOptions(argc, argv, "cipher_speed", &opt)) return 2;
  // The VAES codes serve kFastest only where GANDIVA_BULK_CIPHER allows it.
  unsetenv(kEnvBulkCipher);
  const size_t n = opt.mib << 20, frames = (n + kFrame - 1) / kFrame;
  uint8_t* src = MapAnonymous(n);
  uint8_t* dst = MapAnonymous(n);
  uint8_t* wire = MapAnonymous(frames * kWire);
  FillIncompressible(src, n);
  auto key = NewBulkKey();
  if (!key.ok()) Fail("no key");

  // Two families: each seals, then the next of its family opens (and checks) that.
  std::vector<std::vector<FrameCode>> families(2);
  for (AegisCode code : {AegisCode::kVaes512, AegisCode::kAes128})
    if (AegisCodeRuns(code)) families[0].push_back(Aegis(*key, code));
  if (AesGcmVaesAvailable()) families[1].push_back(GcmVaes(*key));
  families[1].push_back(GcmOpenSsl(*key));

  std::vector<SpeedRow> rows(1, SpeedRow{"memcpy", {}});
  std::vector<std::pair<const FrameCode*, size_t>> codes;  // code, its seal row (open: +1)
  for (const auto& family : families)
    for (const FrameCode& code : family) {
      codes.emplace_back(&code, rows.size());
      rows.push_back({"seal_" + code.name, {}});
      rows.push_back({"open_" + code.name, {}});
    }
  const size_t gmac_row = rows.size();
  rows.push_back({"gmac_vaes512", {}});
  rows.push_back({"gmac_openssl", {}});
  const SealedCipher taggers[2] = {SealedCipher::kFastest, SealedCipher::kBaseline};
  std::vector<ChunkTag> tags[2];

  for (int r = 0; r < opt.repeat; ++r) {
    const double t0 = Now();
    std::memcpy(dst, src, n);
    rows[0].ms.push_back((Now() - t0) * 1e3);
    size_t c = 0;
    for (const auto& family : families)
      for (size_t k = 0; k < family.size(); ++k, ++c) {
        const FrameCode& opener = family[(k + 1) % family.size()];
        const size_t open_row = codes[c - k + (k + 1) % family.size()].second + 1;
        rows[codes[c].second].ms.push_back(SealAll(family[k], src, n, wire) * 1e3);
        rows[open_row].ms.push_back(OpenAll(opener, wire, n) * 1e3);
      }
    for (int k = 0; k < 2; ++k)
      rows[gmac_row + k].ms.push_back(TagAll(*key, taggers[k], src, n, &tags[k]) * 1e3);
    if (tags[0] != tags[1]) Fail("the two codes' chunk tags disagree");
  }
  if (std::memcmp(dst, src, n) != 0) Fail("memcpy");

  std::vector<const SpeedRow*> printed;
  for (const SpeedRow& row : rows) printed.push_back(&row);
  if (opt.json) {
    PrintSpeedJson("\"mib\": " + std::to_string(opt.mib) + ", \"frame_bytes\": " +
                       std::to_string(kFrame) + ", \"chunk_bytes\": " + std::to_string(kChunk),
                   printed);
  } else {
    PrintSpeedTable(std::to_string(opt.mib) + " MiB: frames of " + std::to_string(kFrame >> 10) +
                        " KiB, tags of " + std::to_string(kChunk >> 10) +
                        " KiB chunks, median of " + std::to_string(opt.repeat),
                    n, printed);
  }
  return 0;
}
