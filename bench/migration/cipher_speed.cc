// cipher_speed: the bulk channel's cipher per GiB against a memcpy of the same
// bytes, all in one process on the same faulted-in memory: sealing and opening
// 512 KiB frames in place (as the jobs do) with OpenSSL's AES-256-GCM, on one
// thread and on --threads threads (each with its own context, frames dealt
// out by number, as a sealer on several cores would); and the candidates for
// the chunk tags of 4 MiB chunks (as a warm copy's pre-copy computes them):
// GMAC, which the tags use, against HMAC-SHA-256 and BLAKE2b-512, the keyed
// hashes that need no nonce. The frames sealed on several threads must open
// one by one, and each row's tags must be the same on a second pass, or the
// run fails. Prints a table; --json prints one object.
//
// Usage: cipher_speed [--mib N] [--repeat N] [--threads N] [--json]
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "aes_gcm.h"
#include "gandiva/sealed/chunk_tag.h"
#include "gandiva/sealed/sealed_frames.h"
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

size_t FrameLength(size_t n, size_t i) { return std::min(kFrame, n - i * kFrame); }

// Frames i = first, first + stride, ... of the n bytes of src, sealed into
// `wire` laid end to end, each with its own number's nonce (sealed_frames.h).
void SealSome(const BulkKey& key, const uint8_t* src, size_t n, uint8_t* wire, size_t first,
              size_t stride) {
  AesGcm gcm(key.data(), AesGcm::Direction::kSeal);
  const size_t frames = (n + kFrame - 1) / kFrame;
  for (size_t i = first; i < frames; i += stride) {
    uint8_t* f = wire + i * kWire;
    const size_t len = FrameLength(n, i);
    const SealedHeader header{i, static_cast<uint32_t>(len), kSealedData};
    std::memcpy(f, &header, sizeof header);
    const auto nonce = FrameNonce(i);
    if (!gcm.Seal(nonce.data(), {f, kHeader}, src + i * kFrame, f + kHeader, len, f + kHeader + len)
             .ok())
      Fail("sealing failed");
  }
}

double SealOn(int threads, const BulkKey& key, const uint8_t* src, size_t n, uint8_t* wire) {
  const double t0 = Now();
  if (threads == 1) {
    FrameSealer sealer(key);  // the jobs' own sealer
    for (size_t i = 0; i * kFrame < n; ++i) {
      const size_t len = FrameLength(n, i);
      if (!sealer.Seal(kSealedData, {src + i * kFrame, len}, wire + i * kWire).ok())
        Fail("sealing failed");
    }
    return Now() - t0;
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(SealSome, std::cref(key), src, n, wire, static_cast<size_t>(t),
                      static_cast<size_t>(threads));
  for (auto& th : pool) th.join();
  return Now() - t0;
}

// Opens the frames in order with the jobs' opener (into the wire buffer, in place).
double OpenAll(const BulkKey& key, uint8_t* wire, size_t n) {
  FrameOpener opener(key);
  const double t0 = Now();
  for (size_t i = 0; i * kFrame < n; ++i) {
    uint8_t* f = wire + i * kWire;
    if (!opener.Open(f, f + kHeader, f + kHeader + FrameLength(n, i)).ok())
      Fail("a frame did not open");
  }
  return Now() - t0;
}

// A chunk's tag by one of the candidates; GMAC with the tagger the jobs use,
// keyed once per pass as theirs is.
using TagFn = void (*)(ChunkTagger& gmac, const BulkKey& key, size_t index, const uint8_t* p,
                       size_t n, uint8_t* out);

void Gmac(ChunkTagger& gmac, const BulkKey&, size_t index, const uint8_t* p, size_t n,
          uint8_t* out) {
  auto tag = gmac.Of({0, index}, {p, n});
  if (!tag.ok()) Fail("GMAC failed");
  std::memcpy(out, tag->data(), tag->size());
}

void HmacSha256(ChunkTagger&, const BulkKey& key, size_t, const uint8_t* p, size_t n,
                uint8_t* out) {
  unsigned int len = 0;
  uint8_t md[EVP_MAX_MD_SIZE];
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), p, n, md, &len))
    Fail("HMAC failed");
  std::memcpy(out, md, 16);  // truncated to the tag's 128 bits
}

void Blake2b(ChunkTagger&, const BulkKey&, size_t, const uint8_t* p, size_t n, uint8_t* out) {
  // The unkeyed hash: keyed BLAKE2b hashes one block more, the same speed.
  uint8_t md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(p, n, md, &len, EVP_blake2b512(), nullptr) != 1) Fail("BLAKE2b failed");
  std::memcpy(out, md, 16);
}

double TagAll(TagFn fn, const BulkKey& key, const uint8_t* src, size_t n,
              std::vector<ChunkTag>* tags) {
  tags->assign((n + kChunk - 1) / kChunk, ChunkTag{});
  const double t0 = Now();
  ChunkTagger gmac(key);
  for (size_t i = 0; i * kChunk < n; ++i)
    fn(gmac, key, i, src + i * kChunk, std::min(kChunk, n - i * kChunk), (*tags)[i].data());
  return Now() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  // --threads N is ours; the rest are the shared speed options.
  int threads = 2;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::max(2, std::atoi(argv[++i]));
      continue;
    }
    args.push_back(argv[i]);
  }
  gandiva::bench::SpeedOptions opt;
  if (!gandiva::bench::ParseSpeedOptions(static_cast<int>(args.size()), args.data(), "cipher_speed",
                                         &opt))
    return 2;
  const size_t n = opt.mib << 20, frames = (n + kFrame - 1) / kFrame;
  uint8_t* src = MapAnonymous(n);
  uint8_t* dst = MapAnonymous(n);
  uint8_t* wire = MapAnonymous(frames * kWire);
  FillIncompressible(src, n);
  auto key = NewBulkKey();
  if (!key.ok()) Fail("no key");

  const std::string many = std::to_string(threads) + "_threads";
  std::vector<SpeedRow> rows = {{"memcpy", {}},
                                {"seal_aes256gcm_openssl", {}},
                                {"open_aes256gcm_openssl", {}},
                                {"seal_aes256gcm_openssl_" + many, {}},
                                {"open_after_" + many, {}},
                                {"tag_gmac_openssl", {}},
                                {"tag_hmac_sha256", {}},
                                {"tag_blake2b512", {}}};
  const TagFn tag_fns[3] = {Gmac, HmacSha256, Blake2b};
  std::vector<ChunkTag> tags[3], first[3];

  for (int r = 0; r < opt.repeat; ++r) {
    const double t0 = Now();
    std::memcpy(dst, src, n);
    rows[0].ms.push_back((Now() - t0) * 1e3);
    rows[1].ms.push_back(SealOn(1, *key, src, n, wire) * 1e3);
    rows[2].ms.push_back(OpenAll(*key, wire, n) * 1e3);
    rows[3].ms.push_back(SealOn(threads, *key, src, n, wire) * 1e3);
    rows[4].ms.push_back(OpenAll(*key, wire, n) * 1e3);
    for (int k = 0; k < 3; ++k) {
      rows[5 + k].ms.push_back(TagAll(tag_fns[k], *key, src, n, &tags[k]) * 1e3);
      if (r == 0) first[k] = tags[k];
      if (tags[k] != first[k]) Fail("a tag changed between passes");
    }
  }
  if (std::memcmp(dst, src, n) != 0) Fail("memcpy");

  std::vector<const SpeedRow*> printed;
  for (const SpeedRow& row : rows) printed.push_back(&row);
  if (opt.json) {
    PrintSpeedJson("\"mib\": " + std::to_string(opt.mib) + ", \"frame_bytes\": " +
                       std::to_string(kFrame) + ", \"chunk_bytes\": " + std::to_string(kChunk) +
                       ", \"threads\": " + std::to_string(threads),
                   printed);
  } else {
    PrintSpeedTable(std::to_string(opt.mib) + " MiB: frames of " + std::to_string(kFrame >> 10) +
                        " KiB, tags of " + std::to_string(kChunk >> 10) +
                        " KiB chunks, median of " + std::to_string(opt.repeat),
                    n, printed);
  }
  return 0;
}
