// What the in-process speed benches (checksum_speed, cipher_speed) share: the
// command line (--mib N --repeat N --json), anonymous memory filled with bytes
// that do not compress, and a row of timings with its median, printed as a
// table against memcpy or as one JSON object. transfer_floor takes its clock
// and its memory from here too.
#ifndef GANDIVA_BENCH_MIGRATION_SPEED_TABLE_H_
#define GANDIVA_BENCH_MIGRATION_SPEED_TABLE_H_

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace gandiva::bench {

struct SpeedOptions {
  size_t mib = 1024;
  int repeat = 5;
  bool json = false;
};

// False (after printing the usage) on a wrong flag.
inline bool ParseSpeedOptions(int argc, char** argv, const char* program, SpeedOptions* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      o->json = true;
    } else if (a == "--mib" && i + 1 < argc) {
      o->mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--repeat" && i + 1 < argc) {
      o->repeat = std::atoi(argv[++i]);
    } else {
      o->mib = 0;
    }
  }
  if (o->mib > 0 && o->repeat > 0) return true;
  std::fprintf(stderr, "usage: %s [--mib N] [--repeat N] [--json]\n", program);
  return false;
}

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// n bytes of anonymous memory, faulted in unless a bench times the first touch
// (fault_in false: page faults included, as in memory a process just got).
inline uint8_t* MapAnonymous(size_t n, bool fault_in = true) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | (fault_in ? MAP_POPULATE : 0), -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  return static_cast<uint8_t*>(p);
}

// xorshift64: no two words alike, nothing a page could be deduplicated by.
inline void FillIncompressible(uint8_t* p, size_t n) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
}

struct SpeedRow {
  std::string name;
  std::vector<double> ms;
  double Median() const {
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
  double Best() const { return *std::min_element(ms.begin(), ms.end()); }
};

// `title` first; rows[0] is the memcpy the others are compared with.
inline void PrintSpeedTable(const std::string& title, size_t bytes,
                            const std::vector<const SpeedRow*>& rows) {
  std::printf("%s\n", title.c_str());
  std::printf("%-16s %10s %10s %8s %10s\n", "path", "best ms", "median ms", "GB/s", "x memcpy");
  for (const SpeedRow* r : rows)
    std::printf("%-16s %10.1f %10.1f %8.2f %10.2f\n", r->name.c_str(), r->Best(), r->Median(),
                bytes / (r->Median() * 1e6), r->Median() / rows[0]->Median());
}

// {<head>, "paths": {"<name>": {"median_ms": .., "best_ms": ..}, ...}}
inline void PrintSpeedJson(const std::string& head, const std::vector<const SpeedRow*>& rows) {
  std::printf("{%s, \"paths\": {", head.c_str());
  for (size_t i = 0; i < rows.size(); ++i)
    std::printf("%s\"%s\": {\"median_ms\": %.2f, \"best_ms\": %.2f}", i ? ", " : "",
                rows[i]->name.c_str(), rows[i]->Median(), rows[i]->Best());
  std::printf("}}\n");
}

}  // namespace gandiva::bench

#endif  // GANDIVA_BENCH_MIGRATION_SPEED_TABLE_H_
