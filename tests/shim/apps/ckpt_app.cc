// Test program for device memory in checkpoints: a driver-API loop (linked directly
// against libcuda, kernels from an nvcc-built image) over buffers of several sizes and
// kinds, whose contents evolve every iteration from their previous contents, with
// gd_boundary() per iteration and the loop counter as registered host state. The
// final digest of all buffers (read back with cuMemcpyDtoH) is the same for a run
// that was checkpointed, killed and restored, or migrated, only if every byte moved.
// Arguments:
//   --image PATH       cubin/fatbin with gd_scale (required)
//   --iterations N     (default 100)
//   --sleep-ms M       host time per iteration (default 0)
//   --first-bytes S    size of the first buffer (default 1 MiB: VMM-backed)
//   --device-state     also register the buffers' contents as a section of the program's
//                      own, saved and loaded through the driver the way torch.save and
//                      load_state_dict do (cuMemcpyDtoHAsync + cuStreamSynchronize, then
//                      cuMemcpyDtoH; cuMemcpyHtoD): on the boundary thread, while parked
//   --worker           a second thread launching kernels (that change nothing) until the end
//   --lazy-at N        allocate one more buffer after N iterations (past the first
//                      boundary), as a caching allocator grows during training
//   --result PATH      JSON: iterations, start_iteration, digest, buffers
// Exit: 0 ok, 2 a driver call failed, 4 bad arguments.
#include <cuda.h>  // maps cuMemAlloc to cuMemAlloc_v2 etc., as any -lcuda program
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "gandiva/gandiva.h"

namespace {

#define CHECK(expr)                                                                     \
  do {                                                                                  \
    CUresult r_ = (expr);                                                               \
    if (r_ != CUDA_SUCCESS) {                                                           \
      std::fprintf(stderr, "ckpt_app: %s failed: %d (line %d)\n", #expr, r_, __LINE__); \
      std::_Exit(2);                                                                    \
    }                                                                                   \
  } while (0)

struct Buffer {
  CUdeviceptr ptr = 0;
  size_t size = 0;
};

// The host state a restore must bring back with the device memory.
struct LoopState {
  int64_t iteration = 0;
};

int SaveLoop(void* user, gd_writer* w) { return gd_write(w, user, sizeof(LoopState)); }
int LoadLoop(void* user, gd_reader* r) {
  return gd_read(r, user, sizeof(LoopState)) == sizeof(LoopState) ? 0 : -1;
}

// The buffers' contents as registered state (--device-state).
std::vector<Buffer>* g_state_buffers = nullptr;

int SaveDevice(void*, gd_writer* w) {
  std::vector<uint8_t> host;
  for (const Buffer& b : *g_state_buffers) {
    host.resize(b.size);
    // As torch's storage.cpu(): an async copy on the stream, then a stream sync;
    // then a synchronous copy of the first bytes again (as a .item() would).
    if (cuMemcpyDtoHAsync(host.data(), b.ptr, b.size, nullptr) != CUDA_SUCCESS) return -1;
    if (cuStreamSynchronize(nullptr) != CUDA_SUCCESS) return -1;
    uint8_t first = 0;
    if (cuMemcpyDtoH(&first, b.ptr, 1) != CUDA_SUCCESS || first != host[0]) return -1;
    if (gd_write(w, host.data(), host.size()) != 0) return -1;
  }
  return 0;
}

int LoadDevice(void*, gd_reader* r) {
  std::vector<uint8_t> host;
  for (const Buffer& b : *g_state_buffers) {
    host.resize(b.size);
    if (gd_read(r, host.data(), b.size) != static_cast<long long>(b.size)) return -1;
    if (cuMemcpyHtoD(b.ptr, host.data(), b.size) != CUDA_SUCCESS) return -1;
  }
  return 0;
}

uint64_t Fnv1a(const uint8_t* p, size_t n, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Iteration `it` rewrites a window of buffer b from its previous contents.
void Step(const Buffer& buf, int b, int64_t it, std::vector<uint8_t>* scratch) {
  const size_t window = buf.size < (64u << 10) ? buf.size : (64u << 10);
  const size_t span = buf.size - window + 1;
  const size_t off = static_cast<size_t>((it * 7919 * 64 + b * 4096) % span);
  scratch->resize(window);
  CHECK(cuMemcpyDtoH(scratch->data(), buf.ptr + off, window));
  for (size_t j = 0; j < window; ++j)
    (*scratch)[j] = static_cast<uint8_t>((*scratch)[j] * 31 + (it + 1) * (b + 7) + j);
  CHECK(cuMemcpyHtoD(buf.ptr + off, scratch->data(), window));
}

}  // namespace

int main(int argc, char** argv) {
  const char* image_path = nullptr;
  const char* result = nullptr;
  int64_t iterations = 100;
  int sleep_ms = 0;
  size_t first_bytes = 1u << 20;
  bool device_state = false;
  int64_t lazy_at = -1;
  bool worker = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--image")
      image_path = next();
    else if (a == "--iterations")
      iterations = std::atoll(next());
    else if (a == "--sleep-ms")
      sleep_ms = std::atoi(next());
    else if (a == "--first-bytes")
      first_bytes = std::strtoull(next(), nullptr, 0);
    else if (a == "--device-state")
      device_state = true;
    else if (a == "--worker")
      worker = true;
    else if (a == "--lazy-at")
      lazy_at = std::atoll(next());
    else if (a == "--result")
      result = next();
    else
      return 4;
  }
  std::ifstream in(image_path ? image_path : "", std::ios::binary);
  if (!in || !result) {
    std::fprintf(stderr, "ckpt_app: needs --image and --result\n");
    return 4;
  }
  std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CUmodule module;
  CUfunction scale;
  CHECK(cuModuleLoadData(&module, image.data()));
  CHECK(cuModuleGetFunction(&scale, module, "gd_scale"));

  // The same allocations in the same order in every process, before the first
  // boundary: two VMM-backed (>= 1 MiB), two plain, one pitched; a temporary freed
  // in between, so that allocation ranks and creation counts differ.
  std::vector<Buffer> bufs;
  auto alloc = [&](size_t size) {
    Buffer b;
    b.size = size;
    CHECK(cuMemAlloc(&b.ptr, size));
    bufs.push_back(b);
  };
  alloc(first_bytes);
  alloc(40004);
  CUdeviceptr temporary;
  CHECK(cuMemAlloc(&temporary, 8192));
  alloc((3u << 20) + 1234);
  CHECK(cuMemFree(temporary));
  alloc(4096);
  Buffer pitched;
  size_t pitch = 0;
  CHECK(cuMemAllocPitch(&pitched.ptr, &pitch, 1000, 16, 4));
  pitched.size = pitch * 16;
  bufs.push_back(pitched);
  // Initial contents: a pattern per buffer.
  for (size_t b = 0; b < bufs.size(); ++b) {
    std::vector<uint8_t> host(bufs[b].size);
    for (size_t j = 0; j < host.size(); ++j)
      host[j] = static_cast<uint8_t>(j * 2654435761u >> 13 ^ b);
    CHECK(cuMemcpyHtoD(bufs[b].ptr, host.data(), host.size()));
  }

  LoopState state;
  if (gd_register_state("ckpt_app.loop", &SaveLoop, &LoadLoop, &state) != 0) return 2;
  g_state_buffers = &bufs;
  if (device_state && gd_register_state("ckpt_app.device", &SaveDevice, &LoadDevice, nullptr) != 0)
    return 2;
  gd_boundary();  // a restore (gandiva run --restore, or a migration) happens here
  const int64_t start_iteration = state.iteration;

  int zero = 0;
  float one = 1.0f;
  void* args[] = {&bufs[0].ptr, &one, &zero};  // n = 0: a real GPU changes nothing either
  std::vector<uint8_t> scratch;
  std::atomic<bool> stop{false};
  std::thread launcher;
  if (worker) {
    launcher = std::thread([&] {
      CHECK(cuCtxSetCurrent(ctx));
      while (!stop.load()) {
        CHECK(cuLaunchKernel(scale, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
        usleep(300);
      }
    });
  }
  while (state.iteration < iterations) {
    if (state.iteration == lazy_at) {  // grows past the first boundary; never freed
      alloc(2u << 20);
      std::vector<uint8_t> zeros(bufs.back().size, 0);
      CHECK(cuMemcpyHtoD(bufs.back().ptr, zeros.data(), zeros.size()));
    }
    CHECK(cuLaunchKernel(scale, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
    for (size_t b = 0; b < bufs.size(); ++b)
      Step(bufs[b], static_cast<int>(b), state.iteration, &scratch);
    CHECK(cuCtxSynchronize());
    ++state.iteration;
    gd_boundary();
    if (sleep_ms) usleep(sleep_ms * 1000);
  }
  stop.store(true);
  if (launcher.joinable()) launcher.join();

  uint64_t digest = 1469598103934665603ull;
  std::string per_buffer;
  for (size_t b = 0; b < bufs.size(); ++b) {
    std::vector<uint8_t> host(bufs[b].size);
    CHECK(cuMemcpyDtoH(host.data(), bufs[b].ptr, host.size()));
    const uint64_t h = Fnv1a(host.data(), host.size());
    digest = Fnv1a(host.data(), host.size(), digest);
    char item[96];
    std::snprintf(item, sizeof(item), "%s{\"size\": %zu, \"fnv1a\": \"%016llx\"}", b ? ", " : "",
                  bufs[b].size, static_cast<unsigned long long>(h));
    per_buffer += item;
  }
  FILE* f = std::fopen(result, "w");
  if (!f) return 2;
  std::fprintf(f,
               "{\"iterations\": %lld, \"start_iteration\": %lld, \"digest\": \"%016llx\", "
               "\"buffers\": [%s]}\n",
               static_cast<long long>(state.iteration), static_cast<long long>(start_iteration),
               static_cast<unsigned long long>(digest), per_buffer.c_str());
  std::fclose(f);
  return 0;
}
