// A job whose whole state is N MiB of bytes plus an iteration counter, one
// registered checkpoint section: the subject of the migration downtime bench.
// Each ~1 ms iteration changes a few words, so the final checksum proves that
// every iteration ran exactly once across checkpoints and migrations.
// --frozen-fraction F leaves the first F of the bytes as they started (a frozen
// backbone, embeddings, data held in memory): what a migration's warm copy
// holds already and need not be sent. --layout buffer registers the bytes with
// gd_register_buffer instead of save and load functions (a restore then
// receives them in place), between two small sections that keep the counter
// and the timing events. --layout functions-sized is the default layout with
// a load function that asks its section's size before it reads.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "gandiva/gandiva.hpp"

namespace {

struct Options {
  uint64_t mib = 64;
  uint64_t seed = 0;
  uint64_t iterations = 1000;
  double iteration_ms = 1.0;
  double frozen_fraction = 0;
  uint64_t checkpoint_at = 0;  // write DIR/state.gdck after this iteration
  std::string checkpoint_dir;
  uint64_t report_every = 0;
  std::string result;
  std::string timing;  // appends "EVENT PID CLOCK_MONOTONIC_NS" lines (bench profiling)
  std::string layout = "functions";  // or "buffer"
};

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) return false;
    ++i;
    if (a == "--mib")
      o->mib = std::strtoull(v, nullptr, 10);
    else if (a == "--seed")
      o->seed = std::strtoull(v, nullptr, 10);
    else if (a == "--iterations")
      o->iterations = std::strtoull(v, nullptr, 10);
    else if (a == "--iteration-ms")
      o->iteration_ms = std::atof(v);
    else if (a == "--frozen-fraction")
      o->frozen_fraction = std::atof(v);
    else if (a == "--checkpoint-at")
      o->checkpoint_at = std::strtoull(v, nullptr, 10);
    else if (a == "--checkpoint-dir")
      o->checkpoint_dir = v;
    else if (a == "--report-every")
      o->report_every = std::strtoull(v, nullptr, 10);
    else if (a == "--result")
      o->result = v;
    else if (a == "--timing")
      o->timing = v;
    else if (a == "--layout")
      o->layout = v;
    else
      return false;
  }
  return o->mib > 0 && o->frozen_fraction >= 0 && o->frozen_fraction < 1 &&
         (o->layout == "functions" || o->layout == "functions-sized" || o->layout == "buffer") &&
         (!o->checkpoint_at || !o->checkpoint_dir.empty());
}

uint64_t SplitMix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

struct State {
  uint64_t iteration = 0;
  uint64_t words = 0;
  std::unique_ptr<uint64_t[]> data;
  int timing_fd = -1;                // --timing: where save/load/resume times go
  uint64_t boundary_entered_ns = 0;  // when the job last entered a boundary
};

// One line per event, one write(2) on an O_APPEND file shared by the source and
// destination copies: same clock as gandivad's, so a migration can be taken apart.
void Event(const State& s, const char* what, uint64_t ns) {
  if (s.timing_fd < 0) return;
  char line[96];
  const int n = std::snprintf(line, sizeof(line), "%s %d %" PRIu64 "\n", what,
                              static_cast<int>(getpid()), ns);
  [[maybe_unused]] const ssize_t written = write(s.timing_fd, line, n);  // best effort
}

// Big pieces: each gd_write of >= 256 KiB goes out without a copy.
constexpr size_t kPiece = 64u << 20;

int Save(void* user, gd_writer* w) {
  auto* s = static_cast<State*>(user);
  Event(*s, "boundary", s->boundary_entered_ns);
  Event(*s, "save_begin", NowNs());
  if (gd_write(w, &s->iteration, sizeof(s->iteration)) != 0) return 1;
  const auto* p = reinterpret_cast<const char*>(s->data.get());
  const size_t total = s->words * 8;
  for (size_t off = 0; off < total; off += kPiece)
    if (gd_write(w, p + off, std::min(kPiece, total - off)) != 0) return 1;
  Event(*s, "save_end", NowNs());
  return 0;
}

// The section's size a load expects: the counter and the bytes.
long long ExpectedSize(const State& s) {
  return static_cast<long long>(sizeof(s.iteration) + s.words * 8);
}

// A load's failure, said as a checkpoint of another size (the usual cause).
int WrongSize(const State& s, gd_reader* r) {
  std::fprintf(stderr,
               "[synthetic] checkpoint holds %lld bytes of state, this job has %lld "
               "(different --mib?)\n",
               gd_section_size(r), ExpectedSize(s));
  return 1;
}

// The counter, then the bytes.
bool ReadState(State* s, gd_reader* r) {
  const size_t total = s->words * 8;
  return gd_read(r, &s->iteration, sizeof(s->iteration)) == sizeof(s->iteration) &&
         gd_read(r, s->data.get(), total) == static_cast<long long>(total);
}

// Reads first and checks the size after: a load function that asks the size
// before its first read makes a migration's arriving section be read whole
// before the load (stream.h, LoadWhileReading), and then copied.
int Load(void* user, gd_reader* r) {
  auto* s = static_cast<State*>(user);
  Event(*s, "load_begin", NowNs());
  if (!ReadState(s, r) || gd_section_size(r) != ExpectedSize(*s)) return WrongSize(*s, r);
  Event(*s, "load_end", NowNs());
  return 0;
}

// --layout functions-sized: the same bytes, but the load asks the section's
// size before its first read (as a cautious load function may), so that an
// arriving section is read whole first and copied out after.
int LoadSizeFirst(void* user, gd_reader* r) {
  auto* s = static_cast<State*>(user);
  Event(*s, "load_begin", NowNs());
  if (gd_section_size(r) != ExpectedSize(*s)) return WrongSize(*s, r);
  if (!ReadState(s, r)) return 1;
  Event(*s, "load_end", NowNs());
  return 0;
}

// --layout buffer: "begin" (no bytes) and "step" (the counter) frame the
// buffer section, so the save and load events still bracket the whole state.
int SaveBegin(void* user, gd_writer*) {
  auto* s = static_cast<State*>(user);
  Event(*s, "boundary", s->boundary_entered_ns);
  Event(*s, "save_begin", NowNs());
  return 0;
}

int LoadBegin(void* user, gd_reader*) {
  Event(*static_cast<State*>(user), "load_begin", NowNs());
  return 0;
}

int SaveStep(void* user, gd_writer* w) {
  auto* s = static_cast<State*>(user);
  if (gd_write(w, &s->iteration, sizeof(s->iteration)) != 0) return 1;
  Event(*s, "save_end", NowNs());
  return 0;
}

int LoadStep(void* user, gd_reader* r) {
  auto* s = static_cast<State*>(user);
  if (gd_section_size(r) != sizeof(s->iteration) ||
      gd_read(r, &s->iteration, sizeof(s->iteration)) != sizeof(s->iteration))
    return 1;
  Event(*s, "load_end", NowNs());
  return 0;
}

uint64_t Checksum(const State& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t i = 0; i < s.words; ++i) h = (h ^ s.data[i]) * 0x100000001b3ull;
  return h ^ s.iteration;
}

void SleepMs(double ms) {
  struct timespec ts = {static_cast<time_t>(ms / 1000),
                        static_cast<long>(std::fmod(ms, 1000.0) * 1e6)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!Parse(argc, argv, &opt)) {
    std::fprintf(
        stderr,
        "usage: synthetic_state_job [--mib N] [--seed N] [--iterations N] "
        "[--iteration-ms X] [--frozen-fraction F] [--checkpoint-at N --checkpoint-dir DIR] "
        "[--report-every N] [--result FILE] [--timing FILE] [--layout "
        "functions|functions-sized|buffer]\n");
    return 2;
  }
  State st;
  if (!opt.timing.empty())
    st.timing_fd = open(opt.timing.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  st.words = opt.mib * (1u << 20) / 8;
  st.data.reset(new uint64_t[st.words]);
  uint64_t x = opt.seed;
  for (uint64_t i = 0; i < st.words; ++i) st.data[i] = SplitMix64(&x);
  const uint64_t frozen_words = static_cast<uint64_t>(opt.frozen_fraction * st.words);
  const uint64_t trained_words = st.words - frozen_words;

  if (opt.layout == "buffer") {
    if (gd_register_state("begin", &SaveBegin, &LoadBegin, &st) != 0 ||
        gd_register_buffer("bytes", st.data.get(), st.words * 8) != 0 ||
        gd_register_state("step", &SaveStep, &LoadStep, &st) != 0)
      return 1;
  } else if (gd_register_state("synthetic", &Save,
                               opt.layout == "functions-sized" ? &LoadSizeFirst : &Load,
                               &st) != 0) {
    return 1;
  }
  Event(st, "first_boundary_begin", NowNs());
  gandiva::Boundary();  // a GANDIVA_RESTORE run loads its state here
  Event(st, "first_boundary_end", NowNs());
  const uint64_t restored_at = st.iteration;
  if (restored_at > 0) Event(st, "resume", NowNs());
  const auto start = std::chrono::steady_clock::now();
  while (st.iteration < opt.iterations) {
    SleepMs(opt.iteration_ms);
    // Touch a few words spread over the trained part: the state evolves every
    // iteration. Each iteration's words come from a generator of its own (one
    // that stepped on from the last iteration's would XOR most words twice,
    // back to where they started, and leave the state as it began).
    uint64_t r = (st.iteration + 1) * 0xd1b54a32d192ed03ull ^ (opt.seed << 32);
    for (int k = 0; k < 4; ++k) {
      const uint64_t v = SplitMix64(&r);
      st.data[frozen_words + v % trained_words] ^= v;
    }
    ++st.iteration;  // complete before the boundary, so a checkpoint there records it
    st.boundary_entered_ns = st.timing_fd >= 0 ? NowNs() : 0;
    gandiva::Boundary();
    if (opt.checkpoint_at && st.iteration == opt.checkpoint_at) {
      Event(st, "checkpoint_begin", NowNs());
      if (!gandiva::Checkpoint(opt.checkpoint_dir.c_str())) return 1;
      Event(st, "checkpoint_end", NowNs());  // written, fsynced and renamed
    }
    if (opt.report_every && st.iteration % opt.report_every == 0) {
      std::printf("[synthetic] iter %" PRIu64 "\n", st.iteration);
      std::fflush(stdout);
    }
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char checksum[32];
  std::snprintf(checksum, sizeof(checksum), "%016" PRIx64, Checksum(st));
  if (!opt.result.empty()) {
    FILE* f = std::fopen(opt.result.c_str(), "w");
    if (!f) return 1;
    std::fprintf(f,
                 "{\"iterations\": %" PRIu64 ", \"mib\": %" PRIu64 ", \"seed\": %" PRIu64
                 ", \"restored_at_iteration\": %" PRIu64
                 ", \"elapsed_s\": %.6f, "
                 "\"checksum\": \"%s\"}\n",
                 st.iteration, opt.mib, opt.seed, restored_at, elapsed, checksum);
    std::fclose(f);
  }
  std::printf("[synthetic] done: %" PRIu64 " iterations, %" PRIu64 " MiB, checksum %s\n",
              st.iteration, opt.mib, checksum);
  return 0;
}
