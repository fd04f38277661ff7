// Reading and printing traces; see trace_reader.h.
#include "trace/trace_reader.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace gandiva::shim::trace {
namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

std::string Dim(uint64_t packed) {
  return std::to_string(Dim3At(packed, 0)) + "x" + std::to_string(Dim3At(packed, 1)) + "x" +
         std::to_string(Dim3At(packed, 2));
}

}  // namespace

// Which layout a hook's record has, from its name (the reader does not know policies).
bool IsSyncHook(const std::string& n) {
  return StartsWith(n, "cuCtxSynchronize") || StartsWith(n, "cuStreamSynchronize") ||
         StartsWith(n, "cuEventSynchronize") || n == "cuMemcpyDtoH_v2" ||
         n == "cuMemcpyDtoH_v2_ptds";
}
bool IsTrackedMemoryHook(const std::string& n) {
  return StartsWith(n, "cuMemAlloc") || StartsWith(n, "cuMemFree") || n == "cuMemCreate" ||
         n == "cuMemRelease" || n == "cuMemMap" || n == "cuMemUnmap";
}

const std::string& Trace::HookName(uint16_t hook) const {
  static const std::string unknown = "?";
  return hook < hook_names.size() ? hook_names[hook] : unknown;
}

StatusOr<Trace> ReadTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open the trace " + path);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Trace t;
  if (data.size() < sizeof(TraceHeader))
    return DataLoss(path + ": too short for a trace header (" + std::to_string(data.size()) +
                    " bytes)");
  std::memcpy(&t.header, data.data(), sizeof(TraceHeader));
  const TraceHeader& h = t.header;
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0)
    return InvalidArgument(path + ": not a gandiva shim trace (bad magic)");
  if (h.version != kVersion)
    return InvalidArgument(path + ": trace format version " + std::to_string(h.version) +
                           ", this reader knows " + std::to_string(kVersion));
  if (h.record_bytes != sizeof(TraceRecord))
    return InvalidArgument(path + ": records of " + std::to_string(h.record_bytes) +
                           " bytes, expected " + std::to_string(sizeof(TraceRecord)));
  const uint64_t names_end = sizeof(TraceHeader) + uint64_t{kHookNameBytes} * h.hooks;
  if (h.hooks > kNoHook || names_end > h.header_bytes || h.header_bytes > data.size())
    return DataLoss(path + ": the hook table does not fit the header");
  for (uint32_t i = 0; i < h.hooks; ++i) {
    const char* name = data.data() + sizeof(TraceHeader) + uint64_t{kHookNameBytes} * i;
    t.hook_names.emplace_back(name, strnlen(name, kHookNameBytes));
  }
  const uint64_t body = data.size() - h.header_bytes;
  if (body % sizeof(TraceRecord) != 0)
    return DataLoss(path + ": cut mid-record (" + std::to_string(body % sizeof(TraceRecord)) +
                    " stray bytes)");
  const uint64_t n = body / sizeof(TraceRecord);
  t.records.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    TraceRecord r;
    std::memcpy(&r, data.data() + h.header_bytes + i * sizeof(TraceRecord), sizeof(r));
    if (r.kind == kEnd) {
      if (i + 1 != n) return DataLoss(path + ": records after the end record");
      t.end = r;
      t.complete = true;
      break;
    }
    if (r.kind != kCall && r.kind != kMark)
      return DataLoss(path + ": record " + std::to_string(i) + " of unknown kind " +
                      std::to_string(r.kind));
    if (r.kind == kCall && r.hook >= h.hooks)
      return DataLoss(path + ": record " + std::to_string(i) + " names hook " +
                      std::to_string(r.hook) + " of " + std::to_string(h.hooks));
    t.records.push_back(r);
  }
  // Chunks per thread, each in call order: a stable sort by start time keeps that order.
  std::stable_sort(t.records.begin(), t.records.end(),
                   [](const TraceRecord& a, const TraceRecord& b) { return a.t_ns < b.t_ns; });
  return t;
}

std::string ProcAddressSymbol(const TraceRecord& r) {
  char s[33] = {};
  std::memcpy(s, r.arg, 32);
  return s;
}

std::string FormatRecord(const Trace& t, const TraceRecord& r) {
  char head[96];
  std::snprintf(head, sizeof(head), "%12.6f ms T%-3u ", r.t_ns / 1e6, r.thread);
  std::string out = head;
  if (r.kind == kMark) {
    return out + "  boundary: tracked " + std::to_string(r.arg[0]) + " B, swap-out " +
           std::to_string(r.arg[1]) + " B, checkpoint " + std::to_string(r.arg[2]) + " B, " +
           std::to_string(r.arg[3]) + " allocations, made/freed after the first boundary " +
           std::to_string(r.arg[4] >> 32) + "/" + std::to_string(r.arg[4] & 0xffffffffu);
  }
  const std::string& name = t.HookName(r.hook);
  out += name + (r.result == 0 ? " ok" : " ERROR " + std::to_string(r.result));
  char dur[32];
  std::snprintf(dur, sizeof(dur), " (%.1f us)", r.dur_ns / 1e3);
  out += dur;
  if (StartsWith(name, "cuLaunch") || StartsWith(name, "cuGraphLaunch")) {
    out += " fn=" + Hex(r.arg[0]);
    if (r.arg[1]) out += " grid=" + Dim(r.arg[1]) + " block=" + Dim(r.arg[2]);
    out += " stream=" + Hex(r.arg[3]);
    if (r.arg[4]) out += " shared=" + std::to_string(r.arg[4]);
  } else if (StartsWith(name, "cuGetProcAddress")) {
    out += " \"" + ProcAddressSymbol(r) + "\" version=" + std::to_string(r.aux) +
           " flags=" + std::to_string(r.arg[4]) + ((r.flags & kFlagWrapped) ? " -> shim" : "");
  } else if (IsSyncHook(name)) {
    out += " args=" + Hex(r.arg[0]) + "," + Hex(r.arg[1]) + "," + std::to_string(r.arg[2]) +
           " boundaries=" + std::to_string(r.arg[3]) + " period=" + std::to_string(r.arg[4]);
    if (r.flags & kFlagBoundary) out += (r.flags & kFlagDrove) ? " BOUNDARY (drove)" : " BOUNDARY";
  } else if (IsTrackedMemoryHook(name)) {
    out += " " + Hex(r.arg[0]) + " size=" + std::to_string(r.arg[1]) + " args=" + Hex(r.arg[2]) +
           "," + Hex(r.arg[3]) + " tracked=" + std::to_string(r.arg[4]);
  } else {
    out += " args=" + Hex(r.arg[0]) + "," + Hex(r.arg[1]) + "," + Hex(r.arg[2]) + "," +
           Hex(r.arg[3]) + "," + Hex(r.arg[4]);
  }
  if (r.flags & kFlagServingPark) out += " [serving a park]";
  return out;
}

}  // namespace gandiva::shim::trace
