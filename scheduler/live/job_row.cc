#include "live/job_row.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace gandiva::sched::live::job_row {

// `ended` is not a JobRecord field: it is IsEnded(state), kept as a column so
// that List(false) reads a partial index instead of every job ever submitted.
// The submitted columns come first, then the run columns (kRunColumnList),
// then `ended`.
const char* const kColumnList =
    "name, user, uid, vc, kind, gpus, ranks, command, cwd, env, restartable, submit_time, state, "
    "attempt, node, device, node_job, checkpoint_dir, checkpoint_time, start_time, end_time, "
    "attained, run_time, exit_code, detail, cancel_requested, failure, retries, not_before, "
    "move_from_node, move_from_device, move_from_job, ended";
const int kColumnCount = 33;
const char* const kRunColumnList =
    "state, attempt, node, device, node_job, checkpoint_dir, checkpoint_time, start_time, "
    "end_time, attained, run_time, exit_code, detail, cancel_requested, failure, retries, "
    "not_before, move_from_node, move_from_device, move_from_job";
const int kRunColumnCount = 20;

namespace {

using nlohmann::json;

// JSON text of the command (an array) and env (an object). nlohmann throws on
// a string that is not UTF-8; the exception stays here.
StatusOr<std::string> ToJsonText(const json& value, const char* what) {
  try {
    return value.dump();
  } catch (const json::exception&) {
    return InvalidArgument(std::string("the job's ") + what + " holds a string that is not UTF-8");
  }
}

Status BadRow(const std::string& path, int64_t id, const std::string& why) {
  return DataLoss("scheduler database " + path + ": job " + std::to_string(id) + ": " + why);
}

// Reads the flat JSON this file writes, a ["..", ..] command or an {"k": "v"}
// env, straight into the record (SAX: no JSON tree built and copied; that
// took List from ~41 to ~32 ms at 10,000 jobs). Anything else, nested or not a string, fails.
class FlatStrings : public nlohmann::json_sax<json> {
 public:
  explicit FlatStrings(std::vector<std::string>* array) : array_(array) {}
  explicit FlatStrings(std::map<std::string, std::string>* object) : object_(object) {}

  bool start_array(std::size_t) override { return array_ != nullptr && depth_++ == 0; }
  bool start_object(std::size_t) override { return object_ != nullptr && depth_++ == 0; }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool string(string_t& v) override {
    if (depth_ != 1) return false;
    if (array_ != nullptr) {
      array_->push_back(std::move(v));
    } else {
      (*object_)[std::move(key_)] = std::move(v);
    }
    return true;
  }
  bool end_array() override { return --depth_ == 0; }
  bool end_object() override { return --depth_ == 0; }
  bool null() override { return false; }
  bool boolean(bool) override { return false; }
  bool number_integer(number_integer_t) override { return false; }
  bool number_unsigned(number_unsigned_t) override { return false; }
  bool number_float(number_float_t, const string_t&) override { return false; }
  bool binary(binary_t&) override { return false; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  std::vector<std::string>* array_ = nullptr;
  std::map<std::string, std::string>* object_ = nullptr;
  int depth_ = 0;
  std::string key_;
};

template <typename Out>
Status ParseFlat(const std::string& text, Out* out, const char* what) {
  FlatStrings reader(out);
  bool ok = false;
  try {
    ok = json::sax_parse(text.data(), text.data() + text.size(), &reader);
  } catch (const json::exception&) {
    ok = false;
  }
  if (!ok) return InvalidArgument(std::string(what) + " is not the JSON this store writes");
  return Status::Ok();
}

}  // namespace

Status ValidateRun(const JobRecord& job) {
  for (double t : {job.checkpoint_time, job.start_time, job.end_time, job.attained, job.run_time,
                   job.not_before}) {
    if (std::isnan(t)) return InvalidArgument("job " + std::to_string(job.id) + " has a NaN time");
  }
  // A move is stored as its source node (empty: none), so it must name one.
  if (job.move && (job.move->from_node.empty() || job.move->from_job < 1))
    return InvalidArgument("job " + std::to_string(job.id) +
                           ": a migration under way needs its source node and job");
  return Status::Ok();
}

Status Validate(const JobRecord& job) {
  if (job.gpus < 1)
    return InvalidArgument("a job needs at least 1 GPU, got " + std::to_string(job.gpus));
  if (job.ranks < 1) {
    return InvalidArgument("a job needs at least 1 rank, got " + std::to_string(job.ranks));
  }
  if (job.command.empty()) return InvalidArgument("a job needs a command");
  if (std::isnan(job.submit_time))
    return InvalidArgument("job " + std::to_string(job.id) + " has a NaN time");
  return ValidateRun(job);
}

Status Bind(const JobRecord& job, Statement& stmt, int first) {
  GD_ASSIGN_OR_RETURN(std::string command, ToJsonText(json(job.command), "command"));
  GD_ASSIGN_OR_RETURN(std::string env, ToJsonText(json(job.env), "env"));
  int i = first;  // the order of kColumnList
  stmt.BindText(i++, job.name);
  stmt.BindText(i++, job.user);
  stmt.BindInt(i++, job.uid);
  stmt.BindText(i++, job.vc);
  stmt.BindText(i++, job.kind);
  stmt.BindInt(i++, job.gpus);
  stmt.BindInt(i++, job.ranks);
  stmt.BindText(i++, command);
  stmt.BindText(i++, job.cwd);
  stmt.BindText(i++, env);
  stmt.BindInt(i++, job.restartable ? 1 : 0);
  stmt.BindDouble(i++, job.submit_time);
  if (i - first != kColumnCount - kRunColumnCount - 1)
    return Internal("job_row::Bind and kColumnList disagree");
  GD_RETURN_IF_ERROR(BindRun(job, stmt, i));
  stmt.BindInt(i + kRunColumnCount, IsEnded(job.state) ? 1 : 0);
  return Status::Ok();
}

Status BindRun(const JobRecord& job, Statement& stmt, int first) {
  int i = first;  // the order of kRunColumnList
  stmt.BindText(i++, LiveJobStateName(job.state));
  stmt.BindInt(i++, job.attempt);
  stmt.BindText(i++, job.node);
  stmt.BindText(i++, job.device);
  stmt.BindInt(i++, job.node_job);
  stmt.BindText(i++, job.checkpoint_dir);
  stmt.BindDouble(i++, job.checkpoint_time);
  stmt.BindDouble(i++, job.start_time);
  stmt.BindDouble(i++, job.end_time);
  stmt.BindDouble(i++, job.attained);
  stmt.BindDouble(i++, job.run_time);
  stmt.BindInt(i++, job.exit_code);
  stmt.BindText(i++, job.detail);
  stmt.BindInt(i++, job.cancel_requested ? 1 : 0);
  stmt.BindText(i++, FailureClassName(job.failure));
  stmt.BindInt(i++, job.retries);
  stmt.BindDouble(i++, job.not_before);
  stmt.BindText(i++, job.move ? job.move->from_node : std::string());
  stmt.BindText(i++, job.move ? job.move->from_device : std::string());
  stmt.BindInt(i++, job.move ? job.move->from_job : 0);
  if (i - first != kRunColumnCount) return Internal("job_row::BindRun and kRunColumnList disagree");
  return Status::Ok();
}

StatusOr<JobRecord> Read(const Statement& stmt, const std::string& path) {
  JobRecord job;
  job.id = stmt.Int(0);
  int c = 1;  // the order of kColumnList
  job.name = stmt.Text(c++);
  job.user = stmt.Text(c++);
  job.uid = stmt.Int(c++);
  job.vc = stmt.Text(c++);
  job.kind = stmt.Text(c++);
  job.gpus = static_cast<int>(stmt.Int(c++));
  job.ranks = static_cast<int>(stmt.Int(c++));
  Status command = ParseFlat(stmt.Text(c++), &job.command, "command");
  if (!command.ok()) return BadRow(path, job.id, command.message());
  job.cwd = stmt.Text(c++);
  Status env = ParseFlat(stmt.Text(c++), &job.env, "env");
  if (!env.ok()) return BadRow(path, job.id, env.message());
  job.restartable = stmt.Int(c++) != 0;
  job.submit_time = stmt.Double(c++);
  std::string state = stmt.Text(c++);
  std::optional<LiveJobState> parsed = ParseLiveJobState(state);
  if (!parsed) return BadRow(path, job.id, "unknown state \"" + state + "\"");
  job.state = *parsed;
  job.attempt = static_cast<int>(stmt.Int(c++));
  job.node = stmt.Text(c++);
  job.device = stmt.Text(c++);
  job.node_job = stmt.Int(c++);
  job.checkpoint_dir = stmt.Text(c++);
  job.checkpoint_time = stmt.Double(c++);
  job.start_time = stmt.Double(c++);
  job.end_time = stmt.Double(c++);
  job.attained = stmt.Double(c++);
  job.run_time = stmt.Double(c++);
  job.exit_code = static_cast<int>(stmt.Int(c++));
  job.detail = stmt.Text(c++);
  job.cancel_requested = stmt.Int(c++) != 0;
  const std::string failure = stmt.Text(c++);
  std::optional<FailureClass> parsed_failure = ParseFailureClass(failure);
  if (!parsed_failure) return BadRow(path, job.id, "unknown failure class \"" + failure + "\"");
  job.failure = *parsed_failure;
  job.retries = static_cast<int>(stmt.Int(c++));
  job.not_before = stmt.Double(c++);
  std::string from_node = stmt.Text(c++);
  std::string from_device = stmt.Text(c++);
  const int64_t from_job = stmt.Int(c++);
  if (!from_node.empty())
    job.move = JobMove{std::move(from_node), std::move(from_device), from_job};
  // ended (the last column): derived from state.
  return job;
}

}  // namespace gandiva::sched::live::job_row
