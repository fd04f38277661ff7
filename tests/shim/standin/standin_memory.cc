// TEST DOUBLE: device memory of the stand-in libcuda.so.1. Plain allocations are
// anonymous mappings; the VMM API is modelled faithfully enough for the shim's swap:
// reservations are PROT_NONE ranges, physical memory is a memfd, mapping places it
// at a fixed address, unmapping returns the range to PROT_NONE (contents gone) and
// the memory is freed once released and unmapped.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "standin.h"

namespace gandiva::standin {
namespace {

constexpr size_t kGranularity = 2ull << 20;

struct Physical {
  int fd = -1;
  size_t size = 0;
  int mappings = 0;
  bool released = false;
};

struct Mapping {
  size_t size;
  Physical* physical;
  size_t offset = 0;     // into the physical memory
  int prot = PROT_NONE;  // cuMemSetAccess's, restored with the mapping after a checkpoint
};

std::map<CUdeviceptr, size_t> g_plain;     // cuMemAlloc / pitch / async
std::map<CUdeviceptr, size_t> g_reserved;  // cuMemAddressReserve
std::map<CUdeviceptr, Mapping> g_mapped;   // cuMemMap
std::map<void*, size_t> g_host;            // cuMemHostAlloc
std::set<Physical*> g_physical;            // cuMemCreate pieces not freed yet
std::set<CUdeviceptr> g_managed;           // cuMemAllocManaged (also in g_plain)

// Device memory moved to host by cuCheckpointProcessCheckpoint (under GlobalMutex).
struct Checkpointed {
  bool active = false;
  std::map<CUdeviceptr, std::vector<char>> plain;   // by address
  std::map<Physical*, std::vector<char>> physical;  // by handle
} g_checkpointed;

size_t DeviceMemory() {
  const char* v = std::getenv("GD_STANDIN_DEVICE_MEM");
  return v ? std::strtoull(v, nullptr, 0) : (8ull << 30);
}

bool Reserve(size_t bytes) {
  auto& used = GetCounters().device_bytes;
  uint64_t cur = used.load();
  do {
    if (cur + bytes > DeviceMemory()) return false;
  } while (!used.compare_exchange_weak(cur, cur + bytes));
  return true;
}

void Unreserve(size_t bytes) { GetCounters().device_bytes.fetch_sub(bytes); }

void MaybeFreePhysical(Physical* p) {
  if (!p->released || p->mappings > 0) return;
  g_physical.erase(p);
  if (p->fd >= 0) {  // a checkpointed piece has given its memory back already
    close(p->fd);
    Unreserve(p->size);
    GetCounters().physical_live.fetch_sub(1);
  }
  delete p;
}

size_t PageRound(size_t n) { return (n + 4095) & ~size_t{4095}; }

bool InRange(const std::map<CUdeviceptr, size_t>& m, CUdeviceptr p, size_t n) {
  auto it = m.upper_bound(p);
  if (it == m.begin()) return false;
  --it;
  return p >= it->first && p + n <= it->first + it->second;
}

}  // namespace

bool HostRangePinned(const void* p, size_t n) {
  std::lock_guard<std::mutex> lock(GlobalMutex());
  auto it = g_host.upper_bound(const_cast<void*>(p));
  if (it == g_host.begin()) return false;
  --it;
  const char* base = static_cast<const char*>(it->first);
  return static_cast<const char*>(p) >= base &&
         static_cast<const char*>(p) + n <= base + it->second;
}

bool DeviceRangeOk(CUdeviceptr ptr, size_t n) {
  std::lock_guard<std::mutex> lock(GlobalMutex());
  if (g_checkpointed.active) return false;  // nothing of it is on the device
  if (InRange(g_plain, ptr, n)) return true;
  // Mapped VMM memory may span several adjacent mappings.
  CUdeviceptr at = ptr;
  const CUdeviceptr end = ptr + n;
  while (at < end) {
    auto it = g_mapped.upper_bound(at);
    if (it == g_mapped.begin()) return false;
    --it;
    if (at >= it->first + it->second.size) return false;
    at = it->first + it->second.size;
  }
  return true;
}

}  // namespace gandiva::standin

using namespace gandiva::standin;

#define GD_STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

// As the driver: the memory of the current context's device, so a context is needed.
GD_STANDIN_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  // Not gated: NVIDIA's driver answers it at once while checkpointed, with this error.
  if (ProcessCheckpointed()) return CUDA_ERROR_OPERATING_SYSTEM;
  if (!CurrentContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
  const size_t t = DeviceMemory(), used = GetCounters().device_bytes.load();
  *free_bytes = used >= t ? 0 : t - used;
  *total = t;
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  ApiGate gate;
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!CurrentContext()) return CUDA_ERROR_INVALID_CONTEXT;  // memory belongs to a context
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  const size_t size = PageRound(bytes);
  if (!Reserve(size)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) {
    Unreserve(size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  std::lock_guard<std::mutex> lock(GlobalMutex());
  *dptr = reinterpret_cast<CUdeviceptr>(p);
  g_plain[*dptr] = size;
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                              size_t height, unsigned int elem) {
  if (!pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
    return CUDA_ERROR_INVALID_VALUE;
  *pitch = (width + 511) & ~size_t{511};
  return cuMemAlloc_v2(dptr, *pitch * height);
}

// Managed memory is modelled as device memory the host can touch (what it is while
// resident on the device); the driver takes exactly one attach flag.
GD_STANDIN_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  const CUresult r = cuMemAlloc_v2(dptr, bytes);
  if (r == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(GlobalMutex());
    g_managed.insert(*dptr);
  }
  return r;
}

GD_STANDIN_EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
  ApiGate gate;
  if (ptr == 0) return CUDA_SUCCESS;
  size_t size;
  {
    std::lock_guard<std::mutex> lock(GlobalMutex());
    auto it = g_plain.find(ptr);
    if (it == g_plain.end()) return CUDA_ERROR_INVALID_VALUE;
    size = it->second;
    g_plain.erase(it);
    g_managed.erase(ptr);
  }
  WaitAllStreams();  // like the real driver, freeing waits for the device
  munmap(reinterpret_cast<void*>(ptr), size);
  Unreserve(size);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream) {
  return cuMemAlloc_v2(dptr, bytes);
}
GD_STANDIN_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream s) {
  return cuMemAllocAsync(dptr, bytes, s);
}
GD_STANDIN_EXPORT CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream) { return cuMemFree_v2(ptr); }
GD_STANDIN_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr ptr, CUstream s) {
  return cuMemFreeAsync(ptr, s);
}

GD_STANDIN_EXPORT CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned int flags) {
  ApiGate gate;
  constexpr unsigned kKnown =
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if (!p || bytes == 0 || (flags & ~kKnown)) return CUDA_ERROR_INVALID_VALUE;
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!CurrentContext()) return CUDA_ERROR_INVALID_CONTEXT;  // pinned memory belongs to a context
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(GlobalMutex());
  g_host[m] = bytes;
  *p = m;
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
  return cuMemHostAlloc(p, bytes, 0);
}

GD_STANDIN_EXPORT CUresult cuMemFreeHost(void* p) {
  ApiGate gate;
  WaitAllStreams();  // as the driver: no copy still in flight reads or writes it
  size_t size;
  {
    std::lock_guard<std::mutex> lock(GlobalMutex());
    auto it = g_host.find(p);
    if (it == g_host.end()) return CUDA_ERROR_INVALID_VALUE;
    size = it->second;
    g_host.erase(it);
  }
  munmap(p, size);
  return CUDA_SUCCESS;
}

// ---- Copies and memsets: host memcpy after checking the device side is mapped.

static CUresult CopyChecked(void* dst, const void* src, size_t n, CUdeviceptr dcheck,
                            CUdeviceptr scheck) {
  ApiGate gate;
  if (const CUresult sticky = StickyError(); sticky != CUDA_SUCCESS) return sticky;
  if (dcheck && !DeviceRangeOk(dcheck, n)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  if (scheck && !DeviceRangeOk(scheck, n)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  std::memcpy(dst, src, n);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  ApiGate gate;
  WaitLegacyStream();
  return CopyChecked(reinterpret_cast<void*>(dst), src, n, dst, 0);
}
GD_STANDIN_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) {
  return cuMemcpyHtoD_v2(dst, src, n);
}

GD_STANDIN_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  ApiGate gate;
  WaitLegacyStream();
  return CopyChecked(dst, reinterpret_cast<const void*>(src), n, 0, src);
}
GD_STANDIN_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) {
  return cuMemcpyDtoH_v2(dst, src, n);
}

GD_STANDIN_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return CopyChecked(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, dst, src);
}
GD_STANDIN_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return cuMemcpyDtoD_v2(dst, src, n);
}

// Asynchronous copies, as the driver documents them: with pinned host memory they
// run when the stream reaches them (here: when the host waits for that point);
// from pageable memory the source is staged at once and the device write waits for
// the stream; to pageable memory the call returns once the copy is done.
static CUresult CopyAsync(void* dst, const void* src, size_t n, CUdeviceptr device_dst,
                          CUdeviceptr device_src, CUstream stream) {
  ApiGate gate;
  if (const CUresult sticky = StickyError(); sticky != CUDA_SUCCESS) return sticky;
  if (!StreamValid(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (device_dst && !DeviceRangeOk(device_dst, n)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  if (device_src && !DeviceRangeOk(device_src, n)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  Stream* s = ResolveStream(stream);
  PendingCopy c;
  c.dst = dst;
  c.n = n;
  c.device_dst = device_dst;
  c.device_src = device_src;
  if (device_src && !HostRangePinned(dst, n)) {  // device -> pageable: synchronous
    WaitStream(s);
    std::memcpy(dst, src, n);
    return CUDA_SUCCESS;
  }
  if (device_dst && !HostRangePinned(src, n)) {
    c.staged.assign(static_cast<const char*>(src), static_cast<const char*>(src) + n);
  } else {
    c.src = src;
  }
  EnqueueCopy(s, std::move(c));
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n,
                                                CUstream s) {
  return CopyAsync(reinterpret_cast<void*>(dst), src, n, dst, 0, s);
}
GD_STANDIN_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n,
                                                     CUstream s) {
  return cuMemcpyHtoDAsync_v2(dst, src, n, s);
}

GD_STANDIN_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return CopyAsync(dst, reinterpret_cast<const void*>(src), n, 0, src, s);
}
GD_STANDIN_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n,
                                                     CUstream s) {
  return cuMemcpyDtoHAsync_v2(dst, src, n, s);
}

GD_STANDIN_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                                CUstream) {
  return cuMemcpyDtoD_v2(dst, src, n);
}
GD_STANDIN_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                                     CUstream s) {
  return cuMemcpyDtoDAsync_v2(dst, src, n, s);
}

// Unified addressing: either side may be host or device memory.
GD_STANDIN_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  ApiGate gate;
  std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return CUDA_SUCCESS;
}
GD_STANDIN_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return cuMemcpy(dst, src, n);
}
GD_STANDIN_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream) {
  return cuMemcpy(dst, src, n);
}
GD_STANDIN_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                              CUstream s) {
  return cuMemcpyAsync(dst, src, n, s);
}

GD_STANDIN_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
  ApiGate gate;
  if (!DeviceRangeOk(dst, n)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  std::memset(reinterpret_cast<void*>(dst), v, n);
  return CUDA_SUCCESS;
}
GD_STANDIN_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char v, size_t n) {
  return cuMemsetD8_v2(dst, v, n);
}

GD_STANDIN_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) {
  ApiGate gate;
  if (!DeviceRangeOk(dst, n * 4)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  auto* p = reinterpret_cast<unsigned int*>(dst);
  for (size_t i = 0; i < n; ++i) p[i] = v;
  return CUDA_SUCCESS;
}
GD_STANDIN_EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n) {
  return cuMemsetD32_v2(dst, v, n);
}

// Stream-ordered, as the driver's: the stand-in waits for the stream's earlier work and
// sets the bytes at the call (a memset the stream has not reached yet is not observable
// by a host that has not synchronised with it).
static CUresult MemsetAsync(CUdeviceptr dst, size_t bytes, CUstream stream,
                            void (*set)(CUdeviceptr, size_t, unsigned), unsigned v) {
  ApiGate gate;
  if (const CUresult sticky = StickyError(); sticky != CUDA_SUCCESS) return sticky;
  if (!StreamValid(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (!DeviceRangeOk(dst, bytes)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  WaitStream(ResolveStream(stream));
  set(dst, bytes, v);
  return CUDA_SUCCESS;
}

static void SetBytes(CUdeviceptr dst, size_t bytes, unsigned v) {
  std::memset(reinterpret_cast<void*>(dst), static_cast<unsigned char>(v), bytes);
}
static void SetWords(CUdeviceptr dst, size_t bytes, unsigned v) {
  auto* p = reinterpret_cast<unsigned int*>(dst);
  for (size_t i = 0; i < bytes / 4; ++i) p[i] = v;
}

GD_STANDIN_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  return MemsetAsync(dst, n, s, SetBytes, v);
}
GD_STANDIN_EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char v, size_t n,
                                                CUstream s) {
  return cuMemsetD8Async(dst, v, n, s);
}
GD_STANDIN_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  if (dst % 4 != 0) return CUDA_ERROR_INVALID_VALUE;  // the driver wants 4-byte alignment
  return MemsetAsync(dst, n * 4, s, SetWords, v);
}
GD_STANDIN_EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n,
                                                 CUstream s) {
  return cuMemsetD32Async(dst, v, n, s);
}

// ---- Virtual memory management.

GD_STANDIN_EXPORT CUresult cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp* prop,
                                                         CUmemAllocationGranularity_flags) {
  if (!g || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id != 0)
    return CUDA_ERROR_INVALID_VALUE;
  *g = kGranularity;
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                               CUdeviceptr, unsigned long long) {
  ApiGate gate;
  if (!ptr || size == 0 || size % kGranularity) return CUDA_ERROR_INVALID_VALUE;
  if (alignment < kGranularity) alignment = kGranularity;
  const size_t span = size + alignment;
  void* p = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const uintptr_t base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (base + alignment - 1) / alignment * alignment;
  if (aligned > base) munmap(p, aligned - base);
  if (aligned + size < base + span)
    munmap(reinterpret_cast<void*>(aligned + size), base + span - aligned - size);
  std::lock_guard<std::mutex> lock(GlobalMutex());
  *ptr = aligned;
  g_reserved[aligned] = size;
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  ApiGate gate;
  std::lock_guard<std::mutex> lock(GlobalMutex());
  auto it = g_reserved.find(ptr);
  if (it == g_reserved.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  auto m = g_mapped.lower_bound(ptr);
  if (m != g_mapped.end() && m->first < ptr + size)
    return CUDA_ERROR_INVALID_VALUE;  // still mapped
  munmap(reinterpret_cast<void*>(ptr), size);
  g_reserved.erase(it);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                       const CUmemAllocationProp* prop, unsigned long long flags) {
  ApiGate gate;
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!handle || !prop || flags || size == 0 || size % kGranularity ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  if (!Reserve(size)) return CUDA_ERROR_OUT_OF_MEMORY;
  int fd = memfd_create("gd-standin-physical", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) close(fd);
    Unreserve(size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto* p = new Physical{fd, size, 0, false};
  GetCounters().physical_live.fetch_add(1);
  std::lock_guard<std::mutex> lock(GlobalMutex());
  g_physical.insert(p);
  *handle = reinterpret_cast<CUmemGenericAllocationHandle>(p);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  ApiGate gate;
  auto* p = reinterpret_cast<Physical*>(handle);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(GlobalMutex());
  p->released = true;
  MaybeFreePhysical(p);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                    CUmemGenericAllocationHandle handle, unsigned long long flags) {
  ApiGate gate;
  auto* p = reinterpret_cast<Physical*>(handle);
  if (!p || flags || offset + size > p->size || size % kGranularity)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(GlobalMutex());
  if (!InRange(g_reserved, ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  auto m = g_mapped.lower_bound(ptr);
  if (m != g_mapped.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  if (m != g_mapped.begin() && std::prev(m)->first + std::prev(m)->second.size > ptr)
    return CUDA_ERROR_INVALID_VALUE;
  // No access until cuMemSetAccess, as on the device.
  void* at = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd,
                  static_cast<off_t>(offset));
  if (at == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  ++p->mappings;
  g_mapped[ptr] = Mapping{size, p, offset};
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  ApiGate gate;
  std::lock_guard<std::mutex> lock(GlobalMutex());
  auto it = g_mapped.find(ptr);
  if (it == g_mapped.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
  // Back to a bare reservation: the contents are gone from this range.
  mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  Physical* p = it->second.physical;
  g_mapped.erase(it);
  --p->mappings;
  MaybeFreePhysical(p);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                          size_t count) {
  ApiGate gate;
  if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!DeviceRangeOk(ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  const int prot = desc[0].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
                   : desc[0].flags == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
                                                                       : PROT_NONE;
  if (mprotect(reinterpret_cast<void*>(ptr), size, prot) != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(GlobalMutex());
  auto it = g_mapped.upper_bound(ptr);
  if (it != g_mapped.begin()) --it;  // the mapping holding ptr, then those up to ptr + size
  for (; it != g_mapped.end() && it->first < ptr + size; ++it)
    if (it->first + it->second.size > ptr) it->second.prot = prot;
  return CUDA_SUCCESS;
}

// ---- The device-memory half of cuCheckpointProcessCheckpoint / ...Restore.

namespace gandiva::standin {
namespace {

// A bare reservation again at [ptr, ptr + size): its contents gone, the address kept.
void ToReservation(CUdeviceptr ptr, size_t size) {
  mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

}  // namespace

CUresult CheckpointDeviceMemory() {
  std::lock_guard<std::mutex> lock(GlobalMutex());
  if (g_checkpointed.active) return CUDA_ERROR_ILLEGAL_STATE;
  // Managed (UVM) memory cannot be checkpointed: driver 580 on an H200 answered
  // CUDA_ERROR_NOT_SUPPORTED and left the process locked.
  if (!g_managed.empty()) return CUDA_ERROR_NOT_SUPPORTED;
  Checkpointed saved;
  // Copy everything first: a failure leaves the process as it was.
  for (const auto& [ptr, size] : g_plain) {
    const char* at = reinterpret_cast<const char*>(ptr);
    saved.plain[ptr].assign(at, at + size);
  }
  for (Physical* p : g_physical) {
    std::vector<char>& bytes = saved.physical[p];
    bytes.resize(p->size);
    if (pread(p->fd, bytes.data(), p->size, 0) != static_cast<ssize_t>(p->size))
      return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // Then release: the device holds nothing of this process any more.
  for (const auto& [ptr, size] : g_plain) {
    ToReservation(ptr, size);
    Unreserve(size);
  }
  for (const auto& [ptr, m] : g_mapped) ToReservation(ptr, m.size);
  for (Physical* p : g_physical) {
    close(p->fd);
    p->fd = -1;
    Unreserve(p->size);
    GetCounters().physical_live.fetch_sub(1);
  }
  saved.active = true;
  g_checkpointed = std::move(saved);
  return CUDA_SUCCESS;
}

CUresult RestoreDeviceMemory() {
  std::lock_guard<std::mutex> lock(GlobalMutex());
  if (!g_checkpointed.active) return CUDA_ERROR_ILLEGAL_STATE;
  // All of it or nothing: the device must have room for the whole checkpoint.
  size_t total = 0;
  for (const auto& [ptr, size] : g_plain) total += size;
  for (Physical* p : g_physical) total += p->size;
  if (!Reserve(total)) return CUDA_ERROR_OUT_OF_MEMORY;
  for (Physical* p : g_physical) {
    const std::vector<char>& bytes = g_checkpointed.physical[p];
    p->fd = memfd_create("gd-standin-physical", MFD_CLOEXEC);
    if (p->fd < 0 || ftruncate(p->fd, static_cast<off_t>(p->size)) != 0 ||
        pwrite(p->fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()))
      std::abort();  // the stand-in's own host memory failed: nothing sensible to model
    GetCounters().physical_live.fetch_add(1);
  }
  for (const auto& [ptr, m] : g_mapped) {
    if (mmap(reinterpret_cast<void*>(ptr), m.size, m.prot, MAP_SHARED | MAP_FIXED, m.physical->fd,
             static_cast<off_t>(m.offset)) == MAP_FAILED)
      std::abort();
  }
  for (const auto& [ptr, size] : g_plain) {
    void* at = mmap(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (at == MAP_FAILED) std::abort();
    std::memcpy(at, g_checkpointed.plain[ptr].data(), size);
  }
  g_checkpointed = Checkpointed{};
  return CUDA_SUCCESS;
}

}  // namespace gandiva::standin
