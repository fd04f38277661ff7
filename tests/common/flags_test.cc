// The CLI flag parser.
#include "gandiva/common/flags.h"

#include <gtest/gtest.h>

namespace gandiva {
namespace {

TEST(FlagsTest, ValuedBooleanAndPositionals) {
  Flags f({"device", "ms"}, {"json"});
  ASSERT_TRUE(f.Parse({"--device", "cpu0", "--ms=100", "--json", "3"}).ok());
  EXPECT_EQ(f.Get("device"), "cpu0");
  EXPECT_EQ(*f.GetInt("ms", 0), 100);
  EXPECT_TRUE(f.Has("json"));
  EXPECT_EQ(f.positionals(), std::vector<std::string>{"3"});
}

TEST(FlagsTest, EverythingAfterTheCommandStartIsPositional) {
  Flags f({"name"}, {});
  ASSERT_TRUE(f.Parse({"--name", "a", "python", "--name", "x"}, true).ok());
  EXPECT_EQ(f.positionals(), (std::vector<std::string>{"python", "--name", "x"}));
  Flags g({"name"}, {});
  ASSERT_TRUE(g.Parse({"--", "--weird"}).ok());
  EXPECT_EQ(g.positionals(), std::vector<std::string>{"--weird"});
}

TEST(FlagsTest, BadFlagsAreErrors) {
  EXPECT_FALSE(Flags({"ms"}, {}).Parse({"--nope"}).ok());
  EXPECT_FALSE(Flags({"ms"}, {}).Parse({"--ms"}).ok());
  EXPECT_FALSE(Flags({}, {"json"}).Parse({"--json=1"}).ok());
  EXPECT_FALSE(Flags({}, {}).Parse({"-x"}).ok());
  Flags f({"ms"}, {});
  ASSERT_TRUE(f.Parse({"--ms", "12x"}).ok());
  EXPECT_FALSE(f.GetInt("ms", 0).ok());
}

}  // namespace
}  // namespace gandiva
