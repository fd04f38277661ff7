// TEST DOUBLE — a CPU stand-in for libcuda.so.1, for testing the shim on machines
// without a GPU. Never installed, never shipped. Device memory is host memory at
// distinct addresses; VMM reservations are mmap'd ranges and physical memory is
// memfd pieces mapped at fixed addresses; kernels come from real nvcc cubins or
// fatbins, and a launch records the kernel and models its time (no device code runs).
// Environment: GD_STANDIN_KERNEL_NS (modelled kernel time, default 5000),
// GD_STANDIN_DEVICE_MEM (device memory, default 8 GiB), GD_STANDIN_COUNTERS (a file
// the counters are mapped to, for tests), GD_STANDIN_REPORT (launches per kernel at exit).
// It has one GPU and reads CUDA_VISIBLE_DEVICES as the driver does: a process
// whose list does not start with that GPU (0, or its UUID) fails cuInit with
// CUDA_ERROR_NO_DEVICE.
#ifndef GANDIVA_TESTS_SHIM_STANDIN_STANDIN_H_
#define GANDIVA_TESTS_SHIM_STANDIN_STANDIN_H_

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace gandiva::standin {

// Counters shared with tests through GD_STANDIN_COUNTERS (a mapped file).
struct Counters {
  std::atomic<uint64_t> launches;       // kernel launches executed (graph nodes included)
  std::atomic<uint64_t> device_bytes;   // device memory in use (plain + physical)
  std::atomic<uint64_t> physical_live;  // physical (cuMemCreate) pieces alive
};
Counters& GetCounters();

// An asynchronous copy the stream has not reached yet. Performed when the host
// waits for the stream (or for an event recorded after it), never earlier: a
// program that reads a pinned destination, or reuses a pinned source, before
// waiting sees what a GPU may show it (the old bytes), and a device range unmapped
// before the copy ran faults the context (sticky CUDA_ERROR_ILLEGAL_ADDRESS).
struct PendingCopy {
  uint64_t seq = 0;  // position in the stream
  void* dst = nullptr;
  const void* src = nullptr;  // null: from `staged`
  size_t n = 0;
  CUdeviceptr device_dst = 0, device_src = 0;  // checked again when performed
  std::vector<char> staged;  // pageable source, copied at enqueue (as the driver stages it)
};

struct Stream {
  std::atomic<uint64_t> busy_until_ns{0};  // modelled completion time of queued work
  bool capturing = false;
  bool non_blocking = false;  // CU_STREAM_NON_BLOCKING: no implicit sync with the legacy stream
  struct Graph* capture = nullptr;
  std::mutex copies_mu;
  std::deque<PendingCopy> copies;  // in stream order
  uint64_t enqueued = 0;           // sequence numbers handed out (under copies_mu)
};

// A kernel parameter as the image describes it (offset and size in the param buffer).
struct KernelParam {
  uint16_t offset = 0;
  uint16_t size = 0;
};

// A kernel in an image: its name and, for ELF images, its parameter layout.
struct KernelInfo {
  std::string name;
  bool params_known = false;
  std::vector<KernelParam> params;  // by ordinal
  int param_bytes = 0;              // size of the whole parameter buffer
};

struct Function {
  KernelInfo info;
  std::atomic<uint64_t> launches{0};
  int max_dynamic_shared = 48 << 10;  // cuFuncSetAttribute raises it (opt-in)
};

struct Module {
  std::vector<Function*> functions;
};

struct Graph {
  std::vector<Function*> kernels;  // captured launches, replayed by cuGraphLaunch
  bool faults = false;             // a captured launch touches memory outside the device's
};

struct Event {
  uint64_t at_ns = 0;
  Stream* stream = nullptr;  // where it was recorded (null: never recorded)
  uint64_t seq = 0;          // the stream's position then: copies up to it are done when it is
};

uint64_t NowNs();
uint64_t KernelNs();
Stream* ResolveStream(CUstream s);  // null -> the default stream
// Waits until the stream's modelled work is done and performs its pending copies.
void WaitStream(Stream* s);
void WaitAllStreams();
// What a synchronous call on the legacy default stream waits for: the default
// stream and every blocking stream (not CU_STREAM_NON_BLOCKING ones).
void WaitLegacyStream();
// Performs the stream's pending copies up to and including position `seq`.
void CompleteCopies(Stream* s, uint64_t seq);
// Queues an asynchronous copy on `s` (see PendingCopy); returns its position.
uint64_t EnqueueCopy(Stream* s, PendingCopy copy);
// True when [p, p+n) lies in page-locked host memory (cuMemHostAlloc/cuMemAllocHost).
bool HostRangePinned(const void* p, size_t n);
bool StreamValid(CUstream s);
// True when [ptr, ptr+n) is mapped device memory; copies check it (a swapped-out
// range must fail, as on a GPU, instead of reading stale host memory).
bool DeviceRangeOk(CUdeviceptr ptr, size_t n);

// Kernels in a cubin (ELF), fatbin or PTX image; false if unreadable.
bool KernelsInImage(const void* image, std::vector<KernelInfo>* kernels);

// The calling thread's current context (null if none).
CUcontext CurrentContext();
// A device fault (e.g. a kernel's pointer argument outside device memory): the
// context's sticky error, returned by every later synchronisation, as on a GPU.
void SetStickyError(CUresult e);
CUresult StickyError();

std::mutex& GlobalMutex();
bool Initialized();
void RecordLaunch(Function* f);

// The driver's checkpoint API (standin_checkpoint.cc). Every entry point that makes,
// waits for or touches device work holds an ApiGate for the call: while the process
// is locked or checkpointed (cuCheckpointProcessLock until ...Unlock) it blocks, as the
// driver's API locks do, and cuCheckpointProcessLock waits until no thread holds one.
// Nested gates (an entry point calling another) count once.
class ApiGate {
 public:
  ApiGate();
  ~ApiGate();
  ApiGate(const ApiGate&) = delete;
  ApiGate& operator=(const ApiGate&) = delete;
};
// Starts the thread that serves other processes' checkpoint calls on this process
// (the driver's restore thread); idempotent. Called by cuInit.
void StartCheckpointService();
// True while the process is checkpointed (its device memory on the host).
bool ProcessCheckpointed();

// Device memory for the checkpoint (standin_memory.cc), called with the process
// locked: copies every allocation's bytes (plain and physical) to host memory and
// releases the device memory, keeping every address reserved and every handle valid;
// restore makes the memory again (all of it, or none when the device lacks room) at
// the same addresses, with the same bytes and access.
CUresult CheckpointDeviceMemory();
CUresult RestoreDeviceMemory();

}  // namespace gandiva::standin

#endif  // GANDIVA_TESTS_SHIM_STANDIN_STANDIN_H_
