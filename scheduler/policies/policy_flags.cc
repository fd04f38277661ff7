// See gandiva/scheduler/policy_flags.h.
#include "gandiva/scheduler/policy_flags.h"

#include <cstdlib>
#include <map>

namespace gandiva::sched {

const char* const kPolicyFlagsUsage = R"( policies:
  --locality L          best-effort|strict|relaxed (default best-effort; philly: relaxed)
  --locality-delay S    relaxed: wait this long for a consolidated placement (default 300)
  --las-thresholds A,B  Tiresias queue thresholds in GPU-seconds (default 3600,36000)
  --las-starve F        Tiresias starvation guard factor (default 0 = off)
  --interval S          Gandiva introspection interval (default 60)
  --max-share N         gandiva: 2 packs a waiting job onto a running one, 1 never (default 2)
  --spread-delay S      gandiva: a gang waits this long for one machine before spreading (default 43200)
  --gandiva-starve F    gandiva starvation guard factor (default 0 = off)
  --no-grow, --no-migrate  disable Gandiva grow-shrink / migration
  --reserve-min-gpus N  reserve-pack: jobs this big go to high-end GPUs (default 4)
)";

std::set<std::string> PolicyValuedFlags() {
  return {"locality",  "locality-delay", "las-thresholds", "las-starve",      "interval",
          "max-share", "spread-delay",   "gandiva-starve", "reserve-min-gpus"};
}

std::set<std::string> PolicyBooleanFlags() { return {"no-grow", "no-migrate"}; }

Status ApplyPolicyFlags(const Flags& f, PolicyOptions* p) {
  GD_RETURN_IF_ERROR(FlagChoice<Locality>(f, "locality",
                                          {{"best-effort", Locality::kBestEffort},
                                           {"strict", Locality::kStrict},
                                           {"relaxed", Locality::kRelaxed}},
                                          &p->locality));
  GD_RETURN_IF_ERROR(FlagNumber(f, "locality-delay", &p->locality_delay));
  if (f.Has("las-thresholds")) {
    const std::string v = f.Get("las-thresholds");
    p->las_thresholds.clear();
    for (const auto& t : SplitList(v)) {
      char* end = nullptr;
      const double d = std::strtod(t.c_str(), &end);
      if (*end != '\0' || !(d > 0)) return InvalidArgument("bad --las-thresholds '" + v + "'");
      p->las_thresholds.push_back(d);
    }
  }
  GD_RETURN_IF_ERROR(FlagNumber(f, "las-starve", &p->las_starve_factor));
  GD_RETURN_IF_ERROR(FlagNumber(f, "interval", &p->gandiva_interval, 0, /*or_equal=*/false));
  GD_RETURN_IF_ERROR(FlagCount(f, "max-share", &p->gandiva_max_share, 1));
  GD_RETURN_IF_ERROR(FlagNumber(f, "spread-delay", &p->gandiva_spread_delay));
  GD_RETURN_IF_ERROR(FlagNumber(f, "gandiva-starve", &p->gandiva_starve_factor));
  p->gandiva_grow = !f.Has("no-grow");
  p->gandiva_migrate = !f.Has("no-migrate");
  return FlagCount(f, "reserve-min-gpus", &p->reserve_min_gpus, 1);
}

}  // namespace gandiva::sched
