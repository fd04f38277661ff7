// bench_submit: the live scheduler's submit path and queue reads on its job
// store (scheduler/live/job_store.h), measured on the real JobStore in a fresh
// SQLite database in a temporary directory.
//
//   submit   N durable Adds, each its own transaction (WAL, synchronous=FULL),
//            as N `gandiva submit` RPCs would do them: submissions/s and the
//            per-Add latency. Goal (issue 12): >= 1,000/s on this machine.
//   floor    rewrite 4 KiB + fdatasync of a file in the same directory: the disk's
//            own price of one durable write, which bounds any durable Add.
//   update   durable Updates (state changes the daemon writes), updates/s.
//   list     with L jobs stored (default 10,000): List(true), and List(false)
//            with all L not ended and with 90 % of them ended; Get by id.
//   open     reopening the L-job store (schema check + quick_check): the
//            restart path.
//
// Usage: bench_submit [--jobs N] [--list-jobs L] [--repeat R] [--dir DIR] [--out DIR]
// --dir is where the temporary store goes (default $TMPDIR or /tmp); it must be
// on the disk the scheduler's state directory would use: on tmpfs an fsync is free.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "live/job_store.h"

namespace {

using gandiva::sched::live::JobRecord;
using gandiva::sched::live::JobStore;
using gandiva::sched::live::LiveJobState;
using Clock = std::chrono::steady_clock;

struct Options {
  int jobs = 5000;
  int list_jobs = 10000;
  int repeat = 20;
  std::string dir;
  std::string out_dir = ".";
};

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Sample {
  std::vector<double> us;
  double Quantile(double q) const {
    if (us.empty()) return 0;
    std::vector<double> s = us;
    std::sort(s.begin(), s.end());
    return s[std::min(s.size() - 1, static_cast<size_t>(q * s.size()))];
  }
  nlohmann::json Json() const {
    return {{"n", us.size()}, {"median_us", Quantile(0.5)}, {"p99_us", Quantile(0.99)}};
  }
};

// What a submit stores: a typical training command, a few env entries.
JobRecord Submission(int n) {
  JobRecord job;
  job.name = "trial-" + std::to_string(n);
  job.user = "user" + std::to_string(n % 17);
  job.vc = "vc" + std::to_string(n % 4);
  job.gpus = 1 + n % 4;
  job.command = {"/usr/bin/python3",
                 "examples/pytorch/train_cnn.py",
                 "--lr",
                 std::to_string(0.001 * (1 + n % 10)),
                 "--epochs",
                 "5"};
  job.cwd = "/home/user/project";
  job.env = {{"OMP_NUM_THREADS", "1"}, {"GANDIVA_TRIAL", std::to_string(n)}, {"PYTHONPATH", "."}};
  job.restartable = n % 2 == 0;
  job.submit_time = 1.7639e9 + n;
  return job;
}

bool Fail(const char* what, const gandiva::Status& s) {
  std::fprintf(stderr, "bench_submit: %s: %s\n", what, s.ToString().c_str());
  return false;
}

// Adds jobs [from, to) durably, one transaction each; per-Add latencies into `out`.
bool AddJobs(JobStore& store, int from, int to, Sample* out) {
  for (int n = from; n < to; ++n) {
    auto t = Clock::now();
    auto id = store.Add(Submission(n));
    if (out) out->us.push_back(SecondsSince(t) * 1e6);
    if (!id.ok()) return Fail("Add", id.status());
  }
  return true;
}

// write(4 KiB) + fdatasync, `n` times, on a file in `dir`.
Sample FsyncFloor(const std::string& dir, int n) {
  Sample s;
  const std::string path = dir + "/fsync_floor";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return s;
  // Rewrites one block already on disk, as SQLite rewrites its WAL from the
  // start after each checkpoint: the data flush alone, no file-size change.
  std::string page(4096, 'x');
  if (pwrite(fd, page.data(), page.size(), 0) < 0 || fsync(fd) != 0) n = 0;
  for (int i = 0; i < n; ++i) {
    auto t = Clock::now();
    if (pwrite(fd, page.data(), page.size(), 0) < 0) break;
    fdatasync(fd);
    s.us.push_back(SecondsSince(t) * 1e6);
  }
  close(fd);
  unlink(path.c_str());
  return s;
}

// Times `call` `repeat` times; false when it fails.
template <typename Call>
bool Time(int repeat, Sample* out, Call call) {
  for (int i = 0; i < repeat; ++i) {
    auto t = Clock::now();
    if (!call()) return false;
    out->us.push_back(SecondsSince(t) * 1e6);
  }
  return true;
}

std::string FilesystemOf(const std::string& dir) {
  struct statfs fs;
  if (statfs(dir.c_str(), &fs) != 0) return "unknown";
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0xEF53:
      return "ext4";
    case 0x01021994:
      return "tmpfs (fsync is free: not a disk figure)";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x794C7630:
      return "overlayfs";
    default:
      return "other";
  }
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--jobs")
      o->jobs = std::max(1, std::atoi(v.c_str()));
    else if (a == "--list-jobs")
      o->list_jobs = std::max(10, std::atoi(v.c_str()));
    else if (a == "--repeat")
      o->repeat = std::max(1, std::atoi(v.c_str()));
    else if (a == "--dir")
      o->dir = v;
    else if (a == "--out")
      o->out_dir = v;
    else
      return false;
  }
  if (argc % 2 == 0) return false;
  if (o->dir.empty()) {
    const char* tmp = getenv("TMPDIR");
    o->dir = tmp && *tmp ? tmp : "/tmp";
  }
  return true;
}

void Row(const std::string& what, const Sample& s, const std::string& extra) {
  std::printf("%-38s %8zu %12.1f %12.1f  %s\n", what.c_str(), s.us.size(), s.Quantile(0.5),
              s.Quantile(0.99), extra.c_str());
}

struct Results {
  double submits_per_s = 0, updates_per_s = 0;
  Sample submit, floor, update, get, list_all, list_live_all, list_live_tenth, open;
  int stored = 0;
  size_t live_all = 0, live_tenth = 0;
  uintmax_t db_bytes = 0;
};

// Submissions into the fresh store, the fsync floor, then durable Updates
// (state changes of the first jobs).
bool MeasureWrites(const Options& o, const std::string& dir, JobStore& store, Results* r) {
  auto t0 = Clock::now();
  if (!AddJobs(store, 0, o.jobs, &r->submit)) return false;
  r->submits_per_s = o.jobs / SecondsSince(t0);
  r->floor = FsyncFloor(dir, std::min(o.jobs, 2000));
  const int updates = std::min(o.jobs, 2000);
  t0 = Clock::now();
  for (int id = 1; id <= updates; ++id) {
    JobRecord job = Submission(id - 1);
    job.id = id;
    job.state = LiveJobState::kRunning;
    job.node = "node-" + std::to_string(id % 8);
    job.device = "gpu" + std::to_string(id % 4);
    job.attempt = 1;
    auto t = Clock::now();
    gandiva::Status s = store.Update(job);
    r->update.us.push_back(SecondsSince(t) * 1e6);
    if (!s.ok()) return Fail("Update", s);
  }
  r->updates_per_s = updates / SecondsSince(t0);
  return true;
}

// Ends 9 jobs in 10 (a scheduler that has run for a while).
bool EndMostJobs(JobStore& store, int stored) {
  for (int id = 1; id <= stored; ++id) {
    if (id % 10 == 0) continue;
    auto job = store.Get(id);
    if (!job.ok()) return Fail("Get", job.status());
    job->state = LiveJobState::kFinished;
    if (gandiva::Status s = store.Update(*job); !s.ok()) return Fail("Update", s);
  }
  return true;
}

// Get and List with list_jobs stored, List(false) again after most ended.
bool MeasureReads(const Options& o, JobStore& store, Results* r) {
  if (o.jobs < o.list_jobs && !AddJobs(store, o.jobs, o.list_jobs, nullptr)) return false;
  r->stored = std::max(o.jobs, o.list_jobs);
  size_t listed = 0;
  auto list = [&](bool include_ended) {
    auto jobs = store.List(include_ended);
    if (!jobs.ok()) return Fail("List", jobs.status());
    listed = jobs->size();
    return true;
  };
  if (!Time(o.repeat, &r->list_all, [&] { return list(true); })) return false;
  if (!Time(o.repeat, &r->list_live_all, [&] { return list(false); })) return false;
  r->live_all = listed;
  int n = 0;
  auto get = [&] {
    auto job = store.Get(1 + (n++ * 7919) % r->stored);
    return job.ok() || Fail("Get", job.status());
  };
  if (!Time(o.repeat * 50, &r->get, get)) return false;
  if (!EndMostJobs(store, r->stored)) return false;
  if (!Time(o.repeat, &r->list_live_tenth, [&] { return list(false); })) return false;
  r->live_tenth = listed;
  return true;
}

void PrintTable(const Options& o, const Results& r, const std::string& fs) {
  std::printf("job store in %s (%s); %d submissions, %d jobs for the reads\n\n", o.dir.c_str(),
              fs.c_str(), o.jobs, r.stored);
  std::printf("%-38s %8s %12s %12s\n", "operation", "n", "median us", "p99 us");
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.0f submissions/s", r.submits_per_s);
  Row("Add (durable, one transaction)", r.submit, buf);
  std::snprintf(buf, sizeof buf, "%.0f /s", 1e6 / std::max(1e-9, r.floor.Quantile(0.5)));
  Row("floor: rewrite 4 KiB + fdatasync", r.floor, buf);
  std::snprintf(buf, sizeof buf, "%.0f updates/s", r.updates_per_s);
  Row("Update (durable)", r.update, buf);
  Row("Get by id", r.get, "");
  Row("List(true), " + std::to_string(r.stored) + " jobs", r.list_all, "");
  Row("List(false), " + std::to_string(r.live_all) + " of them live", r.list_live_all, "");
  Row("List(false), " + std::to_string(r.live_tenth) + " live", r.list_live_tenth, "");
  Row("Open (schema + quick_check)", r.open, std::to_string(r.db_bytes / 1024) + " KiB database");
  std::printf("\ngoal >= 1000 durable submissions/s: %s\n",
              r.submits_per_s >= 1000 ? "met" : "MISSED");
}

void WriteJson(const Options& o, const Results& r, const std::string& fs) {
  nlohmann::json out = {
      {"dir", o.dir},
      {"filesystem", fs},
      {"submissions", o.jobs},
      {"submissions_per_s", r.submits_per_s},
      {"add", r.submit.Json()},
      {"fsync_floor", r.floor.Json()},
      {"updates_per_s", r.updates_per_s},
      {"update", r.update.Json()},
      {"get", r.get.Json()},
      {"stored_jobs", r.stored},
      {"list_all", r.list_all.Json()},
      {"list_not_ended_all_live", r.list_live_all.Json()},
      {"list_not_ended_tenth_live", r.list_live_tenth.Json()},
      {"live_after_ending_90pct", r.live_tenth},
      {"open", r.open.Json()},
      {"database_bytes", r.db_bytes},
      {"goal_submissions_per_s", 1000},
  };
  std::error_code ignored;
  std::filesystem::create_directories(o.out_dir, ignored);
  const std::string path = o.out_dir + "/bench_submit.json";
  std::ofstream(path) << out.dump(2) << "\n";
  std::printf("wrote %s\n", path.c_str());
}

// Runs every phase on a store in a fresh directory under o.dir.
bool Run(const Options& o, const std::string& dir, Results* r) {
  const std::string db = dir + "/jobs.db";
  auto opened = JobStore::Open(db);
  if (!opened.ok()) return Fail("Open", opened.status());
  std::unique_ptr<JobStore> store = std::move(opened).value();
  if (!MeasureWrites(o, dir, *store, r) || !MeasureReads(o, *store, r)) return false;
  store.reset();
  auto reopen = [&] {
    auto again = JobStore::Open(db);
    return again.ok() || Fail("reopen", again.status());
  };
  if (!Time(std::max(3, o.repeat / 4), &r->open, reopen)) return false;
  std::error_code ignored;
  r->db_bytes = std::filesystem::file_size(db, ignored);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: bench_submit [--jobs N] [--list-jobs L] [--repeat R] [--dir DIR] "
                 "[--out DIR]\n");
    return 2;
  }
  std::string dir = o.dir + "/bench_submit_XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    std::perror(("bench_submit: mkdtemp in " + o.dir).c_str());
    return 1;
  }
  Results r;
  bool ok = Run(o, dir, &r);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  if (!ok) return 1;
  const std::string fs = FilesystemOf(o.dir);
  PrintTable(o, r, fs);
  WriteJson(o, r, fs);
  return 0;
}
