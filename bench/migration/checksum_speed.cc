// checksum_speed: the CRC32C every checkpoint chunk carries, per GiB, by each
// implementation in this build, against a memcpy of the same bytes, all in one
// process on the same faulted-in memory: folding with VPCLMULQDQ (what
// Crc32c() uses where the CPU has it), three interleaved crc32 instruction
// streams (SSE4.2), and the slicing-by-8 table. Each pass checksums 4 MiB
// chunks, as the writer and reader do. Prints a table; --json prints one
// object.
//
// Usage: checksum_speed [--mib N] [--repeat N] [--json]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "crc32c.h"
#include "crc32c_fold.h"
#include "speed_table.h"

namespace {

using namespace gandiva::bench;
using gandiva::checkpoint::Crc32cCanFold;
using gandiva::checkpoint::Crc32cFold;
using gandiva::checkpoint::Crc32cIsHardware;
using gandiva::checkpoint::Crc32cPortable;
using gandiva::checkpoint::Crc32cSse42;

constexpr size_t kChunk = 4u << 20;

// A row of timings and the CRC of its last pass: every implementation must agree.
struct Row : SpeedRow {
  uint32_t crc = 0;
};

template <typename Fn>
Row Measure(const char* name, const uint8_t* p, size_t n, int repeat, Fn&& crc_of) {
  Row row;
  row.name = name;
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
  SpeedOptions opt;
  if (!ParseSpeedOptions(argc, argv, "checksum_speed", &opt)) return 2;
  const size_t n = opt.mib << 20;
  const int repeat = opt.repeat;
  uint8_t* src = MapAnonymous(n);
  uint8_t* dst = MapAnonymous(n);
  FillIncompressible(src, n);

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

  std::vector<const SpeedRow*> table;
  for (const Row& r : rows) table.push_back(&r);
  if (opt.json) {
    PrintSpeedJson(
        "\"mib\": " + std::to_string(opt.mib) + ", \"chunk_bytes\": " + std::to_string(kChunk),
        table);
  } else {
    PrintSpeedTable(std::to_string(opt.mib) + " MiB in " + std::to_string(kChunk >> 10) +
                        " KiB chunks, median of " + std::to_string(repeat) + " (the table: of " +
                        std::to_string(std::min(repeat, 2)) + ")",
                    n, table);
  }
  return 0;
}
