// Marks a few iteration boundaries unmanaged (no controller) through the C++
// layer, checkpoints one registered counter, and prints what the C API reports.
#include <chrono>
#include <cstdio>
#include <gandiva/gandiva.hpp>  // and through it gandiva/gandiva.h
#include <thread>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: app CHECKPOINT_DIR\n");
    return 2;
  }
  long long counter = 0;
  gandiva::RegisteredState state(
      "counter", [&](gd_writer* w) { return gd_write(w, &counter, sizeof counter) == 0; },
      [&](gd_reader* r) { return gd_read(r, &counter, sizeof counter) == sizeof counter; });
  for (int i = 0; i < 5; ++i) {
    gandiva::Iteration it;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ++counter;
  }
  gd_iteration_stats s{};
  if (gd_get_iteration_stats(&s) != 0) return 1;
  std::printf("managed=%d job_id=%llu iterations=%llu mean_ms_positive=%d\n", gd_managed(),
              static_cast<unsigned long long>(gd_job_id()),
              static_cast<unsigned long long>(s.iterations), s.mean_ms > 0 ? 1 : 0);
  std::printf("registered=%d checkpoint=%d\n", state.ok() ? 1 : 0,
              gandiva::Checkpoint(argv[1]) ? 1 : 0);
  return 0;
}
