// A small, seeded libtorch (PyTorch C++) MLP trained on synthetic data, on CPU.
// Marks a gandiva iteration boundary after every optimizer step:
//   gandiva run --name mlp -- build/examples/train_mlp --iterations 300
// Restorable: model, optimizer, the default CPU generator, the iteration
// counter and the losses are one registered checkpoint section, so a run
// started with GANDIVA_RESTORE=DIR continues bitwise identically.
#include <torch/torch.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gandiva/gandiva.hpp"

namespace {

struct Options {
  int iterations = 200;
  int batch = 128;
  int seed = 0;
  int threads = 0;  // 0: libtorch's default
  int report_every = 50;
  int checkpoint_at = 0;  // write a checkpoint after this iteration
  std::string checkpoint_dir;
  std::string result;
};

bool ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](int* v) { return i + 1 < argc && (*v = std::atoi(argv[++i]), true); };
    if (a == "--iterations" && next(&o->iterations)) continue;
    if (a == "--batch" && next(&o->batch)) continue;
    if (a == "--seed" && next(&o->seed)) continue;
    if (a == "--threads" && next(&o->threads)) continue;
    if (a == "--report-every" && next(&o->report_every)) continue;
    if (a == "--checkpoint-at" && next(&o->checkpoint_at)) continue;
    if (a == "--result" && i + 1 < argc) {
      o->result = argv[++i];
      continue;
    }
    if (a == "--checkpoint-dir" && i + 1 < argc) {
      o->checkpoint_dir = argv[++i];
      continue;
    }
    std::fprintf(stderr,
                 "usage: train_mlp [--iterations N] [--batch N] [--seed N] [--threads N] "
                 "[--report-every N] [--result FILE] [--checkpoint-at N --checkpoint-dir DIR]\n");
    return false;
  }
  return o->iterations > 0 && o->batch > 0 && (!o->checkpoint_at || !o->checkpoint_dir.empty());
}

struct Mlp : torch::nn::Module {
  Mlp() {
    fc1 = register_module("fc1", torch::nn::Linear(256, 512));
    fc2 = register_module("fc2", torch::nn::Linear(512, 256));
    fc3 = register_module("fc3", torch::nn::Linear(256, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(fc1->forward(x));
    x = torch::relu(fc2->forward(x));
    return fc3->forward(x);
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};

// SHA-256 (FIPS 180-4), for a parameter digest comparable across runs.
class Sha256 {
 public:
  void Update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    total_ += n;
    while (n--) {
      block_[used_++] = *p++;
      if (used_ == 64) Compress();
    }
  }
  std::string HexDigest() {
    const uint64_t bits = total_ * 8;
    const uint8_t pad = 0x80, zero = 0;
    Update(&pad, 1);
    while (used_ != 56) Update(&zero, 1);
    for (int i = 7; i >= 0; --i) {
      const uint8_t b = static_cast<uint8_t>(bits >> (i * 8));
      Update(&b, 1);
    }
    std::string out;
    char buf[9];
    for (uint32_t v : h_) {
      std::snprintf(buf, sizeof(buf), "%08x", v);
      out += buf;
    }
    return out;
  }

 private:
  static uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void Compress() {
    static constexpr uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t{block_[4 * i]} << 24 | uint32_t{block_[4 * i + 1]} << 16 |
             uint32_t{block_[4 * i + 2]} << 8 | block_[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 =
          h + (Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const uint32_t t2 = (Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    const uint32_t v[8] = {a, b, c, d, e, f, g, h};
    for (int i = 0; i < 8; ++i) h_[i] += v[i];
    used_ = 0;
  }
  std::array<uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t block_[64] = {};
  size_t used_ = 0;
  uint64_t total_ = 0;
};

std::string ParametersDigest(Mlp& model) {
  Sha256 sha;
  for (const auto& p : model.parameters()) {
    torch::Tensor t = p.detach().contiguous();
    sha.Update(t.data_ptr(), t.numel() * t.element_size());
  }
  return sha.HexDigest();
}

// Everything the run needs to continue exactly: one checkpoint section.
struct TrainingState {
  std::shared_ptr<Mlp> model;
  torch::optim::SGD* optimizer;
  int64_t iteration = 0;
  std::vector<float> losses;
};

// Save and load functions for gd_register_state. libtorch reports errors by
// throwing c10::Error: caught here, never thrown into gandiva.
int SaveTraining(void* user, gd_writer* w) {
  auto* st = static_cast<TrainingState*>(user);
  try {
    torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
    st->model->save(model_archive);
    st->optimizer->save(optimizer_archive);
    archive.write("model", model_archive);
    archive.write("optimizer", optimizer_archive);
    archive.write("iteration", torch::tensor(st->iteration, torch::kInt64));
    archive.write("losses",
                  torch::from_blob(st->losses.data(), {static_cast<int64_t>(st->losses.size())},
                                   torch::kFloat32)
                      .clone());
    auto gen = at::detail::getDefaultCPUGenerator();
    torch::Tensor rng;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      rng = gen.get_state();
    }
    archive.write("cpu_rng", rng);
    std::ostringstream out;
    archive.save_to(out);
    const std::string bytes = out.str();
    return gd_write(w, bytes.data(), bytes.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[mlp] cannot save the training state: %s\n", e.what());
    return 1;
  }
}

int LoadTraining(void* user, gd_reader* r) {
  auto* st = static_cast<TrainingState*>(user);
  try {
    std::string bytes(static_cast<size_t>(gd_section_size(r)), '\0');
    if (gd_read(r, bytes.data(), bytes.size()) != static_cast<long long>(bytes.size())) return 1;
    std::istringstream in(bytes);
    torch::serialize::InputArchive archive, model_archive, optimizer_archive;
    archive.load_from(in);
    archive.read("model", model_archive);
    archive.read("optimizer", optimizer_archive);
    st->model->load(model_archive);
    st->optimizer->load(optimizer_archive);
    torch::Tensor iteration, losses, rng;
    archive.read("iteration", iteration);
    archive.read("losses", losses);
    archive.read("cpu_rng", rng);
    st->iteration = iteration.item<int64_t>();
    losses = losses.contiguous();
    st->losses.assign(losses.data_ptr<float>(), losses.data_ptr<float>() + losses.numel());
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[mlp] cannot load the training state: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!ParseOptions(argc, argv, &opt)) return 2;
  torch::manual_seed(opt.seed);
  if (opt.threads > 0) torch::set_num_threads(opt.threads);
  auto model = std::make_shared<Mlp>();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  // A fixed random teacher makes the labels learnable.
  torch::Tensor teacher = torch::randn({256, 10});

  TrainingState st{model, &optimizer};
  // Before the first boundary: a GANDIVA_RESTORE run loads the section there.
  if (gd_register_state("mlp", &SaveTraining, &LoadTraining, &st) != 0) return 1;
  gandiva::Boundary();  // iteration 0 starts here: the job may wait here for its device
  const int64_t restored_at = st.iteration;
  const auto start = std::chrono::steady_clock::now();
  while (st.iteration < opt.iterations) {
    torch::Tensor x = torch::randn({opt.batch, 256});
    torch::Tensor y = x.matmul(teacher).argmax(1);
    optimizer.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    st.losses.push_back(loss.item<float>());
    optimizer.step();
    ++st.iteration;  // complete: a checkpoint at this boundary records it
    gandiva::Boundary();
    const int64_t it = st.iteration;
    if (opt.checkpoint_at && it == opt.checkpoint_at) {
      if (!gandiva::Checkpoint(opt.checkpoint_dir.c_str())) return 1;
      std::printf("[mlp] checkpoint at iteration %lld in %s\n", static_cast<long long>(it),
                  opt.checkpoint_dir.c_str());
    }
    if (opt.report_every && it % opt.report_every == 0) {
      gd_iteration_stats s = gandiva::IterationStats();
      std::printf("[mlp] iter %5lld loss %.4f iter_ms ewma %.2f p99 %.2f parks %llu\n",
                  static_cast<long long>(it), st.losses.back(), s.ewma_ms, s.p99_ms,
                  static_cast<unsigned long long>(s.parks));
      std::fflush(stdout);
    }
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<float>& losses = st.losses;
  if (!opt.result.empty()) {
    std::ofstream out(opt.result);
    // steady_clock is CLOCK_MONOTONIC on Linux: comparable with other jobs' timestamps.
    const double start_s = std::chrono::duration<double>(start.time_since_epoch()).count();
    out.precision(17);
    out << "{\"iterations\": " << opt.iterations << ", \"elapsed_s\": " << elapsed
        << ", \"start_monotonic_s\": " << start_s << ", \"end_monotonic_s\": " << start_s + elapsed
        << ", \"restored_at_iteration\": " << restored_at << ", \"parameters_sha256\": \""
        << ParametersDigest(*model) << "\""
        << ", \"losses\": [";
    for (size_t i = 0; i < losses.size(); ++i) out << (i ? ", " : "") << losses[i];
    out << "]}\n";
  }
  std::printf("[mlp] done: %d iterations in %.2f s, final loss %.4f\n", opt.iterations, elapsed,
              losses.empty() ? 0.0f : losses.back());
  gd_unregister_state("mlp");
  return 0;
}
