// PNG plots of a JSON report, drawn by a small matplotlib script run with the
// system Python (kept here so the library has no other runtime files).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gandiva/scheduler/sim_runner.h"

namespace gandiva::sched {
namespace {

constexpr const char* kScript = R"PY(
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
doc = json.load(open(sys.argv[1]))
prefix = sys.argv[2]
runs = doc["runs"]
title = doc.get("trace", "")
fig, ax = plt.subplots(figsize=(7, 4))
for r in runs:
    xs = [max(p[0], 1.0) / 3600.0 for p in r["jct_cdf"]]
    ys = [p[1] for p in r["jct_cdf"]]
    ax.plot(xs, ys, label="%s (avg %.1f h)" % (r["policy"], r["avg_jct_s"] / 3600.0))
ax.set_xscale("log")
ax.set_xlabel("job completion time (hours, log scale)")
ax.set_ylabel("fraction of jobs")
ax.set_title("JCT CDF: " + title, fontsize=9)
ax.grid(True, alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(prefix + "jct_cdf.png", dpi=80)
fig, axes = plt.subplots(len(runs), 1, figsize=(7, 1.3 * len(runs) + 0.8), sharex=True, squeeze=False)
for ax, r in zip(axes[:, 0], runs):
    t = [p[0] / 86400.0 for p in r["util"]]
    ax.plot(t, [100 * p[1] for p in r["util"]], lw=0.7, label="allocated")
    ax.plot(t, [100 * p[2] for p in r["util"]], lw=0.7, label="effective")
    ax.set_ylabel(r["policy"], fontsize=8)
    ax.set_ylim(0, 110)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
axes[0, 0].legend(fontsize=7, loc="upper right")
axes[0, 0].set_title("GPU utilisation (%) over time: " + title, fontsize=9)
axes[-1, 0].set_xlabel("days")
fig.tight_layout()
fig.savefig(prefix + "utilisation.png", dpi=80)
)PY";

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

Status WritePlots(const std::string& json_path, const std::string& out_prefix,
                  const std::string& python) {
  std::error_code ec;
  auto script = std::filesystem::temp_directory_path(ec) /
                ("gandiva_sim_plot_" + std::to_string(getpid()) + ".py");
  if (ec) return Unavailable("no temporary directory: " + ec.message());
  {
    std::ofstream out(script);
    out << kScript;
    if (!out) return Unavailable("cannot write " + script.string());
  }
  std::string cmd = Quote(python) + " " + Quote(script.string()) + " " + Quote(json_path) + " " +
                    Quote(out_prefix);
  int rc = std::system(cmd.c_str());
  std::filesystem::remove(script, ec);
  if (rc != 0)
    return Unavailable("plotting failed (" + python + " with matplotlib), exit status " +
                       std::to_string(rc));
  return Status::Ok();
}

}  // namespace gandiva::sched
