// The decision digest (see sim_digest.h): FNV-1a over the fields' bytes.
#include "gandiva/scheduler/sim_digest.h"

#include <bit>
#include <cstdio>

namespace gandiva::sched {
namespace {

class Fnv {
 public:
  void Add(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h_ ^= (v >> (8 * i)) & 0xff;
      h_ *= 0x100000001b3ULL;
    }
  }
  void Add(double v) { Add(std::bit_cast<uint64_t>(v)); }
  void Add(int64_t v) { Add(static_cast<uint64_t>(v)); }
  void Add(int v) { Add(static_cast<uint64_t>(static_cast<int64_t>(v))); }
  void Add(bool v) { Add(static_cast<uint64_t>(v)); }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

}  // namespace

uint64_t DecisionDigest(const SimResult& r) {
  Fnv h;
  h.Add(static_cast<int64_t>(r.jobs.size()));
  for (const JobRecord& j : r.jobs) {
    h.Add(j.submit);
    h.Add(j.first_start);
    h.Add(j.finish);
    h.Add(j.num_gpus);
    h.Add(j.preemptions);
    h.Add(j.migrations);
  }
  h.Add(static_cast<int64_t>(r.util.size()));
  for (const UtilPoint& u : r.util) {
    h.Add(u.time);
    h.Add(u.allocated);
    h.Add(u.effective);
  }
  h.Add(r.allocated_gpu_seconds);
  h.Add(r.effective_gpu_seconds);
  h.Add(r.events);
  h.Add(r.schedule_calls);
  h.Add(r.preemptions);
  h.Add(r.migrations);
  h.Add(r.resizes);
  h.Add(r.actions_digest);
  const PolicyStats& p = r.policy;
  h.Add(p.packs);
  h.Add(p.unpacks);
  h.Add(p.time_slices);
  h.Add(p.grows);
  h.Add(p.shrinks);
  h.Add(static_cast<int64_t>(p.predictions.size()));
  for (const PredictionRecord& x : p.predictions) {
    h.Add(x.predicted);
    h.Add(x.actual);
  }
  h.Add(static_cast<int64_t>(p.pack_trials.size()));
  for (const PackTrialRecord& x : p.pack_trials) {
    h.Add(x.guest_type);
    h.Add(x.resident_type);
    h.Add(x.gpus);
    h.Add(x.guest_rate);
    h.Add(x.resident_rate);
    h.Add(x.kept);
  }
  return h.value();
}

std::string DigestHex(uint64_t digest) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(digest));
  return buf;
}

}  // namespace gandiva::sched
