// A registered state for the checkpoint stream's tests: seeded random bytes,
// and what a load function read back.
#ifndef GANDIVA_TESTS_CHECKPOINT_TEST_STATE_H_
#define GANDIVA_TESTS_CHECKPOINT_TEST_STATE_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace gandiva::checkpoint {

struct TestState {
  std::string name;
  std::vector<uint8_t> data;
  std::vector<uint8_t> loaded;
  int loads = 0;
};

inline std::shared_ptr<TestState> RandomState(const std::string& name, size_t size, uint32_t seed) {
  auto s = std::make_shared<TestState>();
  s->name = name;
  std::mt19937 rng(seed);
  s->data.resize(size);
  for (auto& b : s->data) b = static_cast<uint8_t>(rng());
  return s;
}

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_TESTS_CHECKPOINT_TEST_STATE_H_
