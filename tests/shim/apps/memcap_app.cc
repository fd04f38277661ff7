// Test program: a job under a device-memory cap (GANDIVA_GPU_MEMORY_BYTES), with
// the driver's entry points fetched as cudart fetches them (dlopen + cuGetProcAddress).
// It checks what it is told (cuDeviceTotalMem and cuMemGetInfo report the cap) and
// what it is given, in one of two roles, run side by side on one device:
//   --role keeper --ready FILE --go FILE
//       fills 3/4 of its cap with patterned buffers, creates FILE (ready), waits for
//       the go file, then checks every byte is intact and that it still gets exactly
//       the rest of its cap: nothing of its share was taken by the other job.
//   --role hog
//       asks for more than its cap in every allocation call the shim caps (cuMemAlloc,
//       cuMemAllocManaged, cuMemAllocPitch, cuMemAllocAsync, cuMemCreate) on a device
//       with room for it: each must fail with CUDA_ERROR_OUT_OF_MEMORY; then fills its
//       cap exactly, one of each kind, and one more byte is refused; and physical
//       memory released while still mapped stays charged until it is unmapped.
// Exit: 0 every check held, 1 a check failed (it says which), 2 set-up failed.
#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

#define GD_MEMCAP_DRIVER(X)                                              \
  X(cuInit, PFN_cuInit_v2000, 12000)                                     \
  X(cuDeviceGet, PFN_cuDeviceGet_v2000, 12000)                           \
  X(cuDeviceTotalMem, PFN_cuDeviceTotalMem_v3020, 12000)                 \
  X(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000, 12000) \
  X(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000, 12000)                   \
  X(cuCtxSynchronize, PFN_cuCtxSynchronize_v2000, 12000)                 \
  X(cuMemGetInfo, PFN_cuMemGetInfo_v3020, 12000)                         \
  X(cuMemAlloc, PFN_cuMemAlloc_v3020, 12000)                             \
  X(cuMemFree, PFN_cuMemFree_v3020, 12000)                               \
  X(cuMemAllocManaged, PFN_cuMemAllocManaged_v6000, 12000)               \
  X(cuMemAllocPitch, PFN_cuMemAllocPitch_v3020, 12000)                   \
  X(cuMemAllocAsync, PFN_cuMemAllocAsync_v11020, 12000)                  \
  X(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020, 12000)                    \
  X(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000, 12000)           \
  X(cuMemCreate, PFN_cuMemCreate_v10020, 12000)                          \
  X(cuMemRelease, PFN_cuMemRelease_v10020, 12000)                        \
  X(cuMemAddressReserve, PFN_cuMemAddressReserve_v10020, 12000)          \
  X(cuMemAddressFree, PFN_cuMemAddressFree_v10020, 12000)                \
  X(cuMemMap, PFN_cuMemMap_v10020, 12000)                                \
  X(cuMemUnmap, PFN_cuMemUnmap_v10020, 12000)                            \
  X(cuMemsetD32, PFN_cuMemsetD32_v3020, 12000)                           \
  X(cuMemcpyDtoH, PFN_cuMemcpyDtoH_v3020, 12000)

struct Driver {
#define GD_FIELD(name, pfn, version) pfn name = nullptr;
  GD_MEMCAP_DRIVER(GD_FIELD)
#undef GD_FIELD
};

constexpr size_t kMiB = 1u << 20;
int g_failures = 0;

#define SETUP(expr)                                                                       \
  do {                                                                                    \
    const CUresult r_ = (expr);                                                           \
    if (r_ != CUDA_SUCCESS) {                                                             \
      std::fprintf(stderr, "memcap_app: %s failed: %d (line %d)\n", #expr, r_, __LINE__); \
      std::_Exit(2);                                                                      \
    }                                                                                     \
  } while (0)

#define EXPECT(cond, ...)                                                 \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "memcap_app: line %d: %s: ", __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                  \
      std::fprintf(stderr, "\n");                                         \
      ++g_failures;                                                       \
    }                                                                     \
  } while (0)

bool Resolve(Driver* d) {
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!libcuda) return false;
  auto get_proc =
      reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(libcuda, "cuGetProcAddress_v2"));
  if (!get_proc) return false;
  bool ok = true;
#define GD_FETCH(name, pfn, version)                                                          \
  {                                                                                           \
    void* fn = nullptr;                                                                       \
    CUdriverProcAddressQueryResult found;                                                     \
    if (get_proc(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS || \
        !fn) {                                                                                \
      std::fprintf(stderr, "memcap_app: no %s\n", #name);                                     \
      ok = false;                                                                             \
    }                                                                                         \
    d->name = reinterpret_cast<pfn>(fn);                                                      \
  }
  GD_MEMCAP_DRIVER(GD_FETCH)
#undef GD_FETCH
  return ok;
}

// What cuMemGetInfo says now.
void Info(const Driver& d, size_t* free_bytes, size_t* total) {
  SETUP(d.cuMemGetInfo(free_bytes, total));
}

size_t FreeNow(const Driver& d) {
  size_t free_bytes = 0, total = 0;
  Info(d, &free_bytes, &total);
  return free_bytes;
}

void ExpectToldTheCap(const Driver& d, CUdevice dev, size_t cap) {
  size_t total_mem = 0, free_bytes = 0, total = 0;
  SETUP(d.cuDeviceTotalMem(&total_mem, dev));
  Info(d, &free_bytes, &total);
  EXPECT(total_mem == cap, "cuDeviceTotalMem %zu, cap %zu", total_mem, cap);
  EXPECT(total == cap, "cuMemGetInfo total %zu, cap %zu", total, cap);
  EXPECT(free_bytes == cap, "cuMemGetInfo free %zu before any allocation, cap %zu", free_bytes,
         cap);
}

uint32_t Pattern(size_t buffer, size_t word) {
  return static_cast<uint32_t>(0x9e3779b9u * (buffer + 1) + word * 2654435761u);
}

int Keeper(const Driver& d, size_t cap, const char* ready, const char* go) {
  // Three buffers of a quarter of the cap each, every word of each one patterned.
  const size_t quarter = cap / 4;
  std::vector<CUdeviceptr> bufs(3);
  std::vector<uint32_t> host(quarter / 4);
  for (size_t b = 0; b < bufs.size(); ++b) {
    SETUP(d.cuMemAlloc(&bufs[b], quarter));
    SETUP(d.cuMemsetD32(bufs[b], Pattern(b, 0), quarter / 4));
  }
  EXPECT(FreeNow(d) == cap - 3 * quarter, "free %zu after 3/4 of the cap", FreeNow(d));
  if (FILE* f = std::fopen(ready, "w")) std::fclose(f);
  while (access(go, F_OK) != 0) usleep(2000);

  for (size_t b = 0; b < bufs.size(); ++b) {
    SETUP(d.cuMemcpyDtoH(host.data(), bufs[b], quarter));
    size_t wrong = 0;
    for (uint32_t w : host) wrong += w != Pattern(b, 0);
    EXPECT(wrong == 0, "buffer %zu: %zu words changed while the other job ran", b, wrong);
  }
  // The rest of the cap is still ours: exactly one more quarter, then nothing.
  CUdeviceptr last = 0, more = 0;
  EXPECT(d.cuMemAlloc(&last, cap - 3 * quarter) == CUDA_SUCCESS, "the last quarter was refused");
  EXPECT(FreeNow(d) == 0, "free %zu at the cap", FreeNow(d));
  EXPECT(d.cuMemAlloc(&more, 4096) == CUDA_ERROR_OUT_OF_MEMORY, "a page beyond the cap was given");
  if (last) SETUP(d.cuMemFree(last));
  for (CUdeviceptr p : bufs) SETUP(d.cuMemFree(p));
  EXPECT(FreeNow(d) == cap, "free %zu after freeing everything", FreeNow(d));
  return g_failures == 0 ? 0 : 1;
}

CUmemAllocationProp DeviceProp(CUdevice dev) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

int Hog(const Driver& d, CUdevice dev, size_t cap) {
  const size_t over = cap + 64 * kMiB;  // the device has room for it: only the cap says no
  const CUmemAllocationProp prop = DeviceProp(dev);
  CUdeviceptr p = 0;
  size_t pitch = 0;
  CUmemGenericAllocationHandle handle = 0;
  EXPECT(d.cuMemAlloc(&p, over) == CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc beyond the cap");
  EXPECT(d.cuMemAllocManaged(&p, over, CU_MEM_ATTACH_GLOBAL) == CUDA_ERROR_OUT_OF_MEMORY,
         "cuMemAllocManaged beyond the cap");
  EXPECT(d.cuMemAllocPitch(&p, &pitch, 1 * kMiB, over / kMiB, 4) == CUDA_ERROR_OUT_OF_MEMORY,
         "cuMemAllocPitch beyond the cap");
  EXPECT(d.cuMemAllocAsync(&p, over, nullptr) == CUDA_ERROR_OUT_OF_MEMORY,
         "cuMemAllocAsync beyond the cap");
  EXPECT(d.cuMemCreate(&handle, over, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY,
         "cuMemCreate beyond the cap");
  EXPECT(FreeNow(d) == cap, "free %zu after refusals: a refusal kept a charge", FreeNow(d));

  // The cap filled exactly, one allocation of each kind: half by cuMemAlloc, then an
  // eighth each by managed, pitched (pitch = width here: a multiple of 512), async and
  // cuMemCreate memory.
  const size_t eighth = cap / 8;
  CUdeviceptr half = 0, managed = 0, pitched = 0, async = 0, more = 0;
  SETUP(d.cuMemAlloc(&half, cap / 2));
  EXPECT(d.cuMemAlloc(&more, cap / 2 + 2 * kMiB) == CUDA_ERROR_OUT_OF_MEMORY,
         "cuMemAlloc of more than the rest of the cap");
  SETUP(d.cuMemAllocManaged(&managed, eighth, CU_MEM_ATTACH_GLOBAL));
  SETUP(d.cuMemAllocPitch(&pitched, &pitch, eighth / 8, 8, 4));
  EXPECT(pitch == eighth / 8, "pitch %zu for width %zu", pitch, eighth / 8);
  SETUP(d.cuMemAllocAsync(&async, eighth, nullptr));
  SETUP(d.cuMemCreate(&handle, eighth, &prop, 0));
  EXPECT(FreeNow(d) == 0, "free %zu at the cap", FreeNow(d));
  EXPECT(d.cuMemAlloc(&more, 1) == CUDA_ERROR_OUT_OF_MEMORY, "a byte beyond the cap was given");
  CUmemGenericAllocationHandle extra = 0;
  EXPECT(d.cuMemCreate(&extra, 2 * kMiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY,
         "cuMemCreate beyond the full cap");

  // Everything given back is room again.
  SETUP(d.cuMemRelease(handle));
  SETUP(d.cuMemFreeAsync(async, nullptr));
  SETUP(d.cuStreamSynchronize(nullptr));
  SETUP(d.cuMemFree(pitched));
  SETUP(d.cuMemFree(managed));
  SETUP(d.cuMemFree(half));
  EXPECT(FreeNow(d) == cap, "free %zu after freeing everything", FreeNow(d));

  // Physical memory released right after it is mapped still holds the device: it
  // stays charged until it is unmapped too.
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle mapped = 0;
  SETUP(d.cuMemAddressReserve(&va, cap / 2, 0, 0, 0));
  SETUP(d.cuMemCreate(&mapped, cap / 2, &prop, 0));
  SETUP(d.cuMemMap(va, cap / 2, 0, mapped, 0));
  SETUP(d.cuMemRelease(mapped));
  EXPECT(FreeNow(d) == cap / 2, "free %zu with half the cap mapped, its handle released",
         FreeNow(d));
  EXPECT(d.cuMemAlloc(&more, cap / 2 + 2 * kMiB) == CUDA_ERROR_OUT_OF_MEMORY,
         "memory released but still mapped was given again");
  SETUP(d.cuMemUnmap(va, cap / 2));
  SETUP(d.cuMemAddressFree(va, cap / 2));
  EXPECT(FreeNow(d) == cap, "free %zu after unmapping it", FreeNow(d));
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string role;
  const char *ready = nullptr, *go = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--role")) role = argv[i + 1];
    if (!std::strcmp(argv[i], "--ready")) ready = argv[i + 1];
    if (!std::strcmp(argv[i], "--go")) go = argv[i + 1];
  }
  const char* cap_text = std::getenv("GANDIVA_GPU_MEMORY_BYTES");
  const size_t cap = cap_text ? std::strtoull(cap_text, nullptr, 10) : 0;
  if (cap == 0 || cap % (8 * 2 * kMiB) != 0 ||
      !(role == "hog" || (role == "keeper" && ready && go))) {
    std::fprintf(stderr,
                 "usage: GANDIVA_GPU_MEMORY_BYTES=N (a multiple of 16 MiB) memcap_app "
                 "--role hog | --role keeper --ready FILE --go FILE\n");
    return 2;
  }
  Driver d;
  if (!Resolve(&d)) return 2;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  SETUP(d.cuInit(0));
  SETUP(d.cuDeviceGet(&dev, 0));
  SETUP(d.cuDevicePrimaryCtxRetain(&ctx, dev));
  SETUP(d.cuCtxSetCurrent(ctx));
  ExpectToldTheCap(d, dev, cap);
  return role == "hog" ? Hog(d, dev, cap) : Keeper(d, cap, ready, go);
}
