// Stored names of the migration stages (indexed by the enums' values); see migration_stage.h.
#include "jobs/migration_stage.h"

#include <iterator>

namespace gandiva::controller {

namespace {
constexpr const char* kArrivalNames[] = {"", "warming", "loaded", "started"};
constexpr const char* kDepartureNames[] = {"", "committed", "handed_over"};
static_assert(std::size(kArrivalNames) == static_cast<size_t>(ArrivalStage::kStarted) + 1);
static_assert(std::size(kDepartureNames) == static_cast<size_t>(DepartureStage::kHandedOver) + 1);

template <typename Stage, size_t N>
std::optional<Stage> StageFromName(const char* const (&names)[N], std::string_view name) {
  for (size_t i = 0; i < N; ++i)
    if (name == names[i]) return static_cast<Stage>(i);
  return std::nullopt;
}
}  // namespace

const char* ArrivalStageName(ArrivalStage stage) {
  return kArrivalNames[static_cast<size_t>(stage)];
}

const char* DepartureStageName(DepartureStage stage) {
  return kDepartureNames[static_cast<size_t>(stage)];
}

std::optional<ArrivalStage> ArrivalStageFromName(std::string_view name) {
  return StageFromName<ArrivalStage>(kArrivalNames, name);
}

std::optional<DepartureStage> DepartureStageFromName(std::string_view name) {
  return StageFromName<DepartureStage>(kDepartureNames, name);
}

}  // namespace gandiva::controller
