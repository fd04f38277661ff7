// Loads the Gavel co-location table into dense arrays indexed by
// (GPU class, size bucket, job type[, partner type]).
#include "gandiva/scheduler/perf_model.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "cluster/csv.h"

namespace gandiva::sched {
namespace {

constexpr const char* kClasses[PerfModel::kNumClasses] = {"k80", "p100", "v100"};

// "('ResNet-50 (batch size 32)', 4)" -> name, gpus. False if not of that shape.
bool ParseKey(const std::string& key, std::string* name, int* gpus) {
  if (key.size() < 7 || key.compare(0, 2, "('") != 0 || key.back() != ')') return false;
  size_t q = key.rfind("',");
  if (q == std::string::npos || q < 2) return false;
  *name = key.substr(2, q - 2);
  long n = 0;
  if (!csv::ParseInt(std::string_view(key).substr(q + 2, key.size() - q - 3), &n) || n < 1)
    return false;
  *gpus = static_cast<int>(n);
  return true;
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

int PerfModel::ClassIndex(const std::string& c) {
  for (int i = 0; i < kNumClasses; ++i)
    if (c == kClasses[i]) return i;
  return -1;
}

int PerfModel::Bucket(int n) { return n <= 1 ? 0 : n == 2 ? 1 : n <= 4 ? 2 : 3; }

PerfModel PerfModel::Neutral() {
  PerfModel m;
  m.neutral_ = true;
  m.types_by_bucket_.assign(4, {});
  return m;
}

StatusOr<PerfModel> PerfModel::Load(const std::string& path) {
  std::string text;
  if (!csv::ReadFile(path, &text)) return NotFound("cannot open co-location table " + path);
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return DataLoss(path + ": not a JSON object");
  PerfModel m;
  try {
    // Pass 1: the set of model names, in sorted order so indices are stable.
    std::map<std::string, int> index;
    for (const char* cls : kClasses) {
      if (!doc.contains(cls)) return DataLoss(path + ": missing GPU class " + cls);
      for (auto it = doc[cls].begin(); it != doc[cls].end(); ++it) {
        std::string name;
        int n;
        if (!ParseKey(it.key(), &name, &n)) return DataLoss(path + ": bad key " + it.key());
        index.emplace(name, 0);
      }
    }
    int next = 0;
    for (auto& [name, i] : index) {
      i = next++;
      m.names_.push_back(name);
    }
    size_t t = m.names_.size();
    m.alone_.assign(kNumClasses * 4 * t, 0.0);
    m.packed_.assign(kNumClasses * 4 * t * t, -1.0f);  // -1: not measured
    std::vector<std::vector<bool>> seen(4, std::vector<bool>(t, false));
    for (int c = 0; c < kNumClasses; ++c) {
      for (auto it = doc[kClasses[c]].begin(); it != doc[kClasses[c]].end(); ++it) {
        std::string name;
        int n;
        ParseKey(it.key(), &name, &n);
        int b = Bucket(n), type = index[name];
        const auto& entry = it.value();
        if (!entry.is_object()) return DataLoss(path + ": entry " + it.key() + " is not an object");
        for (auto p = entry.begin(); p != entry.end(); ++p) {
          if (p.key() == "null") {
            m.AloneRef(c, type, b) = p.value().get<double>();
            seen[b][type] = true;
            continue;
          }
          std::string pname;
          int pn;
          if (!ParseKey(p.key(), &pname, &pn) || !p.value().is_array() || p.value().size() != 2)
            return DataLoss(path + ": bad partner entry under " + it.key());
          if (pn != n) continue;  // only same-size pairs share a GPU set
          m.packed_[m.PairIndex(c, b, type, index[pname])] = p.value()[0].get<float>();
        }
      }
    }
    m.types_by_bucket_.assign(4, {});
    for (int b = 0; b < 4; ++b)
      for (size_t i = 0; i < t; ++i)
        if (seen[b][i]) m.types_by_bucket_[b].push_back(static_cast<int>(i));
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(path + ": " + e.what());
  }
  return m;
}

int PerfModel::FindType(const std::string& name) const {
  auto it = std::find(names_.begin(), names_.end(), name);
  return it == names_.end() ? -1 : static_cast<int>(it - names_.begin());
}

int PerfModel::AssignType(uint64_t seed, int64_t job_id, int num_gpus) const {
  if (neutral_) return -1;
  const auto& pool = types_by_bucket_[Bucket(num_gpus)];
  const auto& use = pool.empty() ? types_by_bucket_[0] : pool;
  if (use.empty()) return -1;
  uint64_t h = SplitMix64(SplitMix64(seed) ^ static_cast<uint64_t>(job_id));
  return use[h % use.size()];
}

double PerfModel::Alone(int cls, int type, int n) const {
  if (neutral_ || type < 0 || cls < 0) return 0;
  size_t t = names_.size();
  double v = alone_[(cls * 4 + Bucket(n)) * t + type];
  return v;
}

double PerfModel::PackedFactor(int cls, int type, int partner, int n) const {
  if (neutral_ || type < 0 || partner < 0 || cls < 0) return 0.5;
  int b = Bucket(n);
  double alone = alone_[(cls * 4 + b) * names_.size() + type];
  float packed = packed_[PairIndex(cls, b, type, partner)];
  if (alone <= 0 || packed < 0) return 0.5;  // unmeasured: as good as taking turns
  return std::min(1.0, packed / alone);
}

bool PerfModel::PairMeasured(int cls, int type, int partner, int n) const {
  if (neutral_ || type < 0 || partner < 0 || cls < 0) return false;
  const int b = Bucket(n);
  return alone_[(cls * 4 + b) * names_.size() + type] > 0 &&
         packed_[PairIndex(cls, b, type, partner)] >= 0;
}

double PerfModel::ClassSpeed(int cls, int ref_cls, int type, int n) const {
  double a = Alone(cls, type, n), r = Alone(ref_cls, type, n);
  if (a <= 0 || r <= 0) return 1.0;
  return a / r;
}

double PerfModel::ScaleFactor(int cls, int type, int from, int to) const {
  if (from == to) return 1.0;
  double a = Alone(cls, type, from), b = Alone(cls, type, to);
  if (a <= 0 || b <= 0) return 1.0;
  double linear = static_cast<double>(to) / from;
  double f = b / a;
  return to > from ? std::clamp(f, 1.0, linear) : std::clamp(f, linear, 1.0);
}

}  // namespace gandiva::sched
