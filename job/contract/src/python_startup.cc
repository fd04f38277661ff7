// Where gandiva's Python start-up hook lies, and a job's PYTHONPATH with it; see python_startup.h.
#include "gandiva/contract/python_startup.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

namespace gandiva::runtime {

namespace {

namespace fs = std::filesystem;

constexpr const char* kHookFile = "sitecustomize.py";

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
  size_t start = 0;
  while (start < pythonpath.size()) {
    const size_t end = std::min(pythonpath.find(':', start), pythonpath.size());
    const std::string entry = pythonpath.substr(start, end - start);
    if (!entry.empty()) {
      const fs::path dir = fs::path(entry) / "gandiva" / "_startup";
      if (HoldsHook(dir)) return dir.string();
    }
    start = end + 1;
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
  size_t start = 0;
  while (start <= pythonpath.size()) {
    const size_t end = std::min(pythonpath.find(':', start), pythonpath.size());
    if (pythonpath.compare(start, end - start, hook_dir) == 0 && end - start == hook_dir.size())
      return pythonpath;
    start = end + 1;
  }
  return pythonpath.empty() ? hook_dir : hook_dir + ":" + pythonpath;
}

void AddStartupHook(std::map<std::string, std::string>& env, const std::string& hook_dir) {
  if (hook_dir.empty()) return;
  if (auto sw = env.find(kEnvAutoTorch); sw != env.end() && AutoTorchOff(sw->second)) return;
  std::string& path = env[kEnvPythonPath];
  path = PythonPathWithHook(path, hook_dir);
}

}  // namespace gandiva::runtime
