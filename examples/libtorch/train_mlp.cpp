// A small, seeded libtorch (PyTorch C++) MLP trained on synthetic data, on CPU.
// Marks a gandiva iteration boundary after every optimizer step:
//   gandiva run --name mlp -- build/examples/train_mlp --iterations 300
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "gandiva/gandiva.hpp"

namespace {

struct Options {
  int iterations = 200;
  int batch = 128;
  int seed = 0;
  int threads = 1;
  int report_every = 50;
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
    if (a == "--result" && i + 1 < argc) {
      o->result = argv[++i];
      continue;
    }
    std::fprintf(stderr,
                 "usage: train_mlp [--iterations N] [--batch N] [--seed N] [--threads N] "
                 "[--report-every N] [--result FILE]\n");
    return false;
  }
  return o->iterations > 0 && o->batch > 0;
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

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!ParseOptions(argc, argv, &opt)) return 2;
  torch::manual_seed(opt.seed);
  torch::set_num_threads(opt.threads);
  auto model = std::make_shared<Mlp>();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  // A fixed random teacher makes the labels learnable.
  torch::Tensor teacher = torch::randn({256, 10});

  gandiva::Boundary();  // iteration 0 starts here: the job may wait here for its device
  std::vector<float> losses;
  const auto start = std::chrono::steady_clock::now();
  for (int it = 1; it <= opt.iterations; ++it) {
    torch::Tensor x = torch::randn({opt.batch, 256});
    torch::Tensor y = x.matmul(teacher).argmax(1);
    optimizer.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    optimizer.step();
    gandiva::Boundary();
    losses.push_back(loss.item<float>());
    if (opt.report_every && it % opt.report_every == 0) {
      gd_iteration_stats s = gandiva::IterationStats();
      std::printf("[mlp] iter %5d loss %.4f iter_ms ewma %.2f p99 %.2f parks %llu\n", it,
                  losses.back(), s.ewma_ms, s.p99_ms, static_cast<unsigned long long>(s.parks));
      std::fflush(stdout);
    }
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!opt.result.empty()) {
    std::ofstream out(opt.result);
    // steady_clock is CLOCK_MONOTONIC on Linux: comparable with other jobs' timestamps.
    const double start_s = std::chrono::duration<double>(start.time_since_epoch()).count();
    out.precision(17);
    out << "{\"iterations\": " << opt.iterations << ", \"elapsed_s\": " << elapsed
        << ", \"start_monotonic_s\": " << start_s << ", \"end_monotonic_s\": " << start_s + elapsed
        << ", \"losses\": [";
    for (size_t i = 0; i < losses.size(); ++i) out << (i ? ", " : "") << losses[i];
    out << "]}\n";
  }
  std::printf("[mlp] done: %d iterations in %.2f s, final loss %.4f\n", opt.iterations, elapsed,
              losses.back());
  return 0;
}
