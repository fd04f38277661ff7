// The "cuda.device_memory" checkpoint section: save and load of every tracked
// device allocation. Layout (little-endian, section version 1):
//   header   magic "GDCUDAM1", u32 version, u32 allocations, u64 data bytes
//   table    per allocation in allocation order: u64 ordinal, u64 size,
//            u64 address in the saving process, u32 kind, i32 device
//   data     the allocations' bytes, in table order, back to back
// The table comes first so that a load checks everything before copying anything.
#include "memory/device_checkpoint.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gandiva/common/log.h"
#include "interpose/driver.h"
#include "memory/memory_tracker.h"
#include "memory/scoped_context.h"

namespace gandiva::shim {
namespace {

constexpr char kMagic[8] = {'G', 'D', 'C', 'U', 'D', 'A', 'M', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kChunk = 8u << 20;  // bytes per driver copy (bounded staging)

struct SectionHeader {
  char magic[8];
  uint32_t version;
  uint32_t allocations;
  uint64_t data_bytes;
};
static_assert(sizeof(SectionHeader) == 24);

struct SavedAllocation {
  uint64_t ordinal;
  uint64_t size;
  uint64_t address;
  uint32_t kind;
  int32_t device;
};
static_assert(sizeof(SavedAllocation) == 32);

// cuMemAlloc is VMM-backed or not depending on size, knobs and room on the device:
// both are "cuMemAlloc" for matching. Other kinds must match exactly.
int KindFamily(uint32_t kind) {
  return kind == static_cast<uint32_t>(AllocKind::kVmm) ? static_cast<int>(AllocKind::kPlain)
                                                        : static_cast<int>(kind);
}

const char* KindName(uint32_t kind) {
  return kind <= static_cast<uint32_t>(AllocKind::kAsync)
             ? AllocKindName(static_cast<AllocKind>(kind))
             : "?";
}

// The live allocations in allocation order.
std::vector<Allocation*> InOrder(std::map<CUdeviceptr, Allocation>& table) {
  std::vector<Allocation*> out;
  out.reserve(table.size());
  for (auto& [ptr, a] : table) out.push_back(&a);
  std::sort(out.begin(), out.end(),
            [](const Allocation* x, const Allocation* y) { return x->seq < y->seq; });
  return out;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Describe(const std::vector<SavedAllocation>& saved) {
  std::string s;
  for (size_t i = 0; i < saved.size() && i < 8; ++i)
    s += (i ? ", " : "") + std::to_string(saved[i].size) + " (" + KindName(saved[i].kind) + ")";
  if (saved.size() > 8) s += ", ...";
  return s.empty() ? "none" : s;
}

// Host staging for device->host copies: pinned if the driver allows, else pageable.
class CheckpointStaging {
 public:
  explicit CheckpointStaging(size_t size) {
    if (Extras().cuMemHostAlloc && Extras().cuMemHostAlloc(&p_, size, 0) == CUDA_SUCCESS) {
      pinned_ = true;
    } else {
      p_ = std::malloc(size);
    }
  }
  ~CheckpointStaging() {
    if (pinned_) {
      Extras().cuMemFreeHost(p_);
    } else {
      std::free(p_);
    }
  }
  char* get() const { return static_cast<char*>(p_); }

 private:
  void* p_ = nullptr;
  bool pinned_ = false;
};

Status SyncAll(const std::map<CUdeviceptr, Allocation>& table) {
  std::set<CUcontext> contexts;
  for (const auto& [ptr, a] : table) contexts.insert(a.ctx);
  for (CUcontext ctx : contexts) {
    ScopedContext scope(ctx);
    const CUresult r = Real<HookId::cuCtxSynchronize>::Get()();
    if (r != CUDA_SUCCESS)
      return Internal("cuCtxSynchronize failed around the device copy: CUresult " +
                      std::to_string(r));
  }
  return Status::Ok();
}

Status SaveTable(std::map<CUdeviceptr, Allocation>& table, checkpoint::SectionWriter& w) {
  GD_RETURN_IF_ERROR(SyncAll(table));
  const std::vector<Allocation*> order = InOrder(table);
  SectionHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.allocations = static_cast<uint32_t>(order.size());
  std::vector<SavedAllocation> saved;
  for (size_t i = 0; i < order.size(); ++i) {
    const Allocation& a = *order[i];
    saved.push_back({i, a.size, a.ptr, static_cast<uint32_t>(a.kind), a.device});
    h.data_bytes += a.size;
  }
  GD_RETURN_IF_ERROR(w.Write(&h, sizeof(h)));
  if (!saved.empty())
    GD_RETURN_IF_ERROR(w.Write(saved.data(), saved.size() * sizeof(SavedAllocation)));
  if (h.data_bytes == 0) return Status::Ok();
  CheckpointStaging staging(kChunk);
  if (!staging.get()) return ResourceExhausted("no host memory for an 8 MiB staging buffer");
  auto dtoh = Real<HookId::cuMemcpyDtoH_v2>::Get();
  for (size_t i = 0; i < order.size(); ++i) {
    const Allocation& a = *order[i];
    if (a.swapped) {  // swapped out: the bytes are in host memory already
      GD_RETURN_IF_ERROR(w.Write(a.host, a.size));
      continue;
    }
    ScopedContext scope(a.ctx);
    for (size_t off = 0; off < a.size; off += kChunk) {
      const size_t n = std::min(kChunk, a.size - off);
      const CUresult r = dtoh(staging.get(), a.ptr + off, n);
      if (r != CUDA_SUCCESS)
        return Internal("copying allocation " + std::to_string(i) + " (" + Hex(a.ptr) + ", " +
                        std::to_string(a.size) + " bytes) to the host failed: CUresult " +
                        std::to_string(r));
      GD_RETURN_IF_ERROR(w.Write(staging.get(), n));
    }
  }
  return Status::Ok();
}

// Checks the saved table against the live allocations; nothing is copied yet.
Status Match(const SectionHeader& h, const std::vector<SavedAllocation>& saved,
             const std::vector<Allocation*>& live, uint64_t section_bytes) {
  uint64_t data = 0;
  for (size_t i = 0; i < saved.size(); ++i) {
    if (saved[i].ordinal != i)
      return DataLoss("allocation table entry " + std::to_string(i) + " has ordinal " +
                      std::to_string(saved[i].ordinal));
    data += saved[i].size;
  }
  const uint64_t expected = sizeof(SectionHeader) + saved.size() * sizeof(SavedAllocation) + data;
  if (data != h.data_bytes || section_bytes != expected)
    return DataLoss("section is " + std::to_string(section_bytes) +
                    " bytes but its table describes " + std::to_string(expected));
  if (saved.size() != live.size()) {
    std::vector<SavedAllocation> now;
    for (size_t i = 0; i < live.size(); ++i)
      now.push_back(
          {i, live[i]->size, live[i]->ptr, static_cast<uint32_t>(live[i]->kind), live[i]->device});
    return FailedPrecondition("the checkpoint holds " + std::to_string(saved.size()) +
                              " device allocations [" + Describe(saved) +
                              "] but this process has " + std::to_string(live.size()) + " [" +
                              Describe(now) +
                              "]; the program must make the same allocations, in the same order, "
                              "before its first iteration boundary");
  }
  for (size_t i = 0; i < saved.size(); ++i) {
    const Allocation& a = *live[i];
    if (saved[i].size != a.size ||
        KindFamily(saved[i].kind) != KindFamily(static_cast<uint32_t>(a.kind)))
      return FailedPrecondition("device allocation " + std::to_string(i) +
                                " differs: the checkpoint has " + std::to_string(saved[i].size) +
                                " bytes (" + KindName(saved[i].kind) + ") but this process has " +
                                std::to_string(a.size) + " bytes (" + AllocKindName(a.kind) +
                                ") at " + Hex(a.ptr));
  }
  return Status::Ok();
}

Status LoadTable(std::map<CUdeviceptr, Allocation>& table, checkpoint::SectionReader& r) {
  const uint64_t section_bytes = r.size();
  SectionHeader h{};
  if (r.Read(&h, sizeof(h)) != sizeof(h) || std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0)
    return DataLoss("not a device memory section (bad header)");
  if (h.version != kVersion)
    return DataLoss("device memory section version " + std::to_string(h.version) +
                    " (this shim reads " + std::to_string(kVersion) + ")");
  if (static_cast<uint64_t>(h.allocations) * sizeof(SavedAllocation) > r.remaining())
    return DataLoss("device memory section too short for " + std::to_string(h.allocations) +
                    " allocations");
  std::vector<SavedAllocation> saved(h.allocations);
  if (!saved.empty()) r.Read(saved.data(), saved.size() * sizeof(SavedAllocation));
  const std::vector<Allocation*> live = InOrder(table);
  GD_RETURN_IF_ERROR(Match(h, saved, live, section_bytes));
  GD_RETURN_IF_ERROR(SyncAll(table));  // nothing of the program's may still write
  auto htod = Real<HookId::cuMemcpyHtoD_v2>::Get();
  int moved = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    Allocation& a = *live[i];
    if (a.ptr != saved[i].address) ++moved;
    ScopedContext scope(a.ctx);
    size_t off = 0;
    while (off < a.size) {
      const std::span<const uint8_t> piece = r.Next(a.size - off);
      if (piece.empty())
        return DataLoss("device memory section ends inside allocation " + std::to_string(i));
      if (a.swapped) {
        std::memcpy(static_cast<char*>(a.host) + off, piece.data(), piece.size());
      } else if (const CUresult rc = htod(a.ptr + off, piece.data(), piece.size());
                 rc != CUDA_SUCCESS) {
        return Internal("copying allocation " + std::to_string(i) + " to the device (" +
                        Hex(a.ptr) + ") failed: CUresult " + std::to_string(rc));
      }
      off += piece.size();
    }
  }
  GD_LOG(kInfo,
         "shim: restored %zu device allocations, %llu bytes (%d at a different address than saved)",
         live.size(), static_cast<unsigned long long>(h.data_bytes), moved);
  return Status::Ok();
}

}  // namespace

Status CheckDeviceMemory() {
  if (const uint64_t physical = MemoryTracker::Get().PhysicalBytes(); physical != 0)
    return FailedPrecondition(
        std::to_string(physical) +
        " bytes of device memory were made with cuMemCreate by the program itself; "
        "the shim cannot checkpoint them. Register the job's state instead "
        "(gandiva.torch.register(model, optimizer) in Python, gd_register_state in C/C++) "
        "and leave raw device memory out of checkpoints with GANDIVA_SHIM_CHECKPOINT=0");
  // A new process restores at its first boundary, with the allocations it has made by
  // then, matched by rank: if the live ones differ from those at this process's first
  // boundary, the checkpoint could never be restored. Say so now, not after writing it.
  const MemoryTracker::Drift d = MemoryTracker::Get().DriftSinceFirstBoundary();
  if (d.made_after == 0 && d.freed_after == 0) return Status::Ok();
  // Short enough for the control block's transfer_error (what `gandiva checkpoint` shows).
  return FailedPrecondition(
      std::to_string(d.made_after) + " of " + std::to_string(d.live) +
      " device allocations made after the first iteration boundary, " +
      std::to_string(d.freed_after) +
      " freed since: not restorable. Register state: "
      "gandiva.torch.register, or gd_register_state + GANDIVA_SHIM_CHECKPOINT=0");
}

Status SaveDeviceMemory(checkpoint::SectionWriter& w) {
  if (!DriverLoaded() || !DriverHandle())
    return FailedPrecondition("the CUDA driver is not loaded");
  GD_RETURN_IF_ERROR(CheckDeviceMemory());  // again: a program may call gd_checkpoint itself
  return MemoryTracker::Get().WithTable(
      [&w](std::map<CUdeviceptr, Allocation>& table) { return SaveTable(table, w); });
}

Status LoadDeviceMemory(checkpoint::SectionReader& r) {
  if (!DriverLoaded() || !DriverHandle())
    return FailedPrecondition("the CUDA driver is not loaded");
  return MemoryTracker::Get().WithTable(
      [&r](std::map<CUdeviceptr, Allocation>& table) { return LoadTable(table, r); });
}

void RegisterDeviceCheckpoint() {
  if (const char* v = std::getenv("GANDIVA_SHIM_CHECKPOINT"); v && std::strcmp(v, "0") == 0) return;
  const Status s = checkpoint::RegisterState(
      kDeviceSectionName, [](checkpoint::SectionWriter& w) { return SaveDeviceMemory(w); },
      [](checkpoint::SectionReader& r) { return LoadDeviceMemory(r); },
      [] { return CheckDeviceMemory(); });
  if (!s.ok())
    GD_LOG(kWarn, "shim: device memory stays out of checkpoints: %s", s.ToString().c_str());
}

}  // namespace gandiva::shim
