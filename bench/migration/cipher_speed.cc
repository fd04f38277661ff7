// cipher_speed: the bulk channel's AES-256-GCM per GiB, by each implementation
// in this build, against a memcpy of the same bytes, all in one process on the
// same faulted-in memory: sealing and opening 512 KiB frames (as the jobs do,
// in place) and GMAC tags of 4 MiB chunks (as a warm copy's pre-copy does),
// each with the VAES code (where the CPU has it) and with OpenSSL's. Opening
// checks every frame's tag, so a disagreement between the two fails the run.
// Prints a table; --json prints one object.
//
// Usage: cipher_speed [--mib N] [--repeat N] [--json]
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gandiva/contract/chunk_tag.h"
#include "gandiva/contract/sealed_frames.h"

namespace {

using namespace gandiva::sealed;

constexpr size_t kFrame = 512u << 10;  // the jobs' frame payload
constexpr size_t kChunk = 4u << 20;    // a checkpoint chunk
constexpr size_t kWire = kSealedHeaderBytes + kFrame + kSealedTagBytes;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint8_t* Map(size_t n) {
  void* p =
      mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  return static_cast<uint8_t*>(p);
}

void Fail(const char* what) {
  std::fprintf(stderr, "cipher_speed: %s\n", what);
  std::exit(1);
}

struct Row {
  std::string name;
  std::vector<double> ms;
  double Median() const {
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
  double Best() const { return *std::min_element(ms.begin(), ms.end()); }
};

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
  size_t mib = 1024;
  int repeat = 5;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--mib" && i + 1 < argc) {
      mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: cipher_speed [--mib N] [--repeat N] [--json]\n");
      return 2;
    }
  }
  if (mib == 0 || repeat <= 0) return 2;
  // The VAES code serves kFastest only where GANDIVA_BULK_CIPHER allows it.
  unsetenv(kEnvBulkCipher);
  const size_t n = mib << 20, frames = (n + kFrame - 1) / kFrame;
  uint8_t* src = Map(n);
  uint8_t* dst = Map(n);
  uint8_t* wire = Map(frames * kWire);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(src + i, &x, 8);
  }
  auto key = NewBulkKey();
  if (!key.ok()) Fail("no key");

  Row copy{"memcpy", {}};
  Row seal[2] = {{"seal_fastest", {}}, {"seal_openssl", {}}};
  Row open[2] = {{"open_fastest", {}}, {"open_openssl", {}}};
  Row tag[2] = {{"gmac_fastest", {}}, {"gmac_openssl", {}}};
  const SealedCipher ciphers[2] = {SealedCipher::kFastest, SealedCipher::kOpenSsl};
  std::vector<ChunkTag> tags[2];
  for (int r = 0; r < repeat; ++r) {
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

  std::vector<const Row*> rows = {&copy, &seal[0], &seal[1], &open[0], &open[1], &tag[0], &tag[1]};
  if (json) {
    std::printf("{\"mib\": %zu, \"frame_bytes\": %zu, \"chunk_bytes\": %zu, \"paths\": {", mib,
                kFrame, kChunk);
    for (size_t i = 0; i < rows.size(); ++i)
      std::printf("%s\"%s\": {\"median_ms\": %.2f, \"best_ms\": %.2f}", i ? ", " : "",
                  rows[i]->name.c_str(), rows[i]->Median(), rows[i]->Best());
    std::printf("}}\n");
    return 0;
  }
  std::printf("%zu MiB: frames of %zu KiB, tags of %zu KiB chunks, median of %d\n", mib,
              kFrame >> 10, kChunk >> 10, repeat);
  std::printf("%-14s %10s %10s %8s %10s\n", "path", "best ms", "median ms", "GB/s", "x memcpy");
  for (const Row* r : rows)
    std::printf("%-14s %10.1f %10.1f %8.2f %10.2f\n", r->name.c_str(), r->Best(), r->Median(),
                n / (r->Median() * 1e6), r->Median() / copy.Median());
  return 0;
}
