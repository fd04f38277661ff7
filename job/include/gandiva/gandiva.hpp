// C++ layer over the job-side C API (gandiva.h).
#ifndef GANDIVA_GANDIVA_HPP_
#define GANDIVA_GANDIVA_HPP_

#include <string>
#include <utility>

#include "gandiva/gandiva.h"

namespace gandiva {

// Marks an iteration boundary; see gd_boundary().
inline void Boundary() { gd_boundary(); }
inline bool Managed() { return gd_managed() != 0; }
inline uint64_t JobId() { return gd_job_id(); }

inline gd_iteration_stats IterationStats() {
  gd_iteration_stats s{};
  gd_get_iteration_stats(&s);
  return s;
}

// Marks a boundary when the scope ends: `for (...) { gandiva::Iteration it; step(); }`.
class Iteration {
 public:
  Iteration() = default;
  ~Iteration() { gd_boundary(); }
  Iteration(const Iteration&) = delete;
  Iteration& operator=(const Iteration&) = delete;
};

// ---- Checkpoint: registered state (see the checkpoint section of gandiva.h) ----

// Writes every registered section to dir/state.gdck now; false on failure.
inline bool Checkpoint(const char* dir) { return gd_checkpoint(dir) == 0; }

// Registers a section for as long as it lives: `save(gd_writer*)` and
// `load(gd_reader*)` return true on success. Register before the first
// boundary so that a GANDIVA_RESTORE run can load it there.
//   gandiva::RegisteredState s("counter",
//       [&](gd_writer* w) { return gd_write(w, &n, sizeof n) == 0; },
//       [&](gd_reader* r) { return gd_read(r, &n, sizeof n) == sizeof n; });
template <typename Save, typename Load>
class RegisteredState {
 public:
  RegisteredState(const char* name, Save save, Load load)
      : name_(name), save_(std::move(save)), load_(std::move(load)) {
    ok_ = gd_register_state(name_.c_str(), &SaveThunk, &LoadThunk, this) == 0;
  }
  ~RegisteredState() {
    if (ok_) gd_unregister_state(name_.c_str());
  }
  RegisteredState(const RegisteredState&) = delete;
  RegisteredState& operator=(const RegisteredState&) = delete;
  // False if registration failed (a duplicate name).
  bool ok() const { return ok_; }

 private:
  static int SaveThunk(void* self, gd_writer* w) {
    return static_cast<RegisteredState*>(self)->save_(w) ? 0 : 1;
  }
  static int LoadThunk(void* self, gd_reader* r) {
    return static_cast<RegisteredState*>(self)->load_(r) ? 0 : 1;
  }
  std::string name_;
  Save save_;
  Load load_;
  bool ok_ = false;
};

}  // namespace gandiva

#endif  // GANDIVA_GANDIVA_HPP_
