// Where gandiva's Python start-up hook lies, and a job's PYTHONPATH with it; see python_startup.h.
#include "gandiva/contract/python_startup.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>
#include <vector>

namespace gandiva::runtime {

namespace {

namespace fs = std::filesystem;

constexpr const char* kHookFile = "sitecustomize.py";

// A PATH-style list's entries, empty ones included ("a::b" has three).
std::vector<std::string> PathEntries(const std::string& list) {
  std::vector<std::string> entries;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(':', start), list.size());
    entries.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return entries;
}

bool HoldsHook(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kHookFile, ec);
}

}  // namespace

std::string FindStartupHookDir(const std::string& anchor) {
#ifdef GANDIVA_BUILD_STARTUP_DIR
  if (HoldsHook(GANDIVA_BUILD_STARTUP_DIR)) return GANDIVA_BUILD_STARTUP_DIR;
#endif
#ifdef GANDIVA_INSTALLED_PY_SITE
  if (anchor.empty()) return "";
  // <prefix>/bin/gandiva, <prefix>/lib/gandiva_spank.so, <prefix>/lib/x86_64-linux-gnu/...:
  // the prefix is one to three folders up.
  fs::path prefix = fs::path(anchor).parent_path();
  for (int up = 0; up < 3 && !prefix.empty(); ++up, prefix = prefix.parent_path()) {
    const fs::path dir = prefix / GANDIVA_INSTALLED_PY_SITE / "gandiva" / "_startup";
    if (HoldsHook(dir)) return dir.string();
    if (prefix == prefix.root_path()) break;
  }
#endif
  return "";
}

std::string FindStartupHookDirFromExecutable() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return FindStartupHookDir(ec ? std::string() : exe.string());
}

std::string FindStartupHookDirOnPath(const std::string& pythonpath) {
  for (const std::string& entry : PathEntries(pythonpath)) {
    if (entry.empty()) continue;
    const fs::path dir = fs::path(entry) / "gandiva" / "_startup";
    if (HoldsHook(dir)) return dir.string();
  }
  return "";
}

bool AutoTorchOff(const std::string& value) {
  std::string v;
  for (char c : value)
    if (!std::isspace(static_cast<unsigned char>(c)))
      v += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "0" || v == "off" || v == "false" || v == "no";
}

std::string PythonPathWithHook(const std::string& pythonpath, const std::string& hook_dir) {
  if (hook_dir.empty()) return pythonpath;
  for (const std::string& entry : PathEntries(pythonpath))
    if (entry == hook_dir) return pythonpath;
  return pythonpath.empty() ? hook_dir : hook_dir + ":" + pythonpath;
}

void AddStartupHook(std::map<std::string, std::string>& env, const std::string& hook_dir) {
  if (hook_dir.empty()) return;
  if (auto sw = env.find(kEnvAutoTorch); sw != env.end() && AutoTorchOff(sw->second)) return;
  std::string& path = env[kEnvPythonPath];
  path = PythonPathWithHook(path, hook_dir);
}

}  // namespace gandiva::runtime
