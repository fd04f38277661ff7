// Launched jobs' logs: the cap keeps the newest output, reads by absolute offset
// cross the rotation, and what is read is valid UTF-8. And the launcher's start
// errors, with real processes.
#include "jobs/job_log.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "jobs/job.h"
#include "jobs/launcher.h"

namespace gandiva::controller {
namespace {

namespace fs = std::filesystem;

class JobLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gd_job_log_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "job-1.stdout").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Append(const std::string& text) { std::ofstream(path_, std::ios::app) << text; }
  std::string ReadAll(const CappedLog& log, uint64_t from, uint64_t* first = nullptr) {
    std::string all;
    for (uint64_t at = from;;) {
      auto r = log.Read(at, 7);  // small reads: they cross the rotation boundary
      EXPECT_TRUE(r.ok());
      if (first && at == from) *first = r->offset;
      all += r->data;
      if (r->next_offset == at) return all;
      at = r->next_offset;
    }
  }
  fs::path dir_;
  std::string path_;
};

TEST_F(JobLogTest, UnderTheCapNothingMoves) {
  CappedLog log(path_, 100);
  Append("hello\n");
  ASSERT_TRUE(log.Cap().ok());
  EXPECT_FALSE(fs::exists(path_ + ".1"));
  EXPECT_EQ(ReadAll(log, 0), "hello\n");
}

TEST_F(JobLogTest, OverTheCapTheNewestBytesMoveAndOffsetsStayAbsolute) {
  CappedLog log(path_, 10);
  Append("0123456789abcdefghij");  // 20 bytes: the newest 10 move to .1
  ASSERT_TRUE(log.Cap().ok());
  EXPECT_EQ(fs::file_size(path_), 0u);
  EXPECT_EQ(fs::file_size(path_ + ".1"), 10u);
  Append("KLMNO");
  uint64_t first = 0;
  EXPECT_EQ(ReadAll(log, 0, &first), "abcdefghijKLMNO");
  EXPECT_EQ(first, 10u) << "the reader is told where the oldest kept byte is";
  EXPECT_EQ(ReadAll(log, 18), "ijKLMNO");
  auto end = log.Read(25, 100);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->end_offset, 25u);
  EXPECT_EQ(end->data, "");

  Append("PQRSTUVWXYZ");  // FILE is 16 bytes now: a second rotation replaces .1
  ASSERT_TRUE(log.Cap().ok());
  EXPECT_EQ(ReadAll(log, 0, &first), "QRSTUVWXYZ");
  EXPECT_EQ(first, 26u);
}

TEST_F(JobLogTest, ReadsAreValidUtf8AndDoNotSplitACharacter) {
  size_t used = 0;
  EXPECT_EQ(ToValidUtf8("a\xC3\xA9z", false, &used), "a\xC3\xA9z");
  EXPECT_EQ(ToValidUtf8("a\xFF"
                        "b",
                        false, &used),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(ToValidUtf8("\xC0\xAF", false, &used), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong
  EXPECT_EQ(ToValidUtf8("ab\xE2\x82", true, &used), "ab");
  EXPECT_EQ(used, 2u) << "an incomplete character waits for its last byte";
  EXPECT_EQ(ToValidUtf8("ab\xE2\x82", false, &used), "ab\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(used, 4u);

  CappedLog log(path_, 0);
  Append("x\xE2\x82\xAC");  // "x€"
  auto r = log.Read(0, 2);  // would cut the euro sign
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data, "x");
  EXPECT_EQ(r->next_offset, 1u);
  EXPECT_EQ(ReadAll(log, 1), "\xE2\x82\xAC");
}

TEST_F(JobLogTest, JobLogsKnowsOnlyLaunchedJobs) {
  JobLogs logs(1 << 20);
  logs.Add(3, path_, path_ + ".err");
  Append("out");
  EXPECT_EQ(logs.Read(3, false, 0, 100)->data, "out");
  EXPECT_EQ(logs.Read(4, false, 0, 100).status().code(), StatusCode::kNotFound);
}

// The launcher with real processes: output to the files, start errors with errno.
TEST_F(JobLogTest, LauncherStartsAProcessOrSaysWhyNot) {
  LaunchSpec spec{{"sh", "-c", "echo out; echo err >&2; exit 7"},
                  dir_.string(),
                  {{"PATH", "/usr/bin:/bin"}},
                  path_,
                  path_ + ".err",
                  ""};
  auto started = StartProcess(spec);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  int status = 0;
  ASSERT_EQ(waitpid(started->pid, &status, 0), started->pid);
  int code = 0;
  EXPECT_EQ(EndFromWaitStatus(status, &code).reason, protocol::ExitReason::kExited);
  EXPECT_EQ(code, 7);
  EXPECT_EQ(ReadAll(CappedLog(path_, 0), 0), "out\n");

  spec.argv = {"no-such-command-gd"};
  auto missing = StartProcess(spec);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(ExitCodeOfStartError(missing.status()), 127);
  EXPECT_NE(missing.status().message().find("No such file"), std::string::npos);

  const std::string plain = (dir_ / "not-executable").string();
  std::ofstream(plain) << "echo hi\n";
  spec.argv = {plain};
  fs::remove(path_);  // as gandivad does before each start: the files are made afresh
  fs::remove(path_ + ".err");
  auto denied = StartProcess(spec);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(ExitCodeOfStartError(denied.status()), 126);
  EXPECT_NE(denied.status().message().find("Permission denied"), std::string::npos);

  spec.env = {{"PATH", dir_.string()}};  // the job's PATH, not gandivad's, finds commands
  spec.argv = {"sh"};
  EXPECT_EQ(StartProcess(spec).status().code(), StatusCode::kNotFound);
}

// A log file is made afresh: one in place already (a planted file or link,
// gandivad having removed its own) is refused, and its target not written.
TEST_F(JobLogTest, TheLauncherNeverOpensAnExistingLogNorALink) {
  const std::string victim = (dir_ / "victim").string();
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, path_);
  LaunchSpec spec{
      {"sh", "-c", "echo out"}, dir_.string(), {{"PATH", "/usr/bin:/bin"}}, path_, path_, ""};
  auto started = StartProcess(spec);
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.status().message().find("exists already"), std::string::npos)
      << started.status().message();
  std::ifstream in(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious");
}

// A link where the rotation writes FILE.1's new copy: replaced, not followed;
// a link in place of FILE itself is neither rotated nor read through.
TEST_F(JobLogTest, RotationAndReadsNeverFollowALink) {
  const std::string victim = (dir_ / "victim").string();
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, path_ + ".1.tmp");
  CappedLog log(path_, 10);
  Append("0123456789abcdefghij");
  ASSERT_TRUE(log.Cap().ok());
  EXPECT_FALSE(fs::is_symlink(path_ + ".1"));
  EXPECT_EQ(fs::file_size(path_ + ".1"), 10u);
  std::ifstream in(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious");

  const std::string linked = (dir_ / "job-2.stdout").string();
  fs::create_symlink(victim, linked);
  CappedLog other(linked, 3);
  EXPECT_TRUE(other.Cap().ok());  // a link reads as empty: nothing to rotate
  EXPECT_FALSE(fs::exists(linked + ".1"));
  auto r = other.Read(0, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data, "");
}

}  // namespace
}  // namespace gandiva::controller
