// gandivad's job table on disk; see job_store.h.
#include "jobs/job_store.h"

#include <nlohmann/json.hpp>

#include "gandiva/common/log.h"
#include "sqlite/owned_db.h"

namespace gandiva::controller {

namespace {

using Json = nlohmann::json;
using sqlite::ResetOnExit;
using sqlite::Statement;

sqlite::OwnedFormat Format() {
  sqlite::OwnedFormat f;
  f.label = {"job table", "gandivad job table"};
  f.format = "gandivad-jobs";
  f.schema_version = 1;
  // One row a job: its record as JSON (the fields change more often than a
  // schema should), and what changes apart from it.
  f.schema_sql =
      "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, record TEXT NOT NULL,"
      " block TEXT NOT NULL, held INTEGER NOT NULL DEFAULT 0, usage TEXT NOT NULL DEFAULT '{}');"
      "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);";
  // A crash of gandivad loses nothing in WAL mode at NORMAL; a power cut, which
  // may lose the last writes, also ends every job the table would speak of.
  f.synchronous = "NORMAL";
  return f;
}

Json UsageToJson(const DeviceUsage& u) {
  return {{"slices", u.slices}, {"swaps", u.swaps}, {"device_time_ns", u.device_time_ns}};
}

DeviceUsage UsageFromJson(const Json& j) {
  DeviceUsage u;
  u.slices = j.value("slices", uint64_t{0});
  u.swaps = j.value("swaps", uint64_t{0});
  u.device_time_ns = j.value("device_time_ns", uint64_t{0});
  return u;
}

}  // namespace

std::string JobToStoredText(const Job& j) {
  Json out = {
      {"id", j.id},
      {"name", j.name},
      {"device", j.device},
      {"devices", j.devices},
      {"weight", j.weight},
      {"command", j.command},
      {"cwd", j.cwd},
      {"env", j.env},
      {"spawned", j.spawned},
      {"pid", j.pid},
      {"process_start", j.process_start},
      {"owner_uid", j.owner_uid},
      {"launched", j.launched},
      {"user", j.user},
      {"stdout_log", j.stdout_log},
      {"stderr_log", j.stderr_log},
      {"memory_limit", j.memory_limit},
      {"cgroup_dir", j.cgroup_dir},
      {"ended", j.ended},
      {"failed", j.failed},
      {"exit_code", j.exit_code},
      {"end_reason", static_cast<int>(j.end.reason)},
      {"end_signal", j.end.signal},
      {"end_detail", j.end.detail},
      {"registered_ns", j.registered_ns},
      {"ended_ns", j.ended_ns},
      {"usage_at_end", UsageToJson(j.usage_at_end)},
      {"ranks", j.ranks},
      {"gang_error", j.gang_error},
      {"migrated", j.migrated()},  // as a gandivad that knows no departure stage reads it
      {"departure", DepartureStageName(j.departure)},
      {"migrated_to", j.migrated_to},
      {"arrival", ArrivalStageName(j.arrival)},
      {"migrated_from", j.migrated_from},
      {"managed_by", j.managed_by},
  };
  if (j.final_stats) {
    const runtime::IterationStats& f = *j.final_stats;
    out["final"] = {{"iterations", f.iterations}, {"mean_ms", f.mean_ms},
                    {"ewma_ms", f.ewma_ms},       {"p50_ms", f.p50_ms},
                    {"p99_ms", f.p99_ms},         {"iterations_per_s", f.iterations_per_s},
                    {"parks", j.final_parks}};
  }
  // Replace, not throw, on bytes that are not UTF-8 (a command line may hold any).
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

StatusOr<Job> JobFromStoredText(const std::string& text) {
  Json in = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!in.is_object()) return DataLoss("a stored job record is not a JSON object");
  try {
    Job j;
    j.id = in.at("id").get<uint64_t>();
    j.name = in.at("name").get<std::string>();
    j.device = in.at("device").get<std::string>();
    // Records written before jobs could span devices have none: theirs is `device`.
    j.devices = in.value("devices", std::vector<std::string>{j.device});
    j.weight = in.at("weight").get<double>();
    j.command = in.at("command").get<std::vector<std::string>>();
    j.cwd = in.at("cwd").get<std::string>();
    j.env = in.at("env").get<std::map<std::string, std::string>>();
    j.spawned = in.at("spawned").get<bool>();
    j.pid = in.at("pid").get<int>();
    j.process_start = in.at("process_start").get<uint64_t>();
    j.owner_uid = in.value("owner_uid", int64_t{-1});
    j.launched = in.at("launched").get<bool>();
    j.user = in.at("user").get<std::string>();
    j.stdout_log = in.at("stdout_log").get<std::string>();
    j.stderr_log = in.at("stderr_log").get<std::string>();
    j.memory_limit = in.at("memory_limit").get<std::string>();
    j.cgroup_dir = in.at("cgroup_dir").get<std::string>();
    j.ended = in.at("ended").get<bool>();
    j.failed = in.at("failed").get<bool>();
    j.exit_code = in.at("exit_code").get<int>();
    const int reason = in.at("end_reason").get<int>();
    if (reason < 0 || reason > static_cast<int>(protocol::ExitReason::kMigrated))
      return DataLoss("a stored job record has exit reason " + std::to_string(reason));
    j.end.reason = static_cast<protocol::ExitReason>(reason);
    j.end.signal = in.at("end_signal").get<int>();
    j.end.detail = in.at("end_detail").get<std::string>();
    j.registered_ns = in.at("registered_ns").get<uint64_t>();
    j.ended_ns = in.at("ended_ns").get<uint64_t>();
    j.usage_at_end = UsageFromJson(in.at("usage_at_end"));
    j.ranks = in.at("ranks").get<uint32_t>();
    j.gang_error = in.at("gang_error").get<std::string>();
    // Records written before the stages were kept say only whether the job
    // had moved: it was handed over then (nothing went on after a restart).
    const bool migrated = in.at("migrated").get<bool>();
    const auto departure = DepartureStageFromName(in.value("departure", ""));
    const auto arrival = ArrivalStageFromName(in.value("arrival", ""));
    if (!departure || !arrival)
      return DataLoss("a stored job record has an unknown migration stage");
    j.departure = *departure != DepartureStage::kNone ? *departure
                  : migrated                          ? DepartureStage::kHandedOver
                                                      : DepartureStage::kNone;
    j.migrated_to = in.value("migrated_to", "");
    j.arrival = *arrival;
    j.migrated_from = in.at("migrated_from").get<std::string>();
    j.managed_by = in.at("managed_by").get<std::string>();
    if (in.contains("final")) {
      const Json& f = in.at("final");
      runtime::IterationStats stats;
      stats.iterations = f.at("iterations").get<uint64_t>();
      stats.mean_ms = f.at("mean_ms").get<double>();
      stats.ewma_ms = f.at("ewma_ms").get<double>();
      stats.p50_ms = f.at("p50_ms").get<double>();
      stats.p99_ms = f.at("p99_ms").get<double>();
      stats.iterations_per_s = f.at("iterations_per_s").get<double>();
      j.final_stats = stats;
      j.final_parks = f.at("parks").get<uint64_t>();
    }
    if (j.id == 0 || j.ranks == 0) return DataLoss("a stored job record has id or ranks 0");
    return j;
  } catch (const Json::exception& e) {  // a missing field or one of the wrong type
    return DataLoss(std::string("a stored job record cannot be read: ") + e.what());
  }
}

struct JobStore::Statements {
  std::unique_ptr<Statement> put, put_held, put_usage, erase, all, get_meta, set_meta;
};

JobStore::JobStore(std::unique_ptr<sqlite::SqliteDb> db, std::unique_ptr<Statements> statements)
    : db_(std::move(db)), stmts_(std::move(statements)) {}

JobStore::~JobStore() = default;

const std::string& JobStore::path() const { return db_->path(); }

StatusOr<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path) {
  GD_ASSIGN_OR_RETURN(std::unique_ptr<sqlite::SqliteDb> db, sqlite::OpenOwned(path, Format()));
  auto s = std::make_unique<Statements>();
  GD_ASSIGN_OR_RETURN(s->put, Statement::Prepare(*db,
                                                 "INSERT INTO jobs (id, record, block) VALUES "
                                                 "(?1, ?2, ?3) ON CONFLICT(id) DO UPDATE SET "
                                                 "record = excluded.record, block = "
                                                 "excluded.block"));
  GD_ASSIGN_OR_RETURN(s->put_held,
                      Statement::Prepare(*db, "UPDATE jobs SET held = ?2 WHERE id = ?1"));
  GD_ASSIGN_OR_RETURN(s->put_usage,
                      Statement::Prepare(*db, "UPDATE jobs SET usage = ?2 WHERE id = ?1"));
  GD_ASSIGN_OR_RETURN(s->erase, Statement::Prepare(*db, "DELETE FROM jobs WHERE id = ?1"));
  GD_ASSIGN_OR_RETURN(s->all, Statement::Prepare(*db,
                                                 "SELECT id, record, block, held, usage FROM "
                                                 "jobs ORDER BY id"));
  GD_ASSIGN_OR_RETURN(s->get_meta,
                      Statement::Prepare(*db, "SELECT value FROM meta WHERE key = ?1"));
  GD_ASSIGN_OR_RETURN(s->set_meta, Statement::Prepare(*db,
                                                      "INSERT INTO meta (key, value) VALUES "
                                                      "(?1, ?2) ON CONFLICT(key) DO UPDATE SET "
                                                      "value = excluded.value"));
  return std::unique_ptr<JobStore>(new JobStore(std::move(db), std::move(s)));
}

void JobStore::Note(const Status& s, const char* what) {
  if (!s.ok() && !failing_)
    GD_LOG(kError, "%s: cannot write %s: %s (a restarted gandivad may not know this job)",
           db_->path().c_str(), what, s.ToString().c_str());
  else if (s.ok() && failing_)
    GD_LOG(kInfo, "%s: writing again", db_->path().c_str());
  failing_ = !s.ok();
}

void JobStore::Put(const Job& job) {
  std::lock_guard lock(mu_);
  Statement& put = *stmts_->put;
  ResetOnExit reset(put);
  put.BindInt(1, static_cast<int64_t>(job.id));
  put.BindText(2, JobToStoredText(job));
  put.BindText(3, job.block ? job.block->name() : "");
  Note(put.Run(), "a job's record");
}

void JobStore::PutHeld(uint64_t id, bool held) {
  std::lock_guard lock(mu_);
  Statement& put = *stmts_->put_held;
  ResetOnExit reset(put);
  put.BindInt(1, static_cast<int64_t>(id));
  put.BindInt(2, held ? 1 : 0);
  Note(put.Run(), "whether a job is held");
}

void JobStore::PutUsage(const std::vector<std::pair<uint64_t, DeviceUsage>>& usage) {
  if (usage.empty()) return;
  std::lock_guard lock(mu_);
  Status s = db_->Exec("BEGIN");
  for (const auto& [id, u] : usage) {
    if (!s.ok()) break;
    Statement& put = *stmts_->put_usage;
    ResetOnExit reset(put);
    put.BindInt(1, static_cast<int64_t>(id));
    put.BindText(2, UsageToJson(u).dump());
    s = put.Run();
  }
  if (s.ok())
    s = db_->Exec("COMMIT");
  else
    (void)db_->Exec("ROLLBACK");  // the write's own error is the one to report
  Note(s, "jobs' device figures");
}

void JobStore::Erase(uint64_t id) {
  std::lock_guard lock(mu_);
  Statement& erase = *stmts_->erase;
  ResetOnExit reset(erase);
  erase.BindInt(1, static_cast<int64_t>(id));
  Note(erase.Run(), "the removal of an old record");
}

StatusOr<std::vector<StoredJob>> JobStore::LoadAll() {
  std::lock_guard lock(mu_);
  Statement& all = *stmts_->all;
  ResetOnExit reset(all);
  std::vector<StoredJob> jobs;
  for (;;) {
    GD_ASSIGN_OR_RETURN(bool row, all.Step());
    if (!row) break;
    StoredJob stored;
    auto job = JobFromStoredText(all.Text(1));
    if (!job.ok() || job->id != static_cast<uint64_t>(all.Int(0)))
      return DataLoss(db_->name() + ": the record of job " + std::to_string(all.Int(0)) + ": " +
                      (job.ok() ? "it names another id" : job.status().message()));
    stored.job = std::move(job).value();
    stored.block_name = all.Text(2);
    stored.held = all.Int(3) != 0;
    const Json usage = Json::parse(all.Text(4), nullptr, false);
    try {
      stored.usage = UsageFromJson(usage);
    } catch (const Json::exception&) {  // not an object, or a figure of the wrong type
      return DataLoss(db_->name() + ": job " + std::to_string(all.Int(0)) +
                      "'s device figures cannot be read");
    }
    jobs.push_back(std::move(stored));
  }
  return jobs;
}

StatusOr<std::string> JobStore::Boot() {
  std::lock_guard lock(mu_);
  Statement& get = *stmts_->get_meta;
  ResetOnExit reset(get);
  get.BindText(1, "boot_id");
  GD_ASSIGN_OR_RETURN(bool row, get.Step());
  return row ? get.Text(0) : std::string();
}

Status JobStore::SetBoot(const std::string& boot_id) {
  std::lock_guard lock(mu_);
  Statement& set = *stmts_->set_meta;
  ResetOnExit reset(set);
  set.BindText(1, "boot_id");
  set.BindText(2, boot_id);
  return set.Run();
}

}  // namespace gandiva::controller
