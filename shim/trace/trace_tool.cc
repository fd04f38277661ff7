// gandiva-shim-trace: reads a driver-call trace (GANDIVA_SHIM_TRACE).
//   gandiva-shim-trace show FILE [--limit N]   the header, then one line per record
//   gandiva-shim-trace stats FILE              calls and errors per function, boundaries
// Exit: 0, 1 the file is not a readable trace, 2 usage.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "trace/trace_reader.h"

namespace {

using gandiva::shim::trace::Trace;
using gandiva::shim::trace::TraceRecord;
namespace trace = gandiva::shim::trace;

int Usage() {
  std::fprintf(stderr,
               "usage: gandiva-shim-trace show FILE [--limit N]\n"
               "       gandiva-shim-trace stats FILE\n");
  return 2;
}

void PrintHeader(const Trace& t) {
  const auto& h = t.header;
  std::printf("trace v%u of pid %u (%s), %zu records, %zu hooks, %s\n", h.version, h.pid, h.command,
              t.records.size(), t.hook_names.size(),
              t.complete ? "complete" : "not closed (the process died or is running)");
  if (h.settings[0]) std::printf("settings: %s\n", h.settings);
  if (t.complete)
    std::printf("written %" PRIu64 ", dropped %" PRIu64 ", threads %" PRIu64 "%s\n", t.end.arg[0],
                t.end.arg[1], t.end.arg[2],
                (t.end.flags & trace::kFlagTruncated) ? ", TRUNCATED at its size limit" : "");
}

int Stats(const Trace& t) {
  PrintHeader(t);
  struct Count {
    uint64_t calls = 0, errors = 0, ns = 0;
  };
  std::map<std::string, Count> per;
  uint64_t boundaries = 0, marks = 0;
  for (const TraceRecord& r : t.records) {
    if (r.kind == trace::kMark) {
      ++marks;
      continue;
    }
    Count& c = per[t.HookName(r.hook)];
    ++c.calls;
    c.errors += r.result != 0;
    c.ns += r.dur_ns;
    // The detector's count (it also counts the iterations it saw before locking).
    if (trace::IsSyncHook(t.HookName(r.hook))) boundaries = std::max(boundaries, r.arg[3]);
  }
  std::printf("%-36s %10s %8s %12s\n", "function", "calls", "errors", "mean us");
  for (const auto& [name, c] : per)
    std::printf("%-36s %10" PRIu64 " %8" PRIu64 " %12.2f\n", name.c_str(), c.calls, c.errors,
                c.ns / 1e3 / c.calls);
  std::printf("inferred boundaries %" PRIu64 " (a thread's most; decision records %" PRIu64 ")\n",
              boundaries, marks);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage();
  const std::string cmd = argv[1];
  long limit = -1;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--limit") == 0 && i + 1 < argc)
      limit = std::strtol(argv[++i], nullptr, 10);
    else
      return Usage();
  }
  auto read = trace::ReadTrace(argv[2]);
  if (!read.ok()) {
    std::fprintf(stderr, "gandiva-shim-trace: %s\n", read.status().message().c_str());
    return 1;
  }
  const Trace& t = read.value();
  if (cmd == "stats") return Stats(t);
  if (cmd != "show") return Usage();
  PrintHeader(t);
  long shown = 0;
  for (const TraceRecord& r : t.records) {
    if (limit >= 0 && shown++ >= limit) break;
    std::printf("%s\n", trace::FormatRecord(t, r).c_str());
  }
  return 0;
}
