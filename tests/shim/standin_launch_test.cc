// The stand-in driver refuses the launches NVIDIA's driver refuses (cuLaunchKernel
// documentation and the sm_90 limits), so that a test program that passes on the
// stand-in launches correctly on a GPU too. Calls the stand-in directly (no shim).
#include <gtest/gtest.h>

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <sys/wait.h>

#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

namespace {

class StandinLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDeviceGet(&dev_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, dev_), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    std::ifstream in(GD_CUBIN, std::ios::binary);
    image_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    ASSERT_EQ(cuModuleLoadData(&module_, image_.data()), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&scale_, module_, "gd_scale"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&axpy_, module_, "gd_axpy"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&reduce_, module_, "gd_reduce"), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc_v2(&x_, kN * 4), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc_v2(&out_, 4), CUDA_SUCCESS);
  }
  void TearDown() override {
    cuMemFree_v2(x_);
    cuMemFree_v2(out_);
  }

  CUresult Scale(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                 unsigned shared = 0, CUstream s = nullptr) {
    void* args[] = {&x_, &a_, &n_};
    return cuLaunchKernel(scale_, gx, gy, gz, bx, by, bz, shared, s, args, nullptr);
  }

  static constexpr int kN = 1024;
  CUdevice dev_;
  CUcontext ctx_;
  CUmodule module_;
  CUfunction scale_, axpy_, reduce_;
  CUdeviceptr x_ = 0, out_ = 0;
  float a_ = 2.0f;
  int n_ = kN;
  std::vector<char> image_;
};

TEST_F(StandinLaunch, AcceptsWellFormedLaunches) {
  EXPECT_EQ(Scale(4, 1, 1, 256, 1, 1), CUDA_SUCCESS);
  EXPECT_EQ(Scale(0x7fffffff, 65535, 65535, 1024, 1, 1), CUDA_SUCCESS);
  EXPECT_EQ(Scale(1, 1, 1, 16, 16, 4), CUDA_SUCCESS);
  void* axpy[] = {&out_, &x_, &a_, &n_};
  EXPECT_EQ(cuLaunchKernel(axpy_, 1, 1, 1, 1, 1, 1, 0, nullptr, axpy, nullptr), CUDA_SUCCESS);
  void* reduce[] = {&x_, &out_, &n_};
  EXPECT_EQ(cuLaunchKernel(reduce_, 1, 1, 1, 32, 1, 1, 0, nullptr, reduce, nullptr), CUDA_SUCCESS);
  CUlaunchConfig config = {};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 32;
  config.blockDimY = config.blockDimZ = 1;
  EXPECT_EQ(cuLaunchKernelEx(&config, reduce_, reduce, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
}

TEST_F(StandinLaunch, RefusesDimensionsOutsideTheLimits) {
  EXPECT_EQ(Scale(0, 1, 1, 32, 1, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Scale(1, 0, 1, 32, 1, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Scale(1, 1, 1, 0, 1, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Scale(1, 1, 1, 32, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Scale(0x80000000u, 1, 1, 32, 1, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Scale(1, 65536, 1, 32, 1, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Scale(1, 1, 65536, 32, 1, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Scale(1, 1, 1, 1025, 1, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Scale(1, 1, 1, 1, 1, 65), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Scale(1, 1, 1, 32, 32, 2), CUDA_ERROR_INVALID_VALUE);  // 2048 threads per block
}

TEST_F(StandinLaunch, DynamicSharedMemoryAbove48KiBNeedsTheOptIn) {
  EXPECT_EQ(Scale(1, 1, 1, 32, 1, 1, 48 << 10), CUDA_SUCCESS);
  EXPECT_EQ(Scale(1, 1, 1, 32, 1, 1, (48 << 10) + 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncSetAttribute(scale_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 96 << 10),
            CUDA_SUCCESS);
  EXPECT_EQ(Scale(1, 1, 1, 32, 1, 1, 96 << 10), CUDA_SUCCESS);
  EXPECT_EQ(cuFuncSetAttribute(scale_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 228 << 10),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(StandinLaunch, KernelParamsAndExtraAreExclusiveAndWellFormed) {
  void* args[] = {&x_, &a_, &n_};
  struct {
    CUdeviceptr x;
    float a;
    int n;
  } packed{x_, a_, n_};
  size_t size = sizeof(packed);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  EXPECT_EQ(cuLaunchKernel(scale_, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, extra), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(scale_, 1, 1, 1, 32, 1, 1, 0, nullptr, args, extra),
            CUDA_ERROR_INVALID_VALUE);
  // A kernel with parameters, given none.
  EXPECT_EQ(cuLaunchKernel(scale_, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  // kernelParams shorter than the kernel's parameter list (a null entry).
  void* short_args[] = {&x_, &a_, nullptr};
  EXPECT_EQ(cuLaunchKernel(scale_, 1, 1, 1, 32, 1, 1, 0, nullptr, short_args, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  // A buffer of the wrong size, a size without a buffer, an unknown key.
  size_t wrong = sizeof(packed) - 4;
  void* bad_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &wrong,
                      CU_LAUNCH_PARAM_END};
  EXPECT_EQ(cuLaunchKernel(scale_, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, bad_size),
            CUDA_ERROR_INVALID_VALUE);
  void* no_pointer[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  EXPECT_EQ(cuLaunchKernel(scale_, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, no_pointer),
            CUDA_ERROR_INVALID_VALUE);
  void* unknown[] = {reinterpret_cast<void*>(0x77), &size, CU_LAUNCH_PARAM_END};
  EXPECT_EQ(cuLaunchKernel(scale_, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, unknown),
            CUDA_ERROR_INVALID_VALUE);
  // cuLaunchKernelEx: a config is required, and attributes if it says it has some.
  EXPECT_EQ(cuLaunchKernelEx(nullptr, scale_, args, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUlaunchConfig config = {};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  config.numAttrs = 1;
  EXPECT_EQ(cuLaunchKernelEx(&config, scale_, args, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(StandinLaunch, NeedsALoadedFunctionAStreamAndAContext) {
  void* args[] = {&x_, &a_, &n_};
  EXPECT_EQ(cuLaunchKernel(nullptr, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  int not_a_function = 0;
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(&not_a_function), 1, 1, 1, 32, 1, 1, 0,
                           nullptr, args, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  int not_a_stream = 0;
  EXPECT_EQ(Scale(1, 1, 1, 32, 1, 1, 0, reinterpret_cast<CUstream>(&not_a_stream)),
            CUDA_ERROR_INVALID_HANDLE);
  CUstream s;
  ASSERT_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  EXPECT_EQ(Scale(1, 1, 1, 32, 1, 1, 0, s), CUDA_SUCCESS);
  EXPECT_EQ(Scale(1, 1, 1, 32, 1, 1, 0, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  CUresult no_context = CUDA_SUCCESS;
  std::thread([&] { no_context = Scale(1, 1, 1, 32, 1, 1); }).join();
  EXPECT_EQ(no_context, CUDA_ERROR_INVALID_CONTEXT);
  CUmodule other;
  CUfunction unloaded;
  ASSERT_EQ(cuModuleLoadData(&other, image_.data()), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&unloaded, other, "gd_scale"), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleUnload(other), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(unloaded, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
}

// A test kernel given a host pointer (here: kernelParams laid out for another
// kernel, as gd_shim_procaddr_app once did) is launched, and faults on the device:
// the next synchronisation, and every one after it, returns CUDA_ERROR_ILLEGAL_ADDRESS.
TEST_F(StandinLaunch, ATestKernelOutsideDeviceMemoryFaultsTheContext) {
  auto fault = [this] {
    void* wrong[] = {&x_, &a_, &n_};  // gd_scale's layout; gd_reduce's 2nd is float* out
    if (cuLaunchKernel(reduce_, 1, 1, 1, 32, 1, 1, 0, nullptr, wrong, nullptr) != CUDA_SUCCESS)
      std::_Exit(1);
    const bool sticky = cuCtxSynchronize() == CUDA_ERROR_ILLEGAL_ADDRESS &&
                        cuStreamSynchronize(nullptr) == CUDA_ERROR_ILLEGAL_ADDRESS;
    std::_Exit(sticky ? 42 : 2);
  };
  EXPECT_EXIT(fault(), ::testing::ExitedWithCode(42), "");
}

}  // namespace
