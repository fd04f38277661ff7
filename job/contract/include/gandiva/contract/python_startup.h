// gandiva's Python start-up hook (python/gandiva/_startup/sitecustomize.py): a
// folder that every job gandiva starts gets first on its PYTHONPATH, so that an
// unmodified PyTorch script marks an iteration boundary at each optimizer step
// (docs/python.md, "Unmodified PyTorch scripts"). Whoever builds a job's
// environment (`gandiva run`, gandivad's launch, the Slurm plugin) calls
// AddStartupHook; the hook itself does nothing outside a gandiva job.
#ifndef GANDIVA_CONTRACT_PYTHON_STARTUP_H_
#define GANDIVA_CONTRACT_PYTHON_STARTUP_H_

#include <map>
#include <string>

namespace gandiva::runtime {

// "0" (or off, false, no) in the job's environment: no hook, PYTHONPATH left as it is.
inline constexpr const char* kEnvAutoTorch = "GANDIVA_AUTO_TORCH";
inline constexpr const char* kEnvPythonPath = "PYTHONPATH";

// The hook's folder: the build tree's when it exists, else the installed one,
// found from `anchor` (a binary or library of the same installation, in
// <prefix>/bin or <prefix>/lib[/...]) as <prefix>/<site-packages>/gandiva/_startup.
// "" when neither holds the hook.
std::string FindStartupHookDir(const std::string& anchor);
// The same, anchored at this process's executable (/proc/self/exe).
std::string FindStartupHookDirFromExecutable();
// The hook's folder in a `gandiva` package on `pythonpath` (the first entry holding
// gandiva/_startup/sitecustomize.py), for a package that is not where the binaries'
// prefix says: an unpacked bundle, a virtual environment. For a caller running as the
// job's user only (`gandiva run`): it looks into folders the user names.
std::string FindStartupHookDirOnPath(const std::string& pythonpath);

// Whether `value` of GANDIVA_AUTO_TORCH turns the hook off.
bool AutoTorchOff(const std::string& value);

// `pythonpath` with `hook_dir` first: unchanged when hook_dir is empty or in it already.
std::string PythonPathWithHook(const std::string& pythonpath, const std::string& hook_dir);

// Puts the hook first on env's PYTHONPATH, unless env turns it off
// (GANDIVA_AUTO_TORCH=0) or hook_dir is empty. Idempotent.
void AddStartupHook(std::map<std::string, std::string>& env, const std::string& hook_dir);

}  // namespace gandiva::runtime

#endif  // GANDIVA_CONTRACT_PYTHON_STARTUP_H_
