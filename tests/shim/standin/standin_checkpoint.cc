// TEST DOUBLE: the driver's checkpoint API (cuCheckpointProcess*) in the stand-in
// libcuda.so.1, with the semantics cuda.h documents for it:
//   running --Lock--> locked --Checkpoint--> checkpointed --Restore--> locked --Unlock--> running
// Lock blocks the process's further API calls (ApiGate: they wait, as the driver's API
// locks make them wait) and waits for the calls and the device work already in flight;
// with a timeout that passes it leaves the process running and returns
// CUDA_ERROR_NOT_READY. Checkpoint moves every byte of the process's device memory to
// host memory and gives the device memory back (the device accounting drops by it);
// Restore brings it back at the same addresses. A call in the wrong state returns
// CUDA_ERROR_ILLEGAL_STATE; non-zero reserved fields CUDA_ERROR_INVALID_VALUE.
//
// The calls name a process by pid. The process itself is served in place (the driver
// allows it: NVIDIA's sample checkpoints os.getpid(), as driver 580 did here on an
// H200); another process's calls go
// to that process's checkpoint thread (the driver's "restore thread", whose id
// cuCheckpointProcessGetRestoreThreadId returns) over an abstract Unix socket,
// "gd-standin-ckpt.<pid>", started by cuInit. As NVIDIA's driver 580 answered on an
// H200 (2026-11-28): a live process that has not initialised CUDA gets
// CUDA_ERROR_NOT_INITIALIZED, a pid that names no process CUDA_ERROR_OPERATING_SYSTEM,
// a null result pointer CUDA_ERROR_INVALID_VALUE; cuMemGetInfo while checkpointed
// fails at once with CUDA_ERROR_OPERATING_SYSTEM (it does not wait).
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "standin.h"

namespace gandiva::standin {
namespace {

struct ProcessState {
  std::mutex mu;
  std::condition_variable cv;
  CUprocessState state = CU_PROCESS_STATE_RUNNING;
  bool locking = false;  // a Lock is waiting for the calls in flight: new calls wait
  int active = 0;        // threads inside a gated entry point
};
ProcessState& Process() {
  static ProcessState* p = new ProcessState();  // leaked: gated calls may outlive exit
  return *p;
}
thread_local int t_gate_depth = 0;
std::atomic<int> g_restore_tid{0};

enum Op : int { kGetState, kLock, kCheckpoint, kRestore, kUnlock, kRestoreTid };
struct Request {
  int op = 0;
  unsigned timeout_ms = 0;
};
struct Reply {
  int result = CUDA_SUCCESS;
  int value = 0;  // the state, or the restore thread's id
};

CUresult LockHere(unsigned timeout_ms) {
  ProcessState& p = Process();
  std::unique_lock<std::mutex> lock(p.mu);
  if (p.state != CU_PROCESS_STATE_RUNNING || p.locking) return CUDA_ERROR_ILLEGAL_STATE;
  p.locking = true;
  const int own = t_gate_depth > 0 ? 1 : 0;  // a caller inside a gated call waits for others
  auto idle = [&] { return p.active <= own; };
  if (timeout_ms == 0) {
    p.cv.wait(lock, idle);
  } else if (!p.cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), idle)) {
    p.locking = false;  // left running, as documented
    p.cv.notify_all();
    return CUDA_ERROR_NOT_READY;
  }
  lock.unlock();
  WaitAllStreams();  // the work already submitted completes (copies performed)
  lock.lock();
  p.state = CU_PROCESS_STATE_LOCKED;
  p.locking = false;
  return CUDA_SUCCESS;
}

CUresult Transition(CUprocessState from, CUprocessState to, CUresult (*work)()) {
  ProcessState& p = Process();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.state != from || p.locking) return CUDA_ERROR_ILLEGAL_STATE;
  if (work) {
    if (const CUresult r = work(); r != CUDA_SUCCESS) return r;
  }
  p.state = to;
  p.cv.notify_all();
  return CUDA_SUCCESS;
}

Reply Serve(const Request& r) {
  Reply out;
  switch (r.op) {
    case kGetState: {
      ProcessState& p = Process();
      std::lock_guard<std::mutex> lock(p.mu);
      out.value = p.state;
      break;
    }
    case kLock:
      out.result = LockHere(r.timeout_ms);
      break;
    case kCheckpoint:
      out.result = Transition(CU_PROCESS_STATE_LOCKED, CU_PROCESS_STATE_CHECKPOINTED,
                              &CheckpointDeviceMemory);
      break;
    case kRestore:
      out.result =
          Transition(CU_PROCESS_STATE_CHECKPOINTED, CU_PROCESS_STATE_LOCKED, &RestoreDeviceMemory);
      break;
    case kUnlock:
      out.result = Transition(CU_PROCESS_STATE_LOCKED, CU_PROCESS_STATE_RUNNING, nullptr);
      break;
    case kRestoreTid:
      out.value = g_restore_tid.load();
      break;
    default:
      out.result = CUDA_ERROR_INVALID_VALUE;
  }
  return out;
}

sockaddr_un ServiceAddress(int pid, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const int n = std::snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "gd-standin-ckpt.%d", pid);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

void ServiceLoop(int listener) {
  g_restore_tid.store(static_cast<int>(syscall(SYS_gettid)));
  for (;;) {
    const int c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    Request req;
    if (recv(c, &req, sizeof(req), 0) == static_cast<ssize_t>(sizeof(req))) {
      const Reply reply = Serve(req);
      send(c, &reply, sizeof(reply), MSG_NOSIGNAL);
    }
    close(c);
  }
}

// Another process's call: asked of its checkpoint thread.
CUresult Ask(int pid, const Request& req, Reply* reply) {
  if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) return CUDA_ERROR_OPERATING_SYSTEM;
  if (pid == getpid()) {
    *reply = Serve(req);
    return static_cast<CUresult>(reply->result);
  }
  const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return CUDA_ERROR_OPERATING_SYSTEM;
  socklen_t len;
  const sockaddr_un a = ServiceAddress(pid, &len);
  CUresult r = CUDA_ERROR_NOT_INITIALIZED;  // a process that never initialised CUDA
  if (connect(s, reinterpret_cast<const sockaddr*>(&a), len) == 0) {
    r = CUDA_ERROR_OPERATING_SYSTEM;
    if (send(s, &req, sizeof(req), MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(req)) &&
        recv(s, reply, sizeof(*reply), 0) == static_cast<ssize_t>(sizeof(*reply)))
      r = static_cast<CUresult>(reply->result);
  }
  close(s);
  return r;
}

template <typename T>
bool AllZero(const T& v) {
  const auto* b = reinterpret_cast<const unsigned char*>(&v);
  for (size_t i = 0; i < sizeof(v); ++i)
    if (b[i]) return false;
  return true;
}

// The stand-in's one GPU (standin_driver.cc's UUID, as bytes).
constexpr unsigned char kStandinUuidBytes[16] = {0x53, 0x74, 0x61, 0x6e, 0x64, 0x20, 0x49, 0x6e,
                                                 0x20, 0x47, 0x50, 0x55, 0x30, 0x30, 0x30, 0x30};

}  // namespace

bool ProcessCheckpointed() {
  ProcessState& p = Process();
  std::lock_guard<std::mutex> lock(p.mu);
  return p.state == CU_PROCESS_STATE_CHECKPOINTED;
}

ApiGate::ApiGate() {
  if (t_gate_depth++ > 0) return;
  ProcessState& p = Process();
  std::unique_lock<std::mutex> lock(p.mu);
  p.cv.wait(lock, [&] { return p.state == CU_PROCESS_STATE_RUNNING && !p.locking; });
  ++p.active;
}

ApiGate::~ApiGate() {
  if (--t_gate_depth > 0) return;
  ProcessState& p = Process();
  std::lock_guard<std::mutex> lock(p.mu);
  --p.active;
  p.cv.notify_all();
}

void StartCheckpointService() {
  // Once per process: a forked child that initialises gets a thread of its own.
  static std::mutex mu;
  static int started_for = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (started_for == getpid()) return;
  started_for = getpid();
  g_restore_tid.store(0);
  const int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (l < 0) return;
  socklen_t len;
  const sockaddr_un a = ServiceAddress(getpid(), &len);
  if (bind(l, reinterpret_cast<const sockaddr*>(&a), len) != 0 || listen(l, 8) != 0) {
    close(l);
    return;
  }
  std::thread(ServiceLoop, l).detach();
  while (g_restore_tid.load() == 0) std::this_thread::yield();  // its id is known on return
}

}  // namespace gandiva::standin

using namespace gandiva::standin;

#define GD_STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

GD_STANDIN_EXPORT CUresult cuCheckpointProcessGetState(int pid, CUprocessState* state) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!state) return CUDA_ERROR_INVALID_VALUE;
  Reply reply;
  if (const CUresult r = Ask(pid, {kGetState, 0}, &reply); r != CUDA_SUCCESS) return r;
  *state = static_cast<CUprocessState>(reply.value);
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuCheckpointProcessGetRestoreThreadId(int pid, int* tid) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!tid) return CUDA_ERROR_INVALID_VALUE;
  Reply reply;
  if (const CUresult r = Ask(pid, {kRestoreTid, 0}, &reply); r != CUDA_SUCCESS) return r;
  if (reply.value == 0) return CUDA_ERROR_NOT_SUPPORTED;  // no checkpoint thread started
  *tid = reply.value;
  return CUDA_SUCCESS;
}

GD_STANDIN_EXPORT CUresult cuCheckpointProcessLock(int pid, CUcheckpointLockArgs* args) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (args && (args->reserved0 || !AllZero(args->reserved1))) return CUDA_ERROR_INVALID_VALUE;
  Reply reply;
  return Ask(pid, {kLock, args ? args->timeoutMs : 0u}, &reply);
}

GD_STANDIN_EXPORT CUresult cuCheckpointProcessCheckpoint(int pid,
                                                         CUcheckpointCheckpointArgs* args) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (args && !AllZero(args->reserved)) return CUDA_ERROR_INVALID_VALUE;
  Reply reply;
  return Ask(pid, {kCheckpoint, 0}, &reply);
}

GD_STANDIN_EXPORT CUresult cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs* args) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (args) {
    if (!AllZero(args->reserved) || args->reserved1) return CUDA_ERROR_INVALID_VALUE;
    if (args->gpuPairsCount > 0 && !args->gpuPairs) return CUDA_ERROR_INVALID_VALUE;
    // One GPU: a pair may only name it on both sides (every checkpointed GPU listed).
    for (unsigned i = 0; i < args->gpuPairsCount; ++i)
      if (std::memcmp(args->gpuPairs[i].oldUuid.bytes, kStandinUuidBytes, 16) != 0 ||
          std::memcmp(args->gpuPairs[i].newUuid.bytes, kStandinUuidBytes, 16) != 0)
        return CUDA_ERROR_INVALID_VALUE;
  }
  Reply reply;
  return Ask(pid, {kRestore, 0}, &reply);
}

GD_STANDIN_EXPORT CUresult cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs* args) {
  if (!Initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (args && !AllZero(args->reserved)) return CUDA_ERROR_INVALID_VALUE;
  Reply reply;
  return Ask(pid, {kUnlock, 0}, &reply);
}
