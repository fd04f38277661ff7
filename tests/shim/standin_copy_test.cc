// The stand-in driver's asynchronous copies are as loose as NVIDIA's driver allows
// and no looser: a copy with pinned host memory is done only once the host waited
// for it (stream, event recorded after it, context), so code that reads a pinned
// destination or reuses a pinned source too early sees it fail. Calls the stand-in
// directly (no shim).
#include <gtest/gtest.h>

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include <cstring>
#include <thread>
#include <vector>

namespace {

class StandinCopy : public ::testing::Test {
 protected:
  static constexpr size_t kBytes = 2 << 20;

  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDeviceGet(&dev_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, dev_), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc_v2(&dev_buf_, kBytes), CUDA_SUCCESS);
    ASSERT_EQ(cuMemHostAlloc(&pinned_, kBytes, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cuEventCreate(&event_, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  }
  void TearDown() override {
    cuCtxSynchronize();
    cuMemFreeHost(pinned_);
    cuMemFree_v2(dev_buf_);
  }

  unsigned char DeviceByte(size_t at) {
    unsigned char b = 0;
    EXPECT_EQ(cuMemcpyDtoH_v2(&b, dev_buf_ + at, 1), CUDA_SUCCESS);
    return b;
  }

  CUdevice dev_;
  CUcontext ctx_;
  CUdeviceptr dev_buf_ = 0;
  void* pinned_ = nullptr;
  CUstream stream_;
  CUevent event_;
};

TEST_F(StandinCopy, DeviceToPinnedIsDoneOnlyOnceTheEventAfterItIsWaitedFor) {
  ASSERT_EQ(cuMemsetD8_v2(dev_buf_, 0xab, kBytes), CUDA_SUCCESS);
  std::memset(pinned_, 0, kBytes);
  CUevent before;
  ASSERT_EQ(cuEventCreate(&before, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(before, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoHAsync_v2(pinned_, dev_buf_, kBytes, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(event_, stream_), CUDA_SUCCESS);
  EXPECT_EQ(static_cast<unsigned char*>(pinned_)[0], 0) << "an async copy to pinned memory ran "
                                                           "before anyone waited for it";
  ASSERT_EQ(cuEventSynchronize(before), CUDA_SUCCESS);  // recorded before the copy
  EXPECT_EQ(static_cast<unsigned char*>(pinned_)[kBytes - 1], 0);
  ASSERT_EQ(cuEventSynchronize(event_), CUDA_SUCCESS);
  EXPECT_EQ(static_cast<unsigned char*>(pinned_)[0], 0xab);
  EXPECT_EQ(static_cast<unsigned char*>(pinned_)[kBytes - 1], 0xab);
  cuEventDestroy_v2(before);
}

TEST_F(StandinCopy, APinnedSourceReusedBeforeTheCopyIsDoneIsWhatTheDeviceGets) {
  std::memset(pinned_, 1, kBytes);
  ASSERT_EQ(cuMemcpyHtoDAsync_v2(dev_buf_, pinned_, kBytes, stream_), CUDA_SUCCESS);
  std::memset(pinned_, 2, kBytes);  // too early: the copy has not run
  ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
  EXPECT_EQ(DeviceByte(0), 2);
}

TEST_F(StandinCopy, PageableMemoryIsStagedOrCopiedAtOnce) {
  std::vector<unsigned char> host(kBytes, 7);
  ASSERT_EQ(cuMemcpyHtoDAsync_v2(dev_buf_, host.data(), kBytes, stream_), CUDA_SUCCESS);
  std::fill(host.begin(), host.end(), 9);  // the driver staged the source already
  ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
  EXPECT_EQ(DeviceByte(kBytes / 2), 7);
  // Device -> pageable returns once the copy is done.
  ASSERT_EQ(cuMemcpyDtoHAsync_v2(host.data(), dev_buf_, kBytes, stream_), CUDA_SUCCESS);
  EXPECT_EQ(host[kBytes - 1], 7);
}

TEST_F(StandinCopy, TheLegacyStreamDoesNotWaitForANonBlockingStream) {
  ASSERT_EQ(cuMemsetD8_v2(dev_buf_, 0, kBytes), CUDA_SUCCESS);
  std::memset(pinned_, 5, kBytes);
  ASSERT_EQ(cuMemcpyHtoDAsync_v2(dev_buf_, pinned_, kBytes, stream_), CUDA_SUCCESS);
  EXPECT_EQ(DeviceByte(0), 0);  // a synchronous copy on the legacy stream
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(DeviceByte(0), 5);
  // A blocking stream's copies are waited for by the legacy stream.
  CUstream blocking;
  ASSERT_EQ(cuStreamCreate(&blocking, 0), CUDA_SUCCESS);
  std::memset(pinned_, 6, kBytes);
  ASSERT_EQ(cuMemcpyHtoDAsync_v2(dev_buf_, pinned_, kBytes, blocking), CUDA_SUCCESS);
  EXPECT_EQ(DeviceByte(0), 6);
}

TEST_F(StandinCopy, PinnedMemoryNeedsAContextAndKnownFlags) {
  void* p = nullptr;
  EXPECT_EQ(cuMemHostAlloc(&p, 4096, 0x80), CUDA_ERROR_INVALID_VALUE);
  CUresult no_context = CUDA_SUCCESS;
  std::thread([&] { no_context = cuMemHostAlloc(&p, 4096, 0); }).join();
  EXPECT_EQ(no_context, CUDA_ERROR_INVALID_CONTEXT);
  CUstream s;
  EXPECT_EQ(cuStreamCreate(&s, 0x4), CUDA_ERROR_INVALID_VALUE);
  CUevent e;
  EXPECT_EQ(cuEventCreate(&e, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
  int not_a_stream = 0;
  EXPECT_EQ(cuMemcpyDtoHAsync_v2(pinned_, dev_buf_, 16, reinterpret_cast<CUstream>(&not_a_stream)),
            CUDA_ERROR_INVALID_HANDLE);
}

// Device memory unmapped while a copy from it is still queued: the copy faults the
// context when the stream reaches it (as on a GPU), it does not read freed memory.
TEST_F(StandinCopy, UnmappingBeforeTheCopyRanFaultsTheContext) {
  auto fault = [this] {
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    const size_t size = 2 << 20;
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (cuMemAddressReserve(&va, size, 0, 0, 0) || cuMemCreate(&h, size, &prop, 0) ||
        cuMemMap(va, size, 0, h, 0) || cuMemSetAccess(va, size, &access, 1) || cuMemRelease(h))
      std::_Exit(1);
    if (cuMemcpyDtoHAsync_v2(pinned_, va, size, stream_) != CUDA_SUCCESS) std::_Exit(1);
    if (cuMemUnmap(va, size) != CUDA_SUCCESS) std::_Exit(1);
    std::_Exit(cuStreamSynchronize(stream_) == CUDA_ERROR_ILLEGAL_ADDRESS ? 42 : 2);
  };
  EXPECT_EXIT(fault(), ::testing::ExitedWithCode(42), "");
}

TEST_F(StandinCopy, AsyncMemsetsAreStreamOrderedAndCheckedAsTheDriverChecks) {
  ASSERT_EQ(cuMemsetD8_v2(dev_buf_, 0, kBytes), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD8Async(dev_buf_, 0x5a, 64, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32Async(dev_buf_ + 64, 0x01020304u, 4, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
  EXPECT_EQ(DeviceByte(0), 0x5a);
  EXPECT_EQ(DeviceByte(63), 0x5a);
  EXPECT_EQ(DeviceByte(64), 0x04);  // little-endian words
  EXPECT_EQ(DeviceByte(80), 0x00);  // four words, no more
  int not_a_stream = 0;
  EXPECT_EQ(cuMemsetD8Async(dev_buf_, 1, 16, reinterpret_cast<CUstream>(&not_a_stream)),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemsetD8Async(dev_buf_ + kBytes - 8, 1, 16, stream_), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cuMemsetD32Async(dev_buf_ + 2, 1, 4, stream_), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
