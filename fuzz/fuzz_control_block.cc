// libFuzzer harness: what gandivad reads from control blocks, which belong to
// the jobs' users and may hold anything. The input fills a gang's rank blocks
// (sizeof(ControlBlock) bytes each, the last one padded with zeros) and the
// leader's park target; the harness reads them as gandivad does: the profile
// (p50/p99 and the ring, as `gandiva ps` shows them), the transfer error (a
// string with no NUL must still end at its field), and the gang's park
// decision over the ranks' phases and counts, which must answer with a target
// or a count it was given (never park the gang where no rank is).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "gandiva/contract/control_block.h"
#include "gandiva/contract/profiler.h"
#include "jobs/gang_park.h"

using namespace gandiva;
using controller::GangParkDecision;
using controller::RankView;

namespace {

RankView ViewOf(const runtime::ControlBlock& cb) {  // as Gang::Views reads a rank
  RankView v;
  const uint32_t phase = cb.phase.load();
  v.count = cb.profile.iterations.load();
  v.state = phase == runtime::kPhaseRunning  ? RankView::kRunning
            : phase == runtime::kPhaseParked ? RankView::kParked
            : phase == runtime::kPhaseExited ? RankView::kExited
                                             : RankView::kStarting;
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sizeof(uint64_t)) return 0;
  uint64_t target;
  std::memcpy(&target, data, sizeof(target));
  data += sizeof(target);
  size -= sizeof(target);
  const size_t ranks = std::min<size_t>(4, size / sizeof(runtime::ControlBlock) + 1);
  std::vector<std::unique_ptr<runtime::ControlBlock>> blocks;
  std::vector<RankView> views;
  for (size_t k = 0; k < ranks; ++k) {
    auto cb = std::make_unique<runtime::ControlBlock>();  // zeroed, then the input over it
    const size_t at = k * sizeof(runtime::ControlBlock);
    if (at < size)
      std::memcpy(static_cast<void*>(cb.get()), data + at,
                  std::min(sizeof(runtime::ControlBlock), size - at));
    const runtime::IterationStats stats = runtime::ReadIterationStats(cb->profile);
    (void)stats;
    const std::string error = runtime::TransferError(cb.get());
    if (error.size() > runtime::kTransferErrorSize) std::abort();
    views.push_back(ViewOf(*cb));
    blocks.push_back(std::move(cb));
  }
  const GangParkDecision d = controller::DecideGangPark(views, target);
  if (d.kind == GangParkDecision::kParked) {
    bool someone_there = false;
    for (const RankView& v : views) someone_there |= v.count == d.count;
    if (!someone_there) std::abort();
  }
  (void)controller::FirstParkTarget(views);
  return 0;
}
