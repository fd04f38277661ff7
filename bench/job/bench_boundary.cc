// bench_boundary: what one iteration boundary costs a job when nothing is asked
// of it (the hot path of ARCHITECTURE.md, budget <= 50 ns), unmanaged and
// managed, against clock_gettime(CLOCK_MONOTONIC) alone, all in one run.
//
// The runtime attaches once per process and stays managed or unmanaged for
// life, so each mode runs in its own process: a forked child creates a shared
// control block and points GANDIVA_CONTROL_BLOCK at it before first use
// (managed), then the parent, which never attached, runs the same set
// (unmanaged). They run one after the other so they never share a core. The
// parent merges both Google Benchmark JSON files into one and prints a table.
//
// Usage: bench_boundary [--out DIR] [--benchmark_* flags]
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gandiva/contract/shared_control_block.h"
#include "gandiva/runtime/job_runtime.h"

namespace {

using gandiva::runtime::JobRuntime;
using gandiva::runtime::SharedControlBlock;

// gd_boundary() as a framework calls it: through libgandiva.so's exported
// symbol, with that library's own runtime instance. Loaded with dlopen so the
// static runtime linked into this program (JobRuntime::Get) stays separate and
// the call really crosses the shared-library boundary.
using GdFn = void (*)();
GdFn g_shared_gd_boundary = nullptr;

void BM_ClockGettimeMonotonic(benchmark::State& state) {
  timespec ts;
  for (auto _ : state) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    benchmark::DoNotOptimize(ts);
  }
}

void BM_JobRuntimeBoundary(benchmark::State& state) {
  JobRuntime& rt = JobRuntime::Get();
  for (auto _ : state) rt.Boundary();
  state.counters["managed"] = rt.managed() ? 1 : 0;
}

// Includes the singleton lookup every call site pays (Get() is an acquire load).
void BM_JobRuntimeGetBoundary(benchmark::State& state) {
  for (auto _ : state) JobRuntime::Get().Boundary();
}

void BM_GdBoundaryLibgandivaSo(benchmark::State& state) {
  if (!g_shared_gd_boundary) {
    state.SkipWithError("libgandiva.so not loadable");
    return;
  }
  for (auto _ : state) g_shared_gd_boundary();
}

// Not on the fast path: JobRuntime::Park() looks the CUDA shim's park hooks up
// with dlsym(RTLD_DEFAULT) on every park while none is found (no shim loaded),
// i.e. between a job parking and the controller hearing of it. This is its price
// here; it grows with the number of objects in the global scope.
void BM_DlsymMissingSymbol(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(dlsym(RTLD_DEFAULT, "gandiva_shim_park_hooks"));
}

void RegisterAll() {
  benchmark::RegisterBenchmark("clock_gettime(MONOTONIC)", BM_ClockGettimeMonotonic);
  benchmark::RegisterBenchmark("JobRuntime::Boundary", BM_JobRuntimeBoundary);
  benchmark::RegisterBenchmark("JobRuntime::Get().Boundary", BM_JobRuntimeGetBoundary);
  benchmark::RegisterBenchmark("gd_boundary(libgandiva.so)", BM_GdBoundaryLibgandivaSo);
  benchmark::RegisterBenchmark("park: dlsym(shim hooks), missing", BM_DlsymMissingSymbol);
}

void LoadSharedLibrary() {
  void* handle = dlopen(GANDIVA_SHARED_LIB_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::fprintf(stderr, "bench_boundary: %s\n", dlerror());
    return;
  }
  g_shared_gd_boundary = reinterpret_cast<GdFn>(dlsym(handle, "gd_boundary"));
  // Attach now, so this instance's mode is fixed by the environment set up here.
  if (auto attach = reinterpret_cast<int (*)()>(dlsym(handle, "gd_attach"))) attach();
}

// Runs every benchmark in this process with `json_path` as Google Benchmark's JSON output.
int RunBenchmarks(std::vector<std::string> args, const std::string& json_path) {
  args.push_back("--benchmark_out=" + json_path);
  args.push_back("--benchmark_out_format=json");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  argv.push_back(nullptr);
  benchmark::Initialize(&argc, argv.data());
  if (benchmark::ReportUnrecognizedArguments(argc, argv.data())) return 2;
  RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json();
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// Runs the benchmarks in a child attached to a shared control block, as a job
// under gandivad is. Returns 0 on success.
int RunManaged(const std::vector<std::string>& bm_args, const std::string& json_path) {
  std::printf("== managed (shared-memory control block, as under gandivad) ==\n");
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    return 1;
  }
  if (child == 0) {
    const std::string name = "/gandiva.bench_boundary." + std::to_string(getpid());
    auto block = SharedControlBlock::Create(name, /*job_id=*/1, /*lease_ns=*/0, "bench");
    if (!block.ok()) {
      std::fprintf(stderr, "bench_boundary: %s\n", block.status().ToString().c_str());
      _exit(1);
    }
    setenv(gandiva::runtime::kEnvControlBlock, name.c_str(), 1);
    LoadSharedLibrary();
    if (!JobRuntime::Get().managed()) {
      std::fprintf(stderr, "bench_boundary: runtime did not attach to %s\n", name.c_str());
      SharedControlBlock::Remove(name);
      _exit(1);
    }
    const int rc = RunBenchmarks(bm_args, json_path);
    SharedControlBlock::Remove(name);
    std::fflush(nullptr);
    _exit(rc);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench_boundary: managed run failed\n");
    return 1;
  }
  return 0;
}

// Merges the two runs: one row per benchmark, ns per call in each mode; prints
// the table and writes out_dir/bench_boundary.json.
void Merge(const std::string& out_dir, const std::string& managed_json,
           const std::string& unmanaged_json) {
  nlohmann::json merged;
  merged["context"] = ReadJson(unmanaged_json).value("context", nlohmann::json::object());
  merged["goal_ns"] = 50;
  std::map<std::string, std::map<std::string, double>> rows;
  std::vector<std::string> order;
  for (const auto& [mode, path] :
       {std::pair{"managed", managed_json}, {"unmanaged", unmanaged_json}}) {
    const nlohmann::json j = ReadJson(path);
    merged[mode] = j.value("benchmarks", nlohmann::json::array());
    for (const auto& b : merged[mode]) {
      const std::string name = b.value("name", "");
      if (!rows.count(name)) order.push_back(name);
      rows[name][mode] = b.value("cpu_time", 0.0);  // time_unit is ns (the default)
    }
  }
  nlohmann::json summary = nlohmann::json::array();
  std::printf("\n%-30s %14s %14s\n", "ns per call", "unmanaged", "managed");
  for (const auto& name : order) {
    const double u = rows[name]["unmanaged"];
    const double m = rows[name]["managed"];
    std::printf("%-30s %14.1f %14.1f\n", name.c_str(), u, m);
    summary.push_back({{"name", name}, {"unmanaged_ns", u}, {"managed_ns", m}});
  }
  merged["summary"] = summary;
  const std::string path = out_dir + "/bench_boundary.json";
  std::ofstream(path) << merged.dump(2) << "\n";
  std::printf("wrote %s\n", path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_dir = ".";
  std::vector<std::string> bm_args{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (a.rfind("--out=", 0) == 0) {
      out_dir = a.substr(6);
    } else {
      bm_args.push_back(a);
    }
  }
  const std::string managed_json = out_dir + "/bench_boundary.managed.json";
  const std::string unmanaged_json = out_dir + "/bench_boundary.unmanaged.json";

  // Keep the runtime's "running unmanaged" notice and debug logs out of the table.
  unsetenv(gandiva::runtime::kEnvControlBlock);
  if (int rc = RunManaged(bm_args, managed_json); rc != 0) return rc;

  std::printf("\n== unmanaged (no controller: private control block) ==\n");
  std::fflush(stdout);
  LoadSharedLibrary();
  if (int rc = RunBenchmarks(bm_args, unmanaged_json); rc != 0) return rc;
  Merge(out_dir, managed_json, unmanaged_json);
  return 0;
}
