// Shared-memory control blocks with Boost.Interprocess; exceptions stay inside this file.
#include "gandiva/contract/shared_control_block.h"

#include <unistd.h>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstring>

#include "shrink_guard.h"

namespace gandiva::runtime {

namespace bip = boost::interprocess;

struct SharedControlBlock::Mapping {
  bip::shared_memory_object shm;
  bip::mapped_region region;
};

SharedControlBlock::SharedControlBlock(std::string name, std::unique_ptr<Mapping> mapping)
    : name_(std::move(name)), mapping_(std::move(mapping)) {
  cb_ = static_cast<ControlBlock*>(mapping_->region.get_address());
  guard_slot_ = shrink_guard::Register(mapping_->region.get_address(), mapping_->region.get_size());
}

SharedControlBlock::~SharedControlBlock() { shrink_guard::Unregister(guard_slot_); }

Status SharedControlBlock::GuardAgainstShrinking() { return shrink_guard::Install(); }

bool SharedControlBlock::cut_short() const { return shrink_guard::WasCut(guard_slot_); }

StatusOr<std::unique_ptr<SharedControlBlock>> SharedControlBlock::Create(const std::string& name,
                                                                         uint64_t job_id,
                                                                         uint64_t lease_ns,
                                                                         const std::string& node,
                                                                         int64_t owner_uid) {
  try {
    bip::shared_memory_object::remove(name.c_str());
    bip::permissions owner_only(0600);
    auto m = std::make_unique<Mapping>();
    m->shm = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write, owner_only);
    if (owner_uid >= 0 && static_cast<uid_t>(owner_uid) != geteuid() &&
        fchown(m->shm.get_mapping_handle().handle, static_cast<uid_t>(owner_uid), -1) != 0) {
      const int err = errno;
      bip::shared_memory_object::remove(name.c_str());
      return PermissionDenied("cannot give control block " + name + " to uid " +
                              std::to_string(owner_uid) + ": " + std::strerror(err) +
                              (geteuid() != 0 ? " (only a controller running as root can run "
                                                "jobs of other users)"
                                              : ""));
    }
    m->shm.truncate(sizeof(ControlBlock));
    m->region = bip::mapped_region(m->shm, bip::read_write);
    auto block = std::unique_ptr<SharedControlBlock>(new SharedControlBlock(name, std::move(m)));
    InitControlBlock(block->get(), job_id, lease_ns, node.c_str());
    return block;
  } catch (const bip::interprocess_exception& e) {
    return Internal("cannot create control block " + name + ": " + e.what());
  }
}

StatusOr<std::unique_ptr<SharedControlBlock>> SharedControlBlock::Open(const std::string& name) {
  try {
    auto m = std::make_unique<Mapping>();
    m->shm = bip::shared_memory_object(bip::open_only, name.c_str(), bip::read_write);
    bip::offset_t size = 0;
    if (!m->shm.get_size(size) || size < static_cast<bip::offset_t>(sizeof(ControlBlock)))
      return DataLoss("control block " + name + " is too small");
    m->region = bip::mapped_region(m->shm, bip::read_write, 0, sizeof(ControlBlock));
    auto block = std::unique_ptr<SharedControlBlock>(new SharedControlBlock(name, std::move(m)));
    if (block->get()->magic != kControlBlockMagic)
      return DataLoss("control block " + name + " has a bad magic number");
    if (block->get()->version != kControlBlockVersion)
      return FailedPrecondition("control block " + name + " has version " +
                                std::to_string(block->get()->version) + ", this library speaks " +
                                std::to_string(kControlBlockVersion));
    return block;
  } catch (const bip::interprocess_exception& e) {
    return NotFound("cannot open control block " + name + ": " + e.what());
  }
}

void SharedControlBlock::Remove(const std::string& name) {
  try {
    bip::shared_memory_object::remove(name.c_str());
  } catch (...) {
  }
}

}  // namespace gandiva::runtime
