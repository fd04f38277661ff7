// IdSet against std::set<int>: the same members in the same order after any
// sequence of inserts and erases, across word and summary-word boundaries.
#include "gandiva/scheduler/id_set.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

namespace gandiva::sched {
namespace {

std::vector<int> Members(const IdSet& s) { return {s.begin(), s.end()}; }

TEST(IdSetTest, AgreesWithStdSetUnderRandomInsertsAndErases) {
  std::mt19937 rng(5);
  for (int range : {1, 63, 64, 65, 4096, 4097, 20000}) {
    IdSet ids;
    std::set<int> want;
    for (int step = 0; step < 20000; ++step) {
      int id = static_cast<int>(rng() % range);
      if (rng() % 3 == 0) {
        EXPECT_EQ(ids.erase(id), want.erase(id) == 1);
      } else {
        EXPECT_EQ(ids.insert(id), want.insert(id).second);
      }
      if (step % 997 == 0) {
        ASSERT_EQ(Members(ids), std::vector<int>(want.begin(), want.end())) << range;
      }
    }
    EXPECT_EQ(ids.size(), want.size());
    EXPECT_EQ(Members(ids), std::vector<int>(want.begin(), want.end())) << range;
    for (int id = 0; id < range; ++id) ASSERT_EQ(ids.contains(id), want.count(id) == 1);
  }
}

TEST(IdSetTest, NextFromSkipsEmptyWordsAndSummaryWords) {
  IdSet ids;
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(ids.begin(), ids.end());
  EXPECT_EQ(ids.next_from(0), -1);
  ids.insert(5);
  ids.insert(64 * 64 + 3);       // the second summary word
  ids.insert(64 * 64 * 3 + 63);  // the fourth
  EXPECT_EQ(ids.next_from(0), 5);
  EXPECT_EQ(ids.next_from(6), 64 * 64 + 3);
  EXPECT_EQ(ids.next_from(64 * 64 + 4), 64 * 64 * 3 + 63);
  EXPECT_EQ(ids.next_from(64 * 64 * 3 + 64), -1);
  EXPECT_EQ(ids.next_from(1 << 30), -1);
  EXPECT_TRUE(ids.erase(64 * 64 + 3));
  EXPECT_FALSE(ids.erase(64 * 64 + 3));
  EXPECT_EQ(Members(ids), (std::vector<int>{5, 64 * 64 * 3 + 63}));
  EXPECT_EQ(*ids.begin(), 5);
  EXPECT_FALSE(ids.erase(1 << 20));  // beyond what it ever held
}

}  // namespace
}  // namespace gandiva::sched
