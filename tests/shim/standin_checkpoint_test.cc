// The stand-in driver's checkpoint API (cuCheckpointProcess*) keeps the documented
// state machine, refuses what the driver refuses, blocks the process's calls while it
// is locked, gives back every byte of device memory at checkpoint and brings it back
// at the same addresses at restore, for the process itself and for another process.
// Calls the stand-in directly (no shim).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kPlainBytes = 3 << 20;
constexpr size_t kVmmBytes = 4 << 20;  // two granules

class StandinCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    // The stand-in's device accounting, through its counters file (cuMemGetInfo fails
    // while checkpointed, as on NVIDIA's driver). One file per process: the stand-in
    // maps it once.
    const std::string path =
        ::testing::TempDir() + "gd_standin_ckpt_" + std::to_string(getpid()) + ".counters";
    setenv("GD_STANDIN_COUNTERS", path.c_str(), 0);
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    const int fd = open(getenv("GD_STANDIN_COUNTERS"), O_RDONLY);
    ASSERT_GE(fd, 0);
    counters_ = static_cast<const uint64_t*>(mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0));
    close(fd);
    ASSERT_NE(static_cast<const void*>(counters_), MAP_FAILED);
    ASSERT_EQ(cuDeviceGet(&dev_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, dev_), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    pid_ = getpid();
  }

  // The stand-in's Counters: launches, device_bytes, physical_live (64 bits each).
  size_t DeviceUsed() { return __atomic_load_n(&counters_[1], __ATOMIC_ACQUIRE); }

  CUprocessState State(int pid) {
    CUprocessState s = CU_PROCESS_STATE_FAILED;
    EXPECT_EQ(cuCheckpointProcessGetState(pid, &s), CUDA_SUCCESS);
    return s;
  }

  // A plain allocation and a VMM one (reserve, create, map, set access), both filled
  // with a pattern; `pattern` gets a copy.
  void MakeMemory(std::vector<unsigned char>* pattern) {
    ASSERT_EQ(cuMemAlloc_v2(&plain_, kPlainBytes), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAddressReserve(&vmm_, kVmmBytes, 0, 0, 0), CUDA_SUCCESS);
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    ASSERT_EQ(cuMemCreate(&handle_, kVmmBytes, &prop, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuMemMap(vmm_, kVmmBytes, 0, handle_, 0), CUDA_SUCCESS);
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ASSERT_EQ(cuMemSetAccess(vmm_, kVmmBytes, &access, 1), CUDA_SUCCESS);
    pattern->resize(kPlainBytes + kVmmBytes);
    unsigned x = 12345;
    for (unsigned char& b : *pattern)
      b = static_cast<unsigned char>((x = x * 1103515245 + 12345) >> 16);
    ASSERT_EQ(cuMemcpyHtoD_v2(plain_, pattern->data(), kPlainBytes), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyHtoD_v2(vmm_, pattern->data() + kPlainBytes, kVmmBytes), CUDA_SUCCESS);
  }

  bool MemoryEquals(const std::vector<unsigned char>& pattern) {
    std::vector<unsigned char> got(pattern.size());
    if (cuMemcpyDtoH_v2(got.data(), plain_, kPlainBytes) != CUDA_SUCCESS) return false;
    if (cuMemcpyDtoH_v2(got.data() + kPlainBytes, vmm_, kVmmBytes) != CUDA_SUCCESS) return false;
    return got == pattern;
  }

  void FreeMemory() {
    EXPECT_EQ(cuMemUnmap(vmm_, kVmmBytes), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(handle_), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAddressFree(vmm_, kVmmBytes), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree_v2(plain_), CUDA_SUCCESS);
  }

  CUdevice dev_;
  CUcontext ctx_;
  int pid_ = 0;
  const uint64_t* counters_ = nullptr;
  CUdeviceptr plain_ = 0, vmm_ = 0;
  CUmemGenericAllocationHandle handle_ = 0;
};

TEST_F(StandinCheckpoint, StateMachineRefusesEveryCallOutOfOrder) {
  EXPECT_EQ(State(pid_), CU_PROCESS_STATE_RUNNING);
  EXPECT_EQ(cuCheckpointProcessCheckpoint(pid_, nullptr), CUDA_ERROR_ILLEGAL_STATE);
  EXPECT_EQ(cuCheckpointProcessRestore(pid_, nullptr), CUDA_ERROR_ILLEGAL_STATE);
  EXPECT_EQ(cuCheckpointProcessUnlock(pid_, nullptr), CUDA_ERROR_ILLEGAL_STATE);

  ASSERT_EQ(cuCheckpointProcessLock(pid_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(State(pid_), CU_PROCESS_STATE_LOCKED);
  EXPECT_EQ(cuCheckpointProcessLock(pid_, nullptr), CUDA_ERROR_ILLEGAL_STATE);
  EXPECT_EQ(cuCheckpointProcessRestore(pid_, nullptr), CUDA_ERROR_ILLEGAL_STATE);

  ASSERT_EQ(cuCheckpointProcessCheckpoint(pid_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(State(pid_), CU_PROCESS_STATE_CHECKPOINTED);
  EXPECT_EQ(cuCheckpointProcessLock(pid_, nullptr), CUDA_ERROR_ILLEGAL_STATE);
  EXPECT_EQ(cuCheckpointProcessCheckpoint(pid_, nullptr), CUDA_ERROR_ILLEGAL_STATE);
  EXPECT_EQ(cuCheckpointProcessUnlock(pid_, nullptr), CUDA_ERROR_ILLEGAL_STATE);

  ASSERT_EQ(cuCheckpointProcessRestore(pid_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(State(pid_), CU_PROCESS_STATE_LOCKED);  // restore leaves it locked
  ASSERT_EQ(cuCheckpointProcessUnlock(pid_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(State(pid_), CU_PROCESS_STATE_RUNNING);
}

TEST_F(StandinCheckpoint, RefusesReservedFieldsUnknownPidsAndNullResults) {
  CUcheckpointLockArgs lock{};
  lock.reserved0 = 1;
  EXPECT_EQ(cuCheckpointProcessLock(pid_, &lock), CUDA_ERROR_INVALID_VALUE);
  lock = {};
  lock.reserved1[6] = 1;
  EXPECT_EQ(cuCheckpointProcessLock(pid_, &lock), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(State(pid_), CU_PROCESS_STATE_RUNNING);
  CUcheckpointUnlockArgs unlock{};
  unlock.reserved[0] = 1;
  EXPECT_EQ(cuCheckpointProcessUnlock(pid_, &unlock), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCheckpointProcessGetState(pid_, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCheckpointProcessGetRestoreThreadId(pid_, nullptr), CUDA_ERROR_INVALID_VALUE);

  // A live process that never initialised CUDA, and a pid that names nothing.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  CUprocessState s;
  // As driver 580 answered on an H200: a process without CUDA is "not initialized", a
  // pid naming no process an operating-system error.
  EXPECT_EQ(cuCheckpointProcessGetState(child, &s), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cuCheckpointProcessLock(child, nullptr), CUDA_ERROR_NOT_INITIALIZED);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(cuCheckpointProcessGetState(child, &s), CUDA_ERROR_OPERATING_SYSTEM);
  EXPECT_EQ(cuCheckpointProcessLock(-1, nullptr), CUDA_ERROR_OPERATING_SYSTEM);

  // Restore onto another GPU: the stand-in has only its own.
  ASSERT_EQ(cuCheckpointProcessLock(pid_, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCheckpointProcessCheckpoint(pid_, nullptr), CUDA_SUCCESS);
  CUcheckpointGpuPair pair{};
  CUcheckpointRestoreArgs restore{};
  restore.gpuPairs = &pair;
  restore.gpuPairsCount = 1;
  EXPECT_EQ(cuCheckpointProcessRestore(pid_, &restore), CUDA_ERROR_INVALID_VALUE);
  restore.gpuPairs = nullptr;
  EXPECT_EQ(cuCheckpointProcessRestore(pid_, &restore), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(State(pid_), CU_PROCESS_STATE_CHECKPOINTED);
  ASSERT_EQ(cuCheckpointProcessRestore(pid_, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCheckpointProcessUnlock(pid_, nullptr), CUDA_SUCCESS);
}

TEST_F(StandinCheckpoint, ManagedMemoryIsNotCheckpointedAndTheProcessStaysLocked) {
  // As driver 580 answered on an H200: lock succeeds, checkpoint does not.
  CUdeviceptr managed = 0;
  ASSERT_EQ(cuMemAllocManaged(&managed, 1 << 20, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuCheckpointProcessLock(pid_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuCheckpointProcessCheckpoint(pid_, nullptr), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(State(pid_), CU_PROCESS_STATE_LOCKED);
  EXPECT_EQ(DeviceUsed(), 1u << 20);  // nothing moved
  ASSERT_EQ(cuCheckpointProcessUnlock(pid_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(managed), CUDA_SUCCESS);
  // Once it is freed, the process checkpoints again.
  ASSERT_EQ(cuCheckpointProcessLock(pid_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuCheckpointProcessCheckpoint(pid_, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCheckpointProcessRestore(pid_, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCheckpointProcessUnlock(pid_, nullptr), CUDA_SUCCESS);
}

TEST_F(StandinCheckpoint, CheckpointGivesBackAllDeviceMemoryAndRestoreBringsEveryByteBack) {
  std::vector<unsigned char> pattern;
  ASSERT_NO_FATAL_FAILURE(MakeMemory(&pattern));
  const size_t used = DeviceUsed();
  ASSERT_EQ(used, kPlainBytes + kVmmBytes);

  ASSERT_EQ(cuCheckpointProcessLock(pid_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(DeviceUsed(), used);  // locking moves nothing
  ASSERT_EQ(cuCheckpointProcessCheckpoint(pid_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(DeviceUsed(), 0u);
  size_t free_bytes, total;  // answered at once, refused (driver 580)
  EXPECT_EQ(cuMemGetInfo_v2(&free_bytes, &total), CUDA_ERROR_OPERATING_SYSTEM);

  // Restore needs room for all of it: none, and it stays checkpointed.
  const char* saved = std::getenv("GD_STANDIN_DEVICE_MEM");
  const std::string before = saved ? saved : "";
  setenv("GD_STANDIN_DEVICE_MEM", std::to_string(kPlainBytes + kVmmBytes - 1).c_str(), 1);
  EXPECT_EQ(cuCheckpointProcessRestore(pid_, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(State(pid_), CU_PROCESS_STATE_CHECKPOINTED);
  EXPECT_EQ(DeviceUsed(), 0u);
  if (saved) {
    setenv("GD_STANDIN_DEVICE_MEM", before.c_str(), 1);
  } else {
    unsetenv("GD_STANDIN_DEVICE_MEM");
  }

  ASSERT_EQ(cuCheckpointProcessRestore(pid_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(DeviceUsed(), used);
  ASSERT_EQ(cuCheckpointProcessUnlock(pid_, nullptr), CUDA_SUCCESS);
  // The same addresses (the program's own pointers), every byte, the handle still valid.
  EXPECT_TRUE(MemoryEquals(pattern));
  EXPECT_EQ(std::memcmp(reinterpret_cast<void*>(vmm_), pattern.data() + kPlainBytes, kVmmBytes), 0);
  FreeMemory();
  EXPECT_EQ(DeviceUsed(), 0u);
}

TEST_F(StandinCheckpoint, LockCompletesWorkInFlightAndBlocksCallsUntilUnlocked) {
  std::vector<unsigned char> pattern;
  ASSERT_NO_FATAL_FAILURE(MakeMemory(&pattern));
  // An asynchronous copy from pinned memory, not waited for: lock completes it.
  void* pinned = nullptr;
  ASSERT_EQ(cuMemHostAlloc(&pinned, 4096, 0), CUDA_SUCCESS);
  std::memset(pinned, 0x5a, 4096);
  CUstream stream;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoDAsync_v2(plain_, pinned, 4096, stream), CUDA_SUCCESS);
  EXPECT_NE(*reinterpret_cast<unsigned char*>(plain_), 0x5a);  // not run yet
  ASSERT_EQ(cuCheckpointProcessLock(pid_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(*reinterpret_cast<unsigned char*>(plain_), 0x5a);
  std::memset(pattern.data(), 0x5a, 4096);

  // Another thread's calls wait, through checkpoint and restore, until the unlock.
  std::atomic<int> done{0};
  CUdeviceptr more = 0;
  std::thread other([&] {
    cuCtxSetCurrent(ctx_);
    EXPECT_EQ(cuMemAlloc_v2(&more, 1 << 20), CUDA_SUCCESS);
    done.store(1);
  });
  ASSERT_EQ(cuCheckpointProcessCheckpoint(pid_, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCheckpointProcessRestore(pid_, nullptr), CUDA_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(done.load(), 0);
  EXPECT_EQ(DeviceUsed(), kPlainBytes + kVmmBytes);
  ASSERT_EQ(cuCheckpointProcessUnlock(pid_, nullptr), CUDA_SUCCESS);
  other.join();
  EXPECT_EQ(done.load(), 1);
  EXPECT_TRUE(MemoryEquals(pattern));
  EXPECT_EQ(cuMemFree_v2(more), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
  FreeMemory();
}

TEST_F(StandinCheckpoint, LockTimesOutWhileACallIsInFlightAndLeavesTheProcessRunning) {
  // ~0.8 s of modelled kernel work, and a thread waiting for it inside a call. (The
  // stand-in reads the kernel time at its first launch: ctest runs each test alone.)
  setenv("GD_STANDIN_KERNEL_NS", "5000000", 1);
  std::ifstream in(GD_CUBIN, std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CUmodule module;
  CUfunction scale;
  ASSERT_EQ(cuModuleLoadData(&module, image.data()), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&scale, module, "gd_scale"), CUDA_SUCCESS);
  CUdeviceptr x = 0;
  ASSERT_EQ(cuMemAlloc_v2(&x, 4096), CUDA_SUCCESS);
  float a = 2.0f;
  int n = 1024;
  void* args[] = {&x, &a, &n};
  CUstream stream;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  for (int i = 0; i < 160; ++i)  // 160 x GD_STANDIN_KERNEL_NS (5 ms here)
    ASSERT_EQ(cuLaunchKernel(scale, 4, 1, 1, 256, 1, 1, 0, stream, args, nullptr), CUDA_SUCCESS);
  std::atomic<bool> synced{false}, calling{false};
  std::thread waiter([&] {
    cuCtxSetCurrent(ctx_);
    calling.store(true);
    EXPECT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
    synced.store(true);
  });
  while (!calling.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // it is in its call now
  ASSERT_FALSE(synced.load());                                  // 0.7 s of work left
  CUcheckpointLockArgs timeout{};
  timeout.timeoutMs = 10;
  EXPECT_EQ(cuCheckpointProcessLock(pid_, &timeout), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(State(pid_), CU_PROCESS_STATE_RUNNING);  // left running, as documented
  // Without a timeout the lock waits for the call (and the work) to finish.
  ASSERT_EQ(cuCheckpointProcessLock(pid_, nullptr), CUDA_SUCCESS);
  // Its call has returned (before the unlock); the thread sets the flag just after.
  for (int i = 0; i < 2000 && !synced.load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(synced.load()) << "the call in flight did not return while locked";
  ASSERT_EQ(cuCheckpointProcessUnlock(pid_, nullptr), CUDA_SUCCESS);
  waiter.join();
  EXPECT_EQ(cuMemFree_v2(x), CUDA_SUCCESS);
}

TEST_F(StandinCheckpoint, AnotherProcessIsCheckpointedAndRestoredByPid) {
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The job: its memory, then it waits while the parent checkpoints it.
    char c = 0;
    std::vector<unsigned char> pattern;
    MakeMemory(&pattern);
    if (cuInit(0) != CUDA_SUCCESS || DeviceUsed() != kPlainBytes + kVmmBytes) _exit(2);
    c = 'r';
    if (write(to_parent[1], &c, 1) != 1) _exit(3);
    if (read(to_child[0], &c, 1) != 1) _exit(4);  // checkpointed now
    c = DeviceUsed() == 0 ? 'z' : 'n';
    if (write(to_parent[1], &c, 1) != 1) _exit(5);
    if (read(to_child[0], &c, 1) != 1) _exit(6);  // restored and unlocked
    _exit(MemoryEquals(pattern) && DeviceUsed() == kPlainBytes + kVmmBytes ? 0 : 7);
  }
  char c = 0;
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  EXPECT_EQ(State(child), CU_PROCESS_STATE_RUNNING);
  int tid = 0;
  EXPECT_EQ(cuCheckpointProcessGetRestoreThreadId(child, &tid), CUDA_SUCCESS);
  EXPECT_GT(tid, 0);
  EXPECT_NE(tid, child);  // a thread of its own, not the main thread
  ASSERT_EQ(cuCheckpointProcessLock(child, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCheckpointProcessCheckpoint(child, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(State(child), CU_PROCESS_STATE_CHECKPOINTED);
  EXPECT_EQ(State(pid_), CU_PROCESS_STATE_RUNNING);  // this process is not touched
  ASSERT_EQ(write(to_child[1], "c", 1), 1);
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  EXPECT_EQ(c, 'z');  // the child's device memory was all given back
  ASSERT_EQ(cuCheckpointProcessRestore(child, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCheckpointProcessUnlock(child, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(write(to_child[1], "u", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
