// The device plugin's rules without gRPC: share ids, preferred allocations by
// load, one device per container, and health from gandivad and from marks.
#include "shares.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "node_view.h"

namespace gandiva::k8s {
namespace {

std::vector<DeviceView> TwoGpus(double load0, double load1) {
  return {{"gpu0", true, true, "", load0}, {"gpu1", true, true, "", load1}};
}

std::vector<std::string> AllShares(const std::vector<DeviceView>& devices, int n) {
  std::vector<std::string> ids;
  for (const ShareState& s : ListShares(devices, n)) ids.push_back(s.id);
  return ids;
}

TEST(SharesTest, IdsNameTheirDevice) {
  EXPECT_EQ(ShareId("gpu0", 3), "gpu0-s3");
  EXPECT_EQ(*DeviceOfShare("gpu0-s3"), "gpu0");
  EXPECT_EQ(*DeviceOfShare("my-dev-s12"), "my-dev");
  for (const char* bad : {"gpu0", "gpu0-s", "gpu0-sx", "-s1", "gpu0-s1x", "gpu0-s-1"})
    EXPECT_FALSE(DeviceOfShare(bad).ok()) << bad;
}

TEST(SharesTest, ListsEveryShareWithItsDevicesHealth) {
  auto devices = TwoGpus(0, 0);
  devices[1].healthy = false;
  const auto shares = ListShares(devices, 3);
  ASSERT_EQ(shares.size(), 6u);
  EXPECT_EQ(shares[0].id, "gpu0-s0");
  EXPECT_TRUE(shares[2].healthy);
  EXPECT_EQ(shares[3].id, "gpu1-s0");
  EXPECT_FALSE(shares[5].healthy);
}

TEST(SharesTest, PrefersTheLeastLoadedDevice) {
  const auto devices = TwoGpus(2.3, 1.0);
  const auto chosen = PreferredShares(AllShares(devices, 4), {}, 1, devices);
  ASSERT_EQ(chosen.size(), 1u);
  EXPECT_EQ(*DeviceOfShare(chosen[0]), "gpu1");
  // Measured slowdown breaks a tie in job counts (ReadNode adds it to the count).
  const auto tied = TwoGpus(1.1, 1.4);
  EXPECT_EQ(*DeviceOfShare(PreferredShares(AllShares(tied, 4), {}, 1, tied)[0]), "gpu0");
}

TEST(SharesTest, KeepsAContainerOnOneDeviceWhenItFits) {
  const auto devices = TwoGpus(0.0, 1.0);
  // gpu0 has one share left, gpu1 three: two shares go to gpu1 together.
  const std::vector<std::string> available = {"gpu0-s3", "gpu1-s1", "gpu1-s2", "gpu1-s3"};
  const auto chosen = PreferredShares(available, {}, 2, devices);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(*DeviceOfContainer(chosen, devices), "gpu1");
}

TEST(SharesTest, MustIncludeComesFirstAndPullsItsDevice) {
  const auto devices = TwoGpus(0.0, 5.0);
  const auto chosen = PreferredShares(AllShares(devices, 4), {"gpu1-s2"}, 2, devices);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0], "gpu1-s2");
  EXPECT_EQ(*DeviceOfShare(chosen[1]), "gpu1");
}

TEST(SharesTest, SkipsUnhealthyDevicesAndStopsShort) {
  auto devices = TwoGpus(0.0, 1.0);
  devices[0].healthy = false;
  const auto chosen = PreferredShares({"gpu0-s0", "gpu0-s1", "gpu1-s0"}, {}, 2, devices);
  EXPECT_EQ(chosen, std::vector<std::string>{"gpu1-s0"});
}

TEST(SharesTest, AContainerGetsOneDevice) {
  const auto devices = TwoGpus(0, 0);
  EXPECT_EQ(*DeviceOfContainer({"gpu1-s0", "gpu1-s3"}, devices), "gpu1");
  EXPECT_EQ(DeviceOfContainer({"gpu0-s0", "gpu1-s0"}, devices).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DeviceOfContainer({"gpu7-s0"}, devices).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(DeviceOfContainer({}, devices).ok());
}

TEST(NodeViewTest, UnreachableGandivadMakesEveryKnownDeviceUnhealthy) {
  const auto known = TwoGpus(0, 0);
  const auto out = Advertised(known, Unavailable("no daemon"), "");
  ASSERT_EQ(out.size(), 2u);
  for (const DeviceView& d : out) {
    EXPECT_FALSE(d.healthy);
    EXPECT_NE(d.why_unhealthy.find("no daemon"), std::string::npos);
  }
  // Back: healthy again.
  const auto back = Advertised(out, TwoGpus(0, 0), "");
  EXPECT_TRUE(back[0].healthy && back[1].healthy);
}

TEST(NodeViewTest, ADeviceGandivadStopsListingStaysListedUnhealthy) {
  const auto out = Advertised(TwoGpus(0, 0), std::vector<DeviceView>{TwoGpus(0, 0)[0]}, "");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].healthy);
  EXPECT_EQ(out[1].name, "gpu1");
  EXPECT_FALSE(out[1].healthy);
}

TEST(NodeViewTest, AMarkFileMakesItsDeviceUnhealthyUntilRemoved) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("gd_health_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "gpu1") << "Xid 79\n";
  auto out = Advertised({}, TwoGpus(0, 0), dir.string());
  EXPECT_TRUE(out[0].healthy);
  EXPECT_FALSE(out[1].healthy);
  EXPECT_NE(out[1].why_unhealthy.find("Xid 79"), std::string::npos);
  std::filesystem::remove(dir / "gpu1");
  out = Advertised(out, TwoGpus(0, 0), dir.string());
  EXPECT_TRUE(out[1].healthy);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gandiva::k8s
