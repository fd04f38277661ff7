// NodeRuns: a node's list_jobs reply indexed once per pass (live/node_runs.h).
#include "live/node_runs.h"

#include <gtest/gtest.h>

namespace gandiva::sched::live {
namespace {

using protocol::Json;

Json Entry(int64_t id, const std::string& state, const std::string& exit_reason) {
  return {{"id", id},
          {"name", "j.s" + std::to_string(id) + ".a1"},
          {"state", state},
          {"exit_code", 0},
          {"exit_reason", exit_reason},
          {"device_time_s", 1.5},
          {"wall_time_s", 2.0},
          {"rate_vs_alone", nullptr},
          {"operation", nullptr}};
}

TEST(NodeRunsTest, IndexesEachEntryByIdAndTellsWhetherItLives) {
  const Json jobs = Json::array({Entry(3, "running", "none"), Entry(7, "suspended", "none"),
                                 Entry(9, "exited", "none"), Entry(11, "failed", "signal"),
                                 Entry(12, "migrated", "migrated")});
  const NodeRuns runs(jobs);
  ASSERT_EQ(runs.all().size(), 5u);
  const NodeRun* r = runs.Find(7);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->id, 7);
  EXPECT_EQ(r->entry, &jobs[1]);
  EXPECT_TRUE(r->live);
  EXPECT_FALSE(r->ended());
  // Exited, but its exit status not known yet: not ended for the scheduler.
  EXPECT_FALSE(runs.Find(9)->live);
  EXPECT_FALSE(runs.Find(9)->ended());
  EXPECT_TRUE(runs.Find(11)->ended());
  EXPECT_TRUE(runs.Find(12)->ended());
  EXPECT_TRUE(runs.Find(3)->live);
  EXPECT_EQ(runs.Find(4), nullptr);
  EXPECT_TRUE(NodeRuns(Json::array()).all().empty());
}

TEST(NodeRunsTest, OnlyExitedFailedAndMigratedAreNotLive) {
  for (const char* s : {"running", "suspended", "suspending", "starting", "checkpointing"})
    EXPECT_TRUE(LiveOnNode(s)) << s;
  for (const char* s : {"exited", "failed", "migrated"}) EXPECT_FALSE(LiveOnNode(s)) << s;
}

}  // namespace
}  // namespace gandiva::sched::live
