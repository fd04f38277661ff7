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

TEST(DeviceSpecTest, RejectsMalformedSpecs) {
  for (const char* bad : {"", "cpu", "cpu:0", "cpu:x", "tpu:1", "cpu:1,", "cpu:65", "cpu:1x"})
    EXPECT_EQ(ParseDeviceSpec(bad).status().code(), StatusCode::kInvalidArgument) << bad;
}

}  // namespace
}  // namespace gandiva::controller
