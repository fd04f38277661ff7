// Where a job stands in a migration's hand-over, kept with its record in the
// job table on disk (job_store.cc), so that a gandivad restarted mid-migration
// finishes the hand-over rather than lose the job or let it train twice
// (issue 31, item 5; docs/migration.md, "Nothing is lost").
//
// On the destination, the job's copy (ArrivalSession):
//
//   warming -> loaded -> started
//
//   warming: started here and held at its first boundary; its state has not
//     loaded. Released, it exits (its block's exit_if_orphaned): a restarted
//     gandivad lets it go, and the job trains on at its source.
//   loaded: its state loaded and migrate_commit succeeded, so its source may
//     have ended its own process: this copy is the job now. It stays parked
//     and held until its source's migrate_start, across a restart of this
//     gandivad too (node_readopt.cc).
//   started: released by migrate_start; an ordinary job from here on.
//
// On the source, the job leaving (MigrationSource):
//
//   committed -> handed_over
//
//   committed: its state has loaded on the destination (JobHost::MarkMigrated,
//     with the destination's "node/job"); its process here is ended, and
//     migrate_start is sent until the destination answers, by a restarted
//     gandivad too.
//   handed_over: the destination answered migrate_start.
#ifndef GANDIVA_NODE_JOBS_MIGRATION_STAGE_H_
#define GANDIVA_NODE_JOBS_MIGRATION_STAGE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace gandiva::controller {

enum class ArrivalStage : uint8_t { kNone, kWarming, kLoaded, kStarted };
enum class DepartureStage : uint8_t { kNone, kCommitted, kHandedOver };

// The names the job table stores ("" for kNone, "warming", "committed", ...),
// and back: nullopt for a name that is none of them.
const char* ArrivalStageName(ArrivalStage stage);
const char* DepartureStageName(DepartureStage stage);
std::optional<ArrivalStage> ArrivalStageFromName(std::string_view name);
std::optional<DepartureStage> DepartureStageFromName(std::string_view name);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_MIGRATION_STAGE_H_
