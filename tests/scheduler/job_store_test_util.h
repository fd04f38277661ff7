// Helpers for the job store tests: a private temporary directory and a job
// record with every field set.
#ifndef GANDIVA_TESTS_SCHEDULER_JOB_STORE_TEST_UTIL_H_
#define GANDIVA_TESTS_SCHEDULER_JOB_STORE_TEST_UTIL_H_

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "live/job_store.h"

namespace gandiva::sched::live::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/gandiva_store_XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A queued job as a submit would store it; `n` varies the strings.
inline JobRecord QueuedJob(int n) {
  JobRecord job;
  job.name = "job-" + std::to_string(n);
  job.user = "alice";
  job.vc = "vc1";
  job.kind = "python3 train.py";
  job.gpus = 1 + n % 3;
  job.command = {"/usr/bin/python3", "train.py", "--seed", std::to_string(n)};
  job.cwd = "/home/alice/run" + std::to_string(n);
  job.env = {{"SEED", std::to_string(n)}};
  job.submit_time = 1.7e9 + n * 0.25;
  return job;
}

}  // namespace gandiva::sched::live::testing

#endif  // GANDIVA_TESTS_SCHEDULER_JOB_STORE_TEST_UTIL_H_
