// cipher_speed: the bulk channel's AES-256-GCM per GiB, by each implementation
// in this build, against a memcpy of the same bytes, all in one process on the
// same faulted-in memory: sealing and opening 512 KiB frames (as the jobs do,
// in place) and GMAC tags of 4 MiB chunks (as a warm copy's pre-copy does),
// each with the VAES code (where the CPU has it) and with OpenSSL's. Opening
// checks every frame's tag, so a disagreement between the two fails the run.
// Prints a table; --json prints one object.
//
// Usage: cipher_speed [--mib N] [--repeat N] [--json]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gandiva/contract/chunk_tag.h"
#include "gandiva/contract/sealed_frames.h"
#include "speed_table.h"

namespace {

using namespace gandiva::sealed;
using namespace gandiva::bench;

constexpr size_t kFrame = 512u << 10;  // the jobs' frame payload
constexpr size_t kChunk = 4u << 20;    // a checkpoint chunk
constexpr size_t kWire = kSealedHeaderBytes + kFrame + kSealedTagBytes;

void Fail(const char* what) {
  std::fprintf(stderr, "cipher_speed: %s\n", what);
  std::exit(1);
}

// Seals the n bytes of src into wire-format frames laid end to end in `wire`.
double SealAll(const BulkKey& key, SealedCipher cipher, const uint8_t* src, size_t n,
               uint8_t* wire) {
  FrameSealer sealer(key, 0, cipher);
  const double t0 = Now();
  for (size_t off = 0, i = 0; off < n; off += kFrame, ++i) {
    const size_t len = std::min(kFrame, n - off);
    if (!sealer.Seal(kSealedData, {src + off, len}, wire + i * kWire).ok()) Fail("seal failed");
  }
  return Now() - t0;
}

// Opens them in place, as the destination job does.
double OpenAll(const BulkKey& key, SealedCipher cipher, uint8_t* wire, size_t n) {
  FrameOpener opener(key, 0, cipher);
  const double t0 = Now();
  for (size_t off = 0, i = 0; off < n; off += kFrame, ++i) {
    const size_t len = std::min(kFrame, n - off);
    uint8_t* frame = wire + i * kWire;
    if (!opener.Open(frame, frame + kSealedHeaderBytes, frame + kSealedHeaderBytes + len).ok())
      Fail("a frame did not open: the two implementations disagree");
  }
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
  // The VAES code serves kFastest only where GANDIVA_BULK_CIPHER allows it.
  unsetenv(kEnvBulkCipher);
  const size_t n = opt.mib << 20, frames = (n + kFrame - 1) / kFrame;
  uint8_t* src = MapAnonymous(n);
  uint8_t* dst = MapAnonymous(n);
  uint8_t* wire = MapAnonymous(frames * kWire);
  FillIncompressible(src, n);
  auto key = NewBulkKey();
  if (!key.ok()) Fail("no key");

  SpeedRow copy{"memcpy", {}};
  SpeedRow seal[2] = {{"seal_fastest", {}}, {"seal_openssl", {}}};
  SpeedRow open[2] = {{"open_fastest", {}}, {"open_openssl", {}}};
  SpeedRow tag[2] = {{"gmac_fastest", {}}, {"gmac_openssl", {}}};
  const SealedCipher ciphers[2] = {SealedCipher::kFastest, SealedCipher::kOpenSsl};
  std::vector<ChunkTag> tags[2];
  for (int r = 0; r < opt.repeat; ++r) {
    const double t0 = Now();
    std::memcpy(dst, src, n);
    copy.ms.push_back((Now() - t0) * 1e3);
    // Each opens what the other sealed, and each pass alternates who goes first.
    for (int k = 0; k < 2; ++k) {
      const int sealer = (r + k) % 2, opener = 1 - sealer;
      seal[sealer].ms.push_back(SealAll(*key, ciphers[sealer], src, n, wire) * 1e3);
      open[opener].ms.push_back(OpenAll(*key, ciphers[opener], wire, n) * 1e3);
      tag[sealer].ms.push_back(TagAll(*key, ciphers[sealer], src, n, &tags[sealer]) * 1e3);
    }
    if (tags[0] != tags[1]) Fail("the two implementations' chunk tags disagree");
  }

  const std::vector<const SpeedRow*> rows = {&copy,    &seal[0], &seal[1], &open[0],
                                             &open[1], &tag[0],  &tag[1]};
  if (opt.json) {
    PrintSpeedJson("\"mib\": " + std::to_string(opt.mib) + ", \"frame_bytes\": " +
                       std::to_string(kFrame) + ", \"chunk_bytes\": " + std::to_string(kChunk),
                   rows);
  } else {
    PrintSpeedTable(std::to_string(opt.mib) + " MiB: frames of " + std::to_string(kFrame >> 10) +
                        " KiB, tags of " + std::to_string(kChunk >> 10) +
                        " KiB chunks, median of " + std::to_string(opt.repeat),
                    n, rows);
  }
  return 0;
}
