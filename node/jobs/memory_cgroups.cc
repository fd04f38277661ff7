// cgroup v2 memory limits; see memory_cgroups.h.
#include "jobs/memory_cgroups.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gandiva::controller {

namespace {

// The mount point of the cgroup v2 hierarchy, from /proc/self/mounts; "" if none.
std::string Cgroup2Mount() {
  std::ifstream mounts("/proc/self/mounts");
  std::string device, dir, type, rest;
  while (mounts >> device >> dir >> type && std::getline(mounts, rest))
    if (type == "cgroup2") return dir;
  return "";
}

// gandivad's cgroup in the v2 hierarchy ("0::/path" in /proc/self/cgroup).
std::string OwnCgroupPath() {
  std::ifstream cgroup("/proc/self/cgroup");
  for (std::string line; std::getline(cgroup, line);)
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return "";
}

std::string ReadWord(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  std::string text = s.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

bool HasWord(const std::string& list, const std::string& word) {
  std::istringstream in(list);
  for (std::string w; in >> w;)
    if (w == word) return true;
  return false;
}

// Writes `value` to a cgroup file; the errno's words on failure, "" on success.
std::string WriteCgroupFile(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  f << value << std::flush;
  return f ? "" : std::strerror(errno ? errno : EIO);
}

std::string EnableMemory(const std::string& dir) {
  if (HasWord(ReadWord(dir + "/cgroup.subtree_control"), "memory")) return "";
  return WriteCgroupFile(dir + "/cgroup.subtree_control", "+memory");
}

// cgroup v2 lets a cgroup other than the root hand controllers to its children
// only while no process is in it ("no internal processes"). In a cgroup of its
// own (systemd's Delegate=yes) gandivad moves itself into a leaf, `<own>/gandivad`,
// and enables the memory controller in the emptied cgroup; with other processes
// beside it, it does not move them.
std::string EnableMemoryMovingSelf(const std::string& own) {
  std::string error = EnableMemory(own);
  if (error.empty() || ReadWord(own + "/cgroup.procs") != std::to_string(getpid())) return error;
  const std::string leaf = own + "/gandivad";
  if (mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) return error;
  if (!WriteCgroupFile(leaf + "/cgroup.procs", std::to_string(getpid())).empty()) return error;
  return EnableMemory(own);
}

}  // namespace

MemoryCgroups MemoryCgroups::Probe(const std::string& name) {
  MemoryCgroups m;
  const std::string mount = Cgroup2Mount();
  if (mount.empty()) {
    m.status_ = "not enforced: no cgroup v2 hierarchy is mounted";
    return m;
  }
  const std::string path = OwnCgroupPath();
  const std::string own = path == "/" ? mount : mount + path;
  const std::string controllers = ReadWord(own + "/cgroup.controllers");
  if (!HasWord(controllers, "memory")) {
    m.status_ = "not enforced: the memory controller is not available in gandivad's cgroup " + own +
                " (its controllers: '" + controllers +
                "'; on a cgroup v1 or hybrid system memory stays in v1)";
    return m;
  }
  if (std::string e = EnableMemoryMovingSelf(own); !e.empty()) {
    m.status_ = "not enforced: cannot enable the memory controller below " + own + ": " + e +
                " (run gandivad in a cgroup of its own delegated to it, e.g. systemd "
                "Delegate=yes)";
    return m;
  }
  const std::string parent = own + "/" + name;
  if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
    m.status_ = "not enforced: cannot create " + parent + ": " + std::strerror(errno);
    return m;
  }
  if (std::string e = EnableMemory(parent); !e.empty()) {
    m.status_ = "not enforced: cannot enable the memory controller in " + parent + ": " + e;
    Remove(parent);
    return m;
  }
  m.parent_ = parent;
  m.status_ = "enforced: cgroup v2 memory.max under " + parent;
  return m;
}

StatusOr<std::string> MemoryCgroups::CreateForJob(uint64_t job, uint64_t bytes) const {
  if (!enforced()) return FailedPrecondition("memory limits are " + status_);
  const std::string dir = parent_ + "/job-" + std::to_string(job);
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Internal("cannot create " + dir + ": " + std::strerror(errno));
  if (std::string e = WriteCgroupFile(dir + "/memory.max", std::to_string(bytes)); !e.empty()) {
    Remove(dir);
    return Internal("cannot set " + dir + "/memory.max: " + e);
  }
  return dir;
}

void MemoryCgroups::Remove(const std::string& dir) {
  if (!dir.empty()) rmdir(dir.c_str());
}

}  // namespace gandiva::controller
