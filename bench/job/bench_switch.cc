// bench_switch: switch latency, from job A parked at a boundary to job B running
// again, over many switches, and the floor it is judged against measured in the
// same run: a raw cross-process futex ping-pong round trip on shared memory.
//
// Two real child processes attach to real shared control blocks (as under
// `gandiva run`) and loop on JobRuntime::Boundary() with a tiny synthetic
// iteration (spinning). The parent plays gandivad's device loop with the same
// control-block calls it makes: RequestSuspend, sleep on the phase futex until
// A parks, RequestResume(B). A switch is measured as gandivad's handover_ms is:
// B's resumed_at_ns minus A's parked_at_ns, both written by the jobs themselves.
// Both contain two cross-process wake-ups (A wakes the controller, the
// controller wakes B), as does one ping-pong round trip: hence the floor.
//
// The floor is measured twice: back to back (both processes hot) and with the
// pinger idle for one slice before each ping, as the parked job is idle before
// its resume; see PingPong().
//
// Usage: bench_switch [--switches N] [--slice-us U] [--spin-us U] [--pingpongs N]
//                     [--idle-pingpongs N] [--out DIR]
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/contract/control_block.h"
#include "gandiva/contract/shared_control_block.h"
#include "gandiva/runtime/job_runtime.h"

namespace {

using gandiva::MonotonicNowNs;
namespace rt = gandiva::runtime;

struct Options {
  int switches = 2000;
  uint64_t slice_us = 2000;  // how long each job runs between switches
  uint64_t spin_us = 50;     // the synthetic iteration
  int pingpongs = 2000;      // floor samples (half before, half after the switches)
  int idle_pingpongs = 500;  // idle-matched floor samples (each after a slice-long sleep)
  std::string out_dir = ".";
};

// A page shared with the children, mapped before fork.
struct Shared {
  std::atomic<uint32_t> stop;
  std::atomic<uint32_t> ping;  // futex word of the ping-pong: 0 idle, 1 ping, 2 pong, 3 quit
};

void SleepNs(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) != 0) {
  }
}

void Spin(uint64_t ns) {
  const uint64_t end = MonotonicNowNs() + ns;
  while (MonotonicNowNs() < end) {
  }
}

struct Summary {
  size_t n = 0;
  double median_us = 0, p99_us = 0, mean_us = 0, min_us = 0, max_us = 0;
};

Summary Summarize(std::vector<uint64_t> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))] / 1e3;
  };
  s.n = v.size();
  s.median_us = at(0.5);
  s.p99_us = at(0.99);
  s.min_us = v.front() / 1e3;
  s.max_us = v.back() / 1e3;
  double sum = 0;
  for (uint64_t x : v) sum += x;
  s.mean_us = sum / v.size() / 1e3;
  return s;
}

nlohmann::json ToJson(const Summary& s) {
  return {{"n", s.n},           {"median_us", s.median_us},
          {"p99_us", s.p99_us}, {"mean_us", s.mean_us},
          {"min_us", s.min_us}, {"max_us", s.max_us}};
}

// Child of the floor: answers every ping with a pong until told to quit.
[[noreturn]] void PongLoop(Shared* sh) {
  for (;;) {
    uint32_t v = sh->ping.load(std::memory_order_acquire);
    if (v == 3) _exit(0);
    if (v == 1) {
      sh->ping.store(2, std::memory_order_release);
      rt::FutexWakeAll(&sh->ping);
      continue;
    }
    rt::FutexWait(&sh->ping, v, 0);
  }
}

// Round trips parent -> child -> parent, each side sleeping in futex_wait
// between turns (the same shared futex calls the runtime uses). With idle_ns,
// the parent sleeps that long before each ping, so the child has slept as long
// as a parked job sleeps between its slices: back to back, both CPUs stay hot
// (a VM's vCPUs never halt), which no switch after a slice can enjoy.
std::vector<uint64_t> PingPong(Shared* sh, int n, uint64_t idle_ns) {
  std::vector<uint64_t> samples;
  samples.reserve(n);
  for (int i = 0; i < n + 50; ++i) {  // the first 50 warm up
    if (idle_ns) SleepNs(idle_ns);
    const uint64_t t0 = MonotonicNowNs();
    sh->ping.store(1, std::memory_order_release);
    rt::FutexWakeAll(&sh->ping);
    uint32_t v;
    while ((v = sh->ping.load(std::memory_order_acquire)) != 2) rt::FutexWait(&sh->ping, v, 0);
    const uint64_t t1 = MonotonicNowNs();
    sh->ping.store(0, std::memory_order_release);
    if (i >= 50) samples.push_back(t1 - t0);
  }
  return samples;
}

pid_t Fork(const std::function<void()>& child) {
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    std::exit(1);
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed bench
    child();
    _exit(0);
  }
  return pid;
}

// A job: attaches to `block` like a process under `gandiva run` and trains on spin.
[[noreturn]] void JobLoop(const std::string& block, Shared* sh, uint64_t spin_ns) {
  setenv(rt::kEnvControlBlock, block.c_str(), 1);
  rt::JobRuntime& job = rt::JobRuntime::Get();
  if (!job.managed()) _exit(3);
  while (!sh->stop.load(std::memory_order_relaxed)) {
    job.Boundary();
    Spin(spin_ns);
  }
  job.Detach();
  _exit(0);
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      if (a.compare(0, n, flag) != 0) return nullptr;
      if (a.size() == n && i + 1 < argc) return argv[++i];
      if (a.size() > n && a[n] == '=') return argv[i] + n + 1;
      return nullptr;
    };
    if (const char* v = value("--switches"))
      o->switches = std::atoi(v);
    else if (const char* v = value("--slice-us"))
      o->slice_us = std::strtoull(v, nullptr, 10);
    else if (const char* v = value("--spin-us"))
      o->spin_us = std::strtoull(v, nullptr, 10);
    else if (const char* v = value("--pingpongs"))
      o->pingpongs = std::atoi(v);
    else if (const char* v = value("--idle-pingpongs"))
      o->idle_pingpongs = std::atoi(v);
    else if (const char* v = value("--out"))
      o->out_dir = v;
    else {
      std::fprintf(stderr,
                   "usage: bench_switch [--switches N] [--slice-us U] [--spin-us U] "
                   "[--pingpongs N] [--idle-pingpongs N] [--out DIR]\n");
      return false;
    }
  }
  return o->switches > 0 && o->pingpongs > 1 && o->idle_pingpongs > 1;
}

// Two jobs, each attached to its own control block and parked at its first
// boundary, with long leases: the parent heartbeats, and no lease expiry may
// unpark a job behind the controller's back mid-measurement.
struct Jobs {
  std::unique_ptr<rt::SharedControlBlock> blocks[2];
  pid_t pids[2] = {0, 0};
  rt::ControlBlock* cb[2] = {nullptr, nullptr};
};

bool StartJobs(const Options& opt, Shared* sh, Jobs* jobs) {
  const uint64_t lease_ns = 10'000'000'000ull;
  const std::string prefix = "/gandiva.bench_switch." + std::to_string(getpid());
  for (int j = 0; j < 2; ++j) {
    auto b = rt::SharedControlBlock::Create(prefix + (j ? ".b" : ".a"), j + 1, lease_ns, "bench");
    if (!b.ok()) {
      std::fprintf(stderr, "bench_switch: %s\n", b.status().ToString().c_str());
      return false;
    }
    jobs->blocks[j] = std::move(b).value();
    jobs->cb[j] = jobs->blocks[j]->get();
    rt::Heartbeat(jobs->cb[j], MonotonicNowNs());
    rt::RequestSuspend(jobs->cb[j]);  // both park at their first boundary, as new jobs do
  }
  for (int j = 0; j < 2; ++j) {
    const std::string name = jobs->blocks[j]->name();
    jobs->pids[j] = Fork([&, name] { JobLoop(name, sh, opt.spin_us * 1000); });
  }
  for (int j = 0; j < 2; ++j) {
    if (!rt::WaitForPhase(jobs->cb[j], rt::kPhaseParked, 10'000'000'000ull)) {
      std::fprintf(stderr, "bench_switch: job %d never parked\n", j);
      return false;
    }
  }
  return true;
}

// Stops the jobs: releases them (as gandivad does on SIGTERM) and lets them
// exit. iterations: how many each ran.
void StopJobs(Shared* sh, Jobs* jobs, uint64_t iterations[2]) {
  sh->stop.store(1);
  for (int j = 0; j < 2; ++j) rt::ReleaseForever(jobs->cb[j]);
  for (int j = 0; j < 2; ++j) {
    waitpid(jobs->pids[j], nullptr, 0);
    iterations[j] = jobs->cb[j]->profile.iterations.load();
    rt::SharedControlBlock::Remove(jobs->blocks[j]->name());
  }
}

struct Switches {
  std::vector<uint64_t> handover;         // with pre-wake, as gandivad switches
  std::vector<uint64_t> handover_plain;   // without: the next job sleeps until resumed
  std::vector<uint64_t> controller_side;  // A parked -> resume request issued
};

// The device loop: run one job a slice, park it, resume the other. False if a
// job did not park or resume in time.
bool RunSwitches(const Options& opt, const Jobs& jobs, Switches* out) {
  out->handover.reserve(opt.switches);
  out->handover_plain.reserve(opt.switches);
  out->controller_side.reserve(opt.switches);
  int running = 0;
  rt::RequestResume(jobs.cb[running]);
  const int warmup = 20;
  for (int i = 0; i < opt.switches + warmup; ++i) {
    SleepNs(opt.slice_us * 1000);
    const uint64_t now = MonotonicNowNs();
    rt::Heartbeat(jobs.cb[0], now);
    rt::Heartbeat(jobs.cb[1], now);
    rt::ControlBlock* a = jobs.cb[running];
    rt::ControlBlock* b = jobs.cb[1 - running];
    rt::RequestSuspend(a);
    // Every other switch as gandivad makes it, with the next job pre-woken to spin
    // for the resume (runtime::PreWake); the others without: interleaved, so both
    // see the same machine.
    const bool prewake = i % 2 == 0;
    if (prewake) rt::PreWake(b, opt.spin_us * 1000 * 3 / 2 + 50'000);
    if (!rt::WaitForPhase(a, rt::kPhaseParked, 5'000'000'000ull)) {
      std::fprintf(stderr, "bench_switch: job did not park\n");
      return false;
    }
    const uint64_t resume_at = MonotonicNowNs();
    rt::RequestResume(b);
    // Wait for B to be running, so no two switches overlap.
    if (!rt::WaitForPhase(b, rt::kPhaseRunning, 5'000'000'000ull)) {
      std::fprintf(stderr, "bench_switch: job did not resume\n");
      return false;
    }
    const uint64_t parked = a->parked_at_ns.load(std::memory_order_acquire);
    const uint64_t resumed = b->resumed_at_ns.load(std::memory_order_acquire);
    if (i >= warmup && resumed > parked) {
      (prewake ? out->handover : out->handover_plain).push_back(resumed - parked);
      out->controller_side.push_back(resume_at - parked);
    }
    running = 1 - running;
  }
  return true;
}

// Appends the floor's samples: n back to back, n_idle after a slice-long sleep each.
void MeasureFloor(Shared* sh, const Options& opt, int n, int n_idle, std::vector<uint64_t>* floor,
                  std::vector<uint64_t>* floor_idle) {
  std::vector<uint64_t> v = PingPong(sh, n, 0);
  floor->insert(floor->end(), v.begin(), v.end());
  v = PingPong(sh, n_idle, opt.slice_us * 1000);
  floor_idle->insert(floor_idle->end(), v.begin(), v.end());
}

// Prints the table and writes bench_switch.json.
void Report(const Options& opt, const Switches& s, const std::vector<uint64_t>& floor,
            const std::vector<uint64_t>& floor_idle, const uint64_t iterations[2]) {
  const Summary sw = Summarize(s.handover);
  const Summary sw_plain = Summarize(s.handover_plain);
  const Summary ctl = Summarize(s.controller_side);
  const Summary fl = Summarize(floor);
  const Summary fli = Summarize(floor_idle);
  const double ratio = fl.median_us > 0 ? sw.median_us / fl.median_us : 0;
  const double ratio_idle = fli.median_us > 0 ? sw.median_us / fli.median_us : 0;

  std::printf(
      "bench_switch: %d switches, %llu us slices, %llu us iterations, 2 jobs, parent as "
      "controller\n",
      opt.switches, static_cast<unsigned long long>(opt.slice_us),
      static_cast<unsigned long long>(opt.spin_us));
  std::printf("%-40s %8s %10s %10s %10s %10s\n", "us", "n", "median", "p99", "mean", "max");
  auto row = [](const char* name, const Summary& s) {
    std::printf("%-40s %8zu %10.1f %10.1f %10.1f %10.1f\n", name, s.n, s.median_us, s.p99_us,
                s.mean_us, s.max_us);
  };
  row("switch: A parked -> B running (pre-woken)", sw);
  row("switch without pre-wake", sw_plain);
  row("  of which A parked -> resume issued", ctl);
  row("floor: futex ping-pong, back to back", fl);
  row("floor: futex ping-pong, after slice idle", fli);
  std::printf(
      "ratio median switch / median floor: %.2f back to back, %.2f after slice idle"
      "  (goals: median <= 200 us, ratio <= 2)\n",
      ratio, ratio_idle);

  nlohmann::json j = {
      {"bench", "switch"},
      {"driver",
       "parent process as controller (RequestSuspend, PreWake on every other switch, WaitForPhase, "
       "RequestResume)"},
      {"switches", opt.switches},
      {"slice_us", opt.slice_us},
      {"iteration_spin_us", opt.spin_us},
      {"job_iterations", {iterations[0], iterations[1]}},
      {"switch_us", ToJson(sw)},
      {"switch_without_prewake_us", ToJson(sw_plain)},
      {"parked_to_resume_issued_us", ToJson(ctl)},
      {"floor_futex_pingpong_rtt_us", ToJson(fl)},
      {"floor_futex_pingpong_rtt_after_slice_idle_us", ToJson(fli)},
      {"ratio_median_switch_to_floor", ratio},
      {"ratio_median_switch_to_floor_after_slice_idle", ratio_idle},
      {"goal_median_us", 200},
      {"goal_ratio", 2.0},
  };
  const std::string path = opt.out_dir + "/bench_switch.json";
  std::ofstream(path) << j.dump(2) << "\n";
  std::printf("wrote %s\n", path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!ParseArgs(argc, argv, &opt)) return 2;

  auto* sh = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (sh == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  new (sh) Shared{};

  // Floors, first halves.
  const pid_t ponger = Fork([&] { PongLoop(sh); });
  std::vector<uint64_t> floor, floor_idle;
  MeasureFloor(sh, opt, opt.pingpongs / 2, opt.idle_pingpongs / 2, &floor, &floor_idle);

  Jobs jobs;
  if (!StartJobs(opt, sh, &jobs)) return 1;
  Switches switches;
  const bool ok = RunSwitches(opt, jobs, &switches);
  uint64_t iterations[2];
  StopJobs(sh, &jobs, iterations);

  // Floor, second half: bracketing the switches evens out drift in machine load.
  MeasureFloor(sh, opt, opt.pingpongs - opt.pingpongs / 2,
               opt.idle_pingpongs - opt.idle_pingpongs / 2, &floor, &floor_idle);
  sh->ping.store(3);
  rt::FutexWakeAll(&sh->ping);
  waitpid(ponger, nullptr, 0);
  if (!ok) return 1;
  Report(opt, switches, floor, floor_idle, iterations);
  return 0;
}
