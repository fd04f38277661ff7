// See gandiva/scheduler/pack_prediction.h.
#include "gandiva/scheduler/pack_prediction.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace gandiva::sched {

namespace {
constexpr const char* kClassNames[PerfModel::kNumClasses] = {"k80", "p100", "v100"};
constexpr int kSlowest = 0, kFastest = 2;  // k80, v100

void Features(const SoloProfile& p, double out[2]) {
  out[0] = std::log(p.iteration_s);
  out[1] = std::log(p.class_speedup);
}

double Distance2(const double x[2], const double y[2]) {
  return (x[0] - y[0]) * (x[0] - y[0]) + (x[1] - y[1]) * (x[1] - y[1]);
}
}  // namespace

void PackPredictor::Observe(const SoloProfile& a, const SoloProfile& b, double combined) {
  Seen s{};
  Features(a, s.a);
  Features(b, s.b);
  s.combined = combined;
  seen_.push_back(s);
}

std::optional<double> PackPredictor::PredictCombined(const SoloProfile& a,
                                                     const SoloProfile& b) const {
  if (seen_.empty()) return std::nullopt;
  double fa[2], fb[2];
  Features(a, fa);
  Features(b, fb);
  // A pair is the same pair either way round.
  std::vector<std::pair<double, double>> by_distance;  // (distance², combined)
  by_distance.reserve(seen_.size());
  for (const Seen& s : seen_)
    by_distance.emplace_back(
        std::min(Distance2(fa, s.a) + Distance2(fb, s.b), Distance2(fa, s.b) + Distance2(fb, s.a)),
        s.combined);
  const size_t k = std::min(by_distance.size(), static_cast<size_t>(std::max(1, neighbours_)));
  std::partial_sort(by_distance.begin(), by_distance.begin() + k, by_distance.end());
  double sum = 0;
  for (size_t i = 0; i < k; ++i) sum += by_distance[i].second;
  return sum / k;
}

bool PackPredictor::WorthTrying(const SoloProfile& a, const SoloProfile& b) const {
  const auto predicted = PredictCombined(a, b);
  return !predicted || *predicted > 1.0;
}

StatusOr<std::vector<PackPredictionRow>> EvaluatePackPrediction(const PerfModel& model,
                                                                int neighbours) {
  const int types = static_cast<int>(model.type_names().size());
  if (types == 0) return FailedPrecondition("the co-location table has no job types");
  // Each type's solo profile on each class (jobs of one GPU).
  auto profile = [&](int cls, int t) -> std::optional<SoloProfile> {
    const double alone = model.Alone(cls, t, 1);
    const double fast = model.Alone(kFastest, t, 1), slow = model.Alone(kSlowest, t, 1);
    if (alone <= 0 || fast <= 0 || slow <= 0) return std::nullopt;
    return SoloProfile{1.0 / alone, fast / slow};
  };
  std::vector<PackPredictionRow> rows;
  for (int cls = 0; cls < PerfModel::kNumClasses; ++cls) {
    struct Pair {
      int a, b;
      SoloProfile pa, pb;
      double combined;
    };
    std::vector<Pair> pairs;
    for (int a = 0; a < types; ++a)
      for (int b = 0; b < types; ++b) {
        const auto pa = profile(cls, a), pb = profile(cls, b);
        if (!pa || !pb || !model.PairMeasured(cls, a, b, 1) || !model.PairMeasured(cls, b, a, 1))
          continue;
        pairs.push_back(
            {a, b, *pa, *pb, model.PackedFactor(cls, a, b, 1) + model.PackedFactor(cls, b, a, 1)});
      }
    PackPredictionRow row;
    row.gpu_class = kClassNames[cls];
    // Leave one type out: predict its pairs from the pairs of the other types only.
    for (int left_out = 0; left_out < types; ++left_out) {
      PackPredictor predictor(neighbours);
      for (const Pair& p : pairs)
        if (p.a != left_out && p.b != left_out) predictor.Observe(p.pa, p.pb, p.combined);
      for (const Pair& p : pairs) {
        if (p.a != left_out) continue;  // each ordered pair is tested once, when its first is out
        const bool good = p.combined > 1.0, predicted = predictor.WorthTrying(p.pa, p.pb);
        ++row.pairs;
        row.pack_well += good;
        row.true_pos += good && predicted;
        row.false_pos += !good && predicted;
        row.true_neg += !good && !predicted;
        row.false_neg += good && !predicted;
      }
    }
    if (row.pairs == 0) continue;
    row.accuracy = static_cast<double>(row.true_pos + row.true_neg) / row.pairs;
    row.always_try_accuracy = static_cast<double>(row.pack_well) / row.pairs;
    rows.push_back(row);
  }
  return rows;
}

std::string FormatPackPredictionTable(const std::vector<PackPredictionRow>& rows, int neighbours) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line), "%-6s %6s %9s %12s %9s %6s %6s %6s %6s\n", "class", "pairs",
                "pack well", "always try", "predicted", "TP", "FP", "TN", "FN");
  out += line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof(line), "%-6s %6d %9d %11.1f%% %8.1f%% %6d %6d %6d %6d\n",
                  r.gpu_class.c_str(), r.pairs, r.pack_well, 100 * r.always_try_accuracy,
                  100 * r.accuracy, r.true_pos, r.false_pos, r.true_neg, r.false_neg);
    out += line;
  }
  std::snprintf(line, sizeof(line),
                "(jobs of one GPU; leave-one-type-out; %d nearest measured pairs by solo "
                "iteration time and v100/k80 speed-up; packs well: speeds packed, each relative "
                "to alone, sum above 1; accuracy: right predictions / pairs)\n",
                neighbours);
  out += line;
  return out;
}

std::string PackPredictionToJson(const std::vector<PackPredictionRow>& rows, int neighbours) {
  nlohmann::json j = {{"neighbours", neighbours}, {"classes", nlohmann::json::array()}};
  for (const auto& r : rows)
    j["classes"].push_back({{"class", r.gpu_class},
                            {"pairs", r.pairs},
                            {"pack_well", r.pack_well},
                            {"true_pos", r.true_pos},
                            {"false_pos", r.false_pos},
                            {"true_neg", r.true_neg},
                            {"false_neg", r.false_neg},
                            {"accuracy", r.accuracy},
                            {"always_try_accuracy", r.always_try_accuracy}});
  return j.dump(1);
}

}  // namespace gandiva::sched
