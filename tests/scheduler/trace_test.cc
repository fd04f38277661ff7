// Trace readers: the three formats, per-line errors, skipping, load scaling.
#include "gandiva/scheduler/trace.h"

#include <gtest/gtest.h>

namespace gandiva::sched {
namespace {

TEST(TraceTest, ParsesPhillyRebasesAndSorts) {
  auto t = ParseTrace(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
      "2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n",
      "p.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->format, "philly");
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].submit_time, 0);
  EXPECT_EQ(t->jobs[0].num_gpus, 8);
  EXPECT_EQ(t->jobs[0].vc, "6214e9");
  EXPECT_DOUBLE_EQ(t->jobs[1].submit_time, 48 * 60 + 52);
  EXPECT_DOUBLE_EQ(t->jobs[1].duration, 66);
}

TEST(TraceTest, ParsesTiresias) {
  auto t = ParseTrace(
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
      "0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n",
      "t.csv");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->format, "tiresias");
  EXPECT_EQ(t->jobs[1].num_gpus, 8);
  EXPECT_EQ(t->jobs[1].submit_time, 30);
  EXPECT_EQ(t->jobs[1].duration, 147);
}

TEST(TraceTest, GenericColumnsInAnyOrderAndGpuTime) {
  auto t = ParseTrace(
      "# comment\nnum_gpus,gpu_time,submit_time,user,job_type\n"
      "4,400,10,alice,\"ResNet-50 (batch size 32)\"\n",
      "g.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->format, "generic");
  EXPECT_EQ(t->jobs[0].duration, 100);  // gpu_time / GPUs
  EXPECT_EQ(t->jobs[0].user, "alice");
  EXPECT_EQ(t->jobs[0].job_type, "ResNet-50 (batch size 32)");
}

TEST(TraceTest, BadRowNamesTheLine) {
  std::string text = "submit_time,duration,num_gpus\n0,10,1\n5,10,zero\n";
  auto t = ParseTrace(text, "g.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("g.csv:3:"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("zero"), std::string::npos);

  TraceOptions skip;
  skip.skip_bad_rows = true;
  auto s = ParseTrace(text + "7,-1,1\n8,5,2\n", "g.csv", skip);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->skipped_rows, 2);
  EXPECT_EQ(s->jobs.size(), 2u);
}

TEST(TraceTest, MissingColumnsIsAnError) {
  auto t = ParseTrace("when,how_long\n1,2\n", "x.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("x.csv:1:"), std::string::npos);
}

TEST(TraceTest, LoadScalesArrivalRate) {
  TraceOptions o;
  o.load = 4;
  auto t = ParseTrace("submit_time,duration,num_gpus\n100,10,1\n500,10,1\n", "g", o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->jobs[1].submit_time, 100);
  EXPECT_EQ(t->jobs[1].duration, 10);  // work is unchanged
}

TEST(TraceTest, DateTime) {
  double s = 0;
  ASSERT_TRUE(ParseDateTime("1970-01-02 00:00:01", &s));
  EXPECT_EQ(s, 86401);
  EXPECT_FALSE(ParseDateTime("2017-13-01 00:00:00", &s));
  EXPECT_FALSE(ParseDateTime("yesterday", &s));
}

}  // namespace
}  // namespace gandiva::sched
