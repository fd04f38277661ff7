// Control blocks as shared mappings of a file: in /dev/shm for a shared-memory
// name (what shm_open(3) does on Linux), or at the path given (a container's job,
// shared_control_block.h).
#include "gandiva/contract/shared_control_block.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "shrink_guard.h"

namespace gandiva::runtime {

namespace {

std::string BlockErrno(int err) { return std::strerror(err); }

}  // namespace

struct SharedControlBlock::Mapping {
  void* addr = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (addr != MAP_FAILED) munmap(addr, size);
  }
};

bool SharedControlBlock::IsFileName(const std::string& name) {
  return name.size() > 1 && name[0] == '/' && name.find('/', 1) != std::string::npos;
}

std::string SharedControlBlock::PathOf(const std::string& name) {
  if (IsFileName(name)) return name;
  return "/dev/shm" + (name.empty() || name[0] != '/' ? "/" + name : name);
}

SharedControlBlock::SharedControlBlock(std::string name, std::unique_ptr<Mapping> mapping)
    : name_(std::move(name)), mapping_(std::move(mapping)) {
  cb_ = static_cast<ControlBlock*>(mapping_->addr);
  guard_slot_ = shrink_guard::Register(mapping_->addr, mapping_->size);
}

SharedControlBlock::~SharedControlBlock() { shrink_guard::Unregister(guard_slot_); }

Status SharedControlBlock::GuardAgainstShrinking() { return shrink_guard::Install(); }

bool SharedControlBlock::cut_short() const { return shrink_guard::WasCut(guard_slot_); }

StatusOr<std::unique_ptr<SharedControlBlock>> SharedControlBlock::Create(const std::string& name,
                                                                         uint64_t job_id,
                                                                         uint64_t lease_ns,
                                                                         const std::string& node,
                                                                         int64_t owner_uid) {
  const std::string path = PathOf(name);
  unlink(path.c_str());
  // Never through a link, never a file that was there: the name is ours alone.
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("cannot create control block " + name + ": " + BlockErrno(errno));
  auto fail = [&](Status s) {
    close(fd);
    unlink(path.c_str());
    return s;
  };
  if (fchmod(fd, 0600) != 0)  // whatever the umask took away or left
    return fail(
        Internal("cannot make control block " + name + " owner-only: " + BlockErrno(errno)));
  if (owner_uid >= 0 && static_cast<uid_t>(owner_uid) != geteuid() &&
      fchown(fd, static_cast<uid_t>(owner_uid), -1) != 0) {
    const int err = errno;
    return fail(PermissionDenied("cannot give control block " + name + " to uid " +
                                 std::to_string(owner_uid) + ": " + BlockErrno(err) +
                                 (geteuid() != 0 ? " (only a controller running as root can run "
                                                   "jobs of other users)"
                                                 : "")));
  }
  if (ftruncate(fd, sizeof(ControlBlock)) != 0)
    return fail(Internal("cannot size control block " + name + ": " + BlockErrno(errno)));
  auto m = std::make_unique<Mapping>();
  m->size = sizeof(ControlBlock);
  m->addr = mmap(nullptr, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m->addr == MAP_FAILED)
    return fail(Internal("cannot map control block " + name + ": " + BlockErrno(errno)));
  close(fd);
  auto block = std::unique_ptr<SharedControlBlock>(new SharedControlBlock(name, std::move(m)));
  InitControlBlock(block->get(), job_id, lease_ns, node.c_str());
  return block;
}

StatusOr<std::unique_ptr<SharedControlBlock>> SharedControlBlock::Open(const std::string& name) {
  const std::string path = PathOf(name);
  const int fd = open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return NotFound("cannot open control block " + name + ": " + BlockErrno(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return DataLoss("control block " + name + " is not a regular file");
  }
  if (st.st_size < static_cast<off_t>(sizeof(ControlBlock))) {
    close(fd);
    return DataLoss("control block " + name + " is too small");
  }
  auto m = std::make_unique<Mapping>();
  m->size = sizeof(ControlBlock);
  m->addr = mmap(nullptr, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (m->addr == MAP_FAILED)
    return NotFound("cannot map control block " + name + ": " + BlockErrno(err));
  auto block = std::unique_ptr<SharedControlBlock>(new SharedControlBlock(name, std::move(m)));
  if (block->get()->magic != kControlBlockMagic)
    return DataLoss("control block " + name + " has a bad magic number");
  if (block->get()->version != kControlBlockVersion)
    return FailedPrecondition("control block " + name + " has version " +
                              std::to_string(block->get()->version) + ", this library speaks " +
                              std::to_string(kControlBlockVersion));
  return block;
}

void SharedControlBlock::Remove(const std::string& name) { unlink(PathOf(name).c_str()); }

}  // namespace gandiva::runtime
