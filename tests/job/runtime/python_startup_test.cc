// Where a job's PYTHONPATH gets gandiva's start-up hook (job/contract/python_startup.h).
#include "gandiva/contract/python_startup.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace gandiva::runtime {
namespace {

TEST(PythonStartupTest, HookGoesFirstOnce) {
  EXPECT_EQ(PythonPathWithHook("", "/h"), "/h");
  EXPECT_EQ(PythonPathWithHook("/a:/b", "/h"), "/h:/a:/b");
  EXPECT_EQ(PythonPathWithHook("/a:/h", "/h"), "/a:/h") << "there already: left as it is";
  EXPECT_EQ(PythonPathWithHook("/h2:/a", "/h"), "/h:/h2:/a") << "a prefix is not the folder";
  EXPECT_EQ(PythonPathWithHook("/a", ""), "/a");
}

TEST(PythonStartupTest, EnvironmentMayTurnItOff) {
  std::map<std::string, std::string> env = {{"PYTHONPATH", "/a"}};
  AddStartupHook(env, "/h");
  AddStartupHook(env, "/h");
  EXPECT_EQ(env["PYTHONPATH"], "/h:/a");
  for (const char* off : {"0", "off", "False", " no "}) {
    std::map<std::string, std::string> e = {{kEnvAutoTorch, off}};
    AddStartupHook(e, "/h");
    EXPECT_EQ(e.count("PYTHONPATH"), 0u) << off;
  }
  std::map<std::string, std::string> on = {{kEnvAutoTorch, "1"}};
  AddStartupHook(on, "/h");
  EXPECT_EQ(on["PYTHONPATH"], "/h");
  std::map<std::string, std::string> none;
  AddStartupHook(none, "");
  EXPECT_TRUE(none.empty()) << "no hook found: nothing added";
}

TEST(PythonStartupTest, BuildTreeHookIsFound) {
  // The build tree's, which exists in this build.
  const std::string dir = FindStartupHookDir("/nonexistent/bin/gandiva");
  EXPECT_NE(dir.find("gandiva/_startup"), std::string::npos) << dir;
}

TEST(PythonStartupTest, HookIsFoundInAPackageOnThePath) {
  char tmpl[] = "/tmp/gd_startup_test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::filesystem::path root = tmpl;
  const std::filesystem::path hook = root / "with" / "gandiva" / "_startup";
  std::filesystem::create_directories(hook);
  std::filesystem::create_directories(root / "without" / "gandiva" / "_startup");
  std::ofstream(hook / "sitecustomize.py") << "\n";
  const std::string with = (root / "with").string(), without = (root / "without").string();
  EXPECT_EQ(FindStartupHookDirOnPath("/nonexistent::" + without + ":" + with), hook.string());
  EXPECT_EQ(FindStartupHookDirOnPath(without), "") << "a folder without the hook file";
  EXPECT_EQ(FindStartupHookDirOnPath(""), "");
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gandiva::runtime
