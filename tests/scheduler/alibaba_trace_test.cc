// The Alibaba 2023 task and node list readers: good rows, and bad rows named by line.
#include "cluster/alibaba_trace.h"

#include <gtest/gtest.h>

namespace gandiva::sched {
namespace {

constexpr const char* kTaskHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

TEST(AlibabaTraceTest, ReadsTasksOfEveryKind) {
  auto tasks = ParseAlibabaTasks(std::string(kTaskHeader) +
                                     "p0,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
                                     "p1,6000,12288,1,460,,LS,Running,427061,12902960,427061\n"
                                     "# a comment, then a blank line\n\n"
                                     "p2,20000,65536,0,0,,LS,Running,2759674,12902960,\n"
                                     "p3,64000,262144,8,1000,V100M32,BE,Failed,5,9,5\n",
                                 "pods.csv");
  ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
  ASSERT_EQ(tasks->size(), 4u);
  EXPECT_EQ((*tasks)[0].name, "p0");
  EXPECT_EQ((*tasks)[0].num_gpu, 1);
  EXPECT_EQ((*tasks)[0].gpu_milli, 1000);
  EXPECT_EQ((*tasks)[1].gpu_milli, 460);
  EXPECT_EQ((*tasks)[1].cpu_milli, 6000);
  EXPECT_EQ((*tasks)[1].memory_mib, 12288);
  EXPECT_DOUBLE_EQ((*tasks)[1].creation_time, 427061);
  EXPECT_EQ((*tasks)[2].num_gpu, 0);  // CPU only; its empty scheduled_time is not read
  EXPECT_EQ((*tasks)[3].num_gpu, 8);
  EXPECT_EQ((*tasks)[3].gpu_spec, "V100M32");
}

// The first bad row stops the read with FILE:LINE: why (lines count from 1,
// header, comments and blank lines included).
void ExpectTaskError(const std::string& row, const std::string& message) {
  auto tasks = ParseAlibabaTasks(
      std::string(kTaskHeader) + "ok,1000,1024,1,500,,LS,Running,0,1,0\n\n" + row + "\n",
      "pods.csv");
  ASSERT_FALSE(tasks.ok()) << row;
  EXPECT_EQ(tasks.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tasks.status().message(), "pods.csv:4: " + message);
}

TEST(AlibabaTraceTest, NamesTheLineOfABadTask) {
  ExpectTaskError("p,1000,1024,1,1200,,LS,Running,0,1,0",
                  "gpu_milli must be an integer in [0, 1000], got '1200'");
  ExpectTaskError("p,lots,1024,1,500,,LS,Running,0,1,0",
                  "cpu_milli must be an integer in [0, 1099511627776], got 'lots'");
  ExpectTaskError("p,1000,1024,-1,500,,LS,Running,0,1,0",
                  "num_gpu must be an integer in [0, 1024], got '-1'");
  ExpectTaskError("p,1000,1024,2,500,,LS,Running,0,1,0",
                  "a share of a GPU (gpu_milli 500) must ask for one GPU, not 2");
  ExpectTaskError("p,1000,1024,0,500,,LS,Running,0,1,0", "gpu_milli 500 without a GPU (num_gpu 0)");
  ExpectTaskError("p,1000,1024,1,0,,LS,Running,0,1,0", "num_gpu 1 with gpu_milli 0");
  ExpectTaskError("p,1000,1024,1,500,,LS,Running,yesterday,1,0",
                  "creation_time must be a number >= 0, got 'yesterday'");
  ExpectTaskError("p,1000,1024,1,500", "expected 11 fields, got 5");
}

TEST(AlibabaTraceTest, AMissingColumnIsReportedAgainstTheHeader) {
  auto tasks = ParseAlibabaTasks("name,cpu_milli,memory_mib,num_gpu,creation_time\n", "pods.csv");
  ASSERT_FALSE(tasks.ok());
  EXPECT_EQ(tasks.status().message(), "pods.csv:1: the header has no 'gpu_milli' column");
  EXPECT_FALSE(ParseAlibabaTasks("", "empty.csv").ok());
}

TEST(AlibabaTraceTest, ReadsNodesAndNamesTheLineOfABadOne) {
  auto nodes = ParseAlibabaNodes(
      "sn,cpu_milli,memory_mib,gpu,model\n"
      "n0,64000,262144,2,P100\n"
      "n1,96000,393216,8,G2\n",
      "nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[1].name, "n1");
  EXPECT_EQ((*nodes)[1].gpus, 8);
  EXPECT_EQ((*nodes)[1].cpu_milli, 96000);
  EXPECT_EQ((*nodes)[1].memory_mib, 393216);
  EXPECT_EQ((*nodes)[1].model, "G2");

  auto bad = ParseAlibabaNodes("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,two,P100\n",
                               "nodes.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "nodes.csv:2: gpu must be an integer in [0, 64], got 'two'");
}

TEST(AlibabaTraceTest, AMissingFileIsNotFound) {
  EXPECT_EQ(ReadAlibabaTasks("/nonexistent/pods.csv").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadAlibabaNodes("/nonexistent/nodes.csv").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gandiva::sched
