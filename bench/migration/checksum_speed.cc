// checksum_speed: the CRC32C every checkpoint chunk carries, per GiB, by each
// implementation in this build, against a memcpy of the same bytes, all in one
// process on the same faulted-in memory: folding with VPCLMULQDQ (what
// Crc32c() uses where the CPU has it), three interleaved crc32 instruction
// streams (SSE4.2), and the slicing-by-8 table. Each pass checksums 4 MiB
// chunks, as the writer and reader do. Prints a table; --json prints one
// object.
//
// Usage: checksum_speed [--mib N] [--repeat N] [--json]
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "crc32c.h"
#include "crc32c_fold.h"

namespace {

using gandiva::checkpoint::Crc32cCanFold;
using gandiva::checkpoint::Crc32cFold;
using gandiva::checkpoint::Crc32cIsHardware;
using gandiva::checkpoint::Crc32cPortable;
using gandiva::checkpoint::Crc32cSse42;

constexpr size_t kChunk = 4u << 20;

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

struct Row {
  std::string name;
  std::vector<double> ms;
  uint32_t crc = 0;  // of the last pass: every implementation must agree
  double Median() const {
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
};

template <typename Fn>
Row Measure(const char* name, const uint8_t* p, size_t n, int repeat, Fn&& crc_of) {
  Row row{name, {}, 0};
  for (int r = 0; r < repeat; ++r) {
    uint32_t crc = 0;
    const double t0 = Now();
    for (size_t off = 0; off < n; off += kChunk) crc ^= crc_of(p + off, std::min(kChunk, n - off));
    row.ms.push_back((Now() - t0) * 1e3);
    row.crc = crc;
  }
  return row;
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
      std::fprintf(stderr, "usage: checksum_speed [--mib N] [--repeat N] [--json]\n");
      return 2;
    }
  }
  if (mib == 0 || repeat <= 0) return 2;
  const size_t n = mib << 20;
  uint8_t* src = Map(n);
  uint8_t* dst = Map(n);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(src + i, &x, 8);
  }

  std::vector<Row> rows;
  rows.push_back(Measure("memcpy", src, n, repeat, [&](const uint8_t* p, size_t len) {
    std::memcpy(dst + (p - src), p, len);
    return 0u;
  }));
  if (Crc32cCanFold())
    rows.push_back(Measure("fold_vpclmulqdq", src, n, repeat,
                           [](const uint8_t* p, size_t len) { return Crc32cFold(p, len, 0); }));
  if (Crc32cIsHardware())
    rows.push_back(Measure("crc32_sse42", src, n, repeat,
                           [](const uint8_t* p, size_t len) { return Crc32cSse42(p, len, 0); }));
  rows.push_back(Measure("portable_table", src, n, std::min(repeat, 2),
                         [](const uint8_t* p, size_t len) { return Crc32cPortable(p, len, 0); }));
  for (size_t i = 2; i < rows.size(); ++i)
    if (rows[i].crc != rows[1].crc) {
      std::fprintf(stderr, "checksum_speed: %s disagrees with %s\n", rows[i].name.c_str(),
                   rows[1].name.c_str());
      return 1;
    }

  if (json) {
    std::printf("{\"mib\": %zu, \"chunk_bytes\": %zu, \"paths\": {", mib, kChunk);
    for (size_t i = 0; i < rows.size(); ++i)
      std::printf("%s\"%s\": {\"median_ms\": %.2f, \"best_ms\": %.2f}", i ? ", " : "",
                  rows[i].name.c_str(), rows[i].Median(),
                  *std::min_element(rows[i].ms.begin(), rows[i].ms.end()));
    std::printf("}}\n");
    return 0;
  }
  std::printf("%zu MiB in %zu KiB chunks, median of %d (the table: of %d)\n", mib, kChunk >> 10,
              repeat, std::min(repeat, 2));
  std::printf("%-16s %10s %10s %8s %12s\n", "path", "best ms", "median ms", "GB/s", "x memcpy");
  const double memcpy_ms = rows[0].Median();
  for (const Row& r : rows) {
    const double med = r.Median();
    std::printf("%-16s %10.1f %10.1f %8.2f %12.2f\n", r.name.c_str(),
                *std::min_element(r.ms.begin(), r.ms.end()), med, n / (med * 1e6), med / memcpy_ms);
  }
  return 0;
}
