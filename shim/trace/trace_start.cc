// GANDIVA_SHIM_TRACE=FILE: starts the recorder with the hook table's names, the
// settings that change the shim's decisions and the program's name.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gandiva/common/log.h"
#include "interpose/hook_table.h"
#include "trace/trace_hooks.h"
#include "trace/trace_recorder.h"

namespace gandiva::shim {
namespace {

// argv[0]'s base name and the first argument (a script, for python).
std::string CommandName() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t at = 0; at < all.size() && args.size() < 2;) {
    const size_t end = all.find('\0', at);
    args.push_back(all.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  std::string out;
  for (const std::string& a : args) {
    if (!out.empty()) out += ' ';
    out += a.substr(a.rfind('/') == std::string::npos ? 0 : a.rfind('/') + 1);
  }
  return out;
}

}  // namespace

void StartTraceFromEnv() {
  const char* path = std::getenv("GANDIVA_SHIM_TRACE");
  if (!path || !*path) return;
  trace::Options o;
  // "%p" is the process id: a job whose children use CUDA too (spawned, not forked)
  // then leaves one trace per process instead of each truncating the same file.
  o.path = path;
  for (size_t at = o.path.find("%p"); at != std::string::npos; at = o.path.find("%p", at))
    o.path.replace(at, 2, std::to_string(getpid()));
  if (const char* max = std::getenv("GANDIVA_SHIM_TRACE_MAX_BYTES"); max && *max) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(max, &end, 10);
    if (end && *end == '\0' && v > 0)
      o.max_bytes = v;
    else
      GD_LOG(kWarn, "shim: GANDIVA_SHIM_TRACE_MAX_BYTES=%s is not a byte count; using %llu", max,
             static_cast<unsigned long long>(o.max_bytes));
  }
  int n = 0;
  const HookEntry* hooks = HookEntries(&n);
  std::vector<const char*> names;
  for (int i = 0; i < n; ++i) names.push_back(hooks[i].name);
  o.hook_names = names.data();
  o.hooks = n;
  o.command = CommandName();
  for (const char* knob : {"GANDIVA_SHIM_VMM", "GANDIVA_SHIM_VMM_MIN_BYTES",
                           "GANDIVA_GPU_MEMORY_BYTES", "GANDIVA_SHIM_CHECKPOINT"}) {
    if (const char* v = std::getenv(knob)) o.settings += std::string(knob) + "=" + v + ";";
  }
  if (trace::Start(o))
    GD_LOG(kInfo, "shim: recording driver calls to %s (at most %llu bytes)", o.path.c_str(),
           static_cast<unsigned long long>(o.max_bytes));
}

}  // namespace gandiva::shim
