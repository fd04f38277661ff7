// Device specs from the command line.
#include "devices/devices.h"

#include <gtest/gtest.h>

namespace gandiva::controller {
namespace {

TEST(DeviceSpecTest, ParsesKindsAndCounts) {
  auto d = ParseDeviceSpec("cpu:2,gpu:1");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->size(), 3u);
  EXPECT_EQ((*d)[0].name, "cpu0");
  EXPECT_EQ((*d)[1].name, "cpu1");
  EXPECT_EQ((*d)[2].name, "gpu0");
  EXPECT_EQ((*d)[2].kind, protocol::DeviceKind::kGpu);
}

// A configured GPU is named to its jobs by its ordinal among the GPUs
// gandivad may see: its own CUDA_VISIBLE_DEVICES, when it has one.
TEST(DeviceSpecTest, GpusGetTheirCudaVisibleIds) {
  auto plain = ParseDeviceSpec("cpu:1,gpu:2");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)[0].cuda_visible_id, "");
  EXPECT_EQ((*plain)[1].cuda_visible_id, "0");
  EXPECT_EQ((*plain)[2].cuda_visible_id, "1");
  auto under_slurm = ParseDeviceSpec("gpu:2", "4,GPU-abc");
  ASSERT_TRUE(under_slurm.ok());
  EXPECT_EQ((*under_slurm)[0].cuda_visible_id, "4");
  EXPECT_EQ((*under_slurm)[1].cuda_visible_id, "GPU-abc");
  EXPECT_EQ(ParseDeviceSpec("gpu:3", "4,6").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDeviceSpec("gpu:1", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseDeviceSpec("cpu:2", "").ok()) << "CPU devices need no GPU";
}

TEST(DeviceSpecTest, CudaVisibleDevicesOnlyForGpus) {
  auto d = ParseDeviceSpec("gpu:2,cpu:1");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(CudaVisibleDevices({&(*d)[1], &(*d)[0]}), "1,0");
  EXPECT_EQ(CudaVisibleDevices({&(*d)[0], &(*d)[2]}), "") << "a CPU device among them";
  EXPECT_EQ(CudaVisibleDevices({&(*d)[2]}), "");
  EXPECT_EQ(CudaVisibleDevices({nullptr}), "");
  EXPECT_EQ(CudaVisibleId(0, nullptr), "0");
  EXPECT_EQ(CudaVisibleId(2, "1,2"), "");
}

TEST(DeviceSpecTest, RejectsMalformedSpecs) {
  for (const char* bad : {"", "cpu", "cpu:0", "cpu:x", "tpu:1", "cpu:1,", "cpu:65", "cpu:1x"})
    EXPECT_EQ(ParseDeviceSpec(bad).status().code(), StatusCode::kInvalidArgument) << bad;
}

}  // namespace
}  // namespace gandiva::controller
