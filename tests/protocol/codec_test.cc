// The wire protocol: schema validation of requests, replies, errors; the enums.
#include "gandiva/protocol/codec.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace gandiva::protocol {
namespace {

TEST(CodecTest, RoundTripsAValidRequest) {
  std::string wire = EncodeRequest(MessageType::kSetSlice, {{"device", "cpu0"}, {"ms", 100}});
  auto r = DecodeRequest(wire);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->type, MessageType::kSetSlice);
  EXPECT_EQ(r->body["ms"], 100);
  EXPECT_FALSE(r->body.contains("v"));
}

TEST(CodecTest, RejectsMalformedRequestsWithAReason) {
  struct Case {
    const char* wire;
    StatusCode code;
    const char* says;
  } cases[] = {
      {"", StatusCode::kInvalidArgument, "not valid JSON"},
      {"\x01\x02garbage", StatusCode::kInvalidArgument, "not valid JSON"},
      {"[1,2]", StatusCode::kInvalidArgument, "JSON object"},
      {R"({"type":"hello"})", StatusCode::kInvalidArgument, "version"},
      {R"({"v":99,"type":"hello"})", StatusCode::kFailedPrecondition, "version 99"},
      {R"({"v":1})", StatusCode::kInvalidArgument, "no 'type'"},
      {R"({"v":1,"type":"explode"})", StatusCode::kInvalidArgument, "unknown request type"},
      {R"({"v":1,"type":"suspend"})", StatusCode::kInvalidArgument, "needs field 'job'"},
      {R"({"v":1,"type":"suspend","job":"3"})", StatusCode::kInvalidArgument, "must be a integer"},
      {R"({"v":1,"type":"suspend","job":3,"jbo":4})", StatusCode::kInvalidArgument,
       "no field 'jbo'"},
      {R"({"v":1,"type":"register_job","command":[1]})", StatusCode::kInvalidArgument,
       "list of strings"},
  };
  for (const auto& c : cases) {
    auto r = DecodeRequest(c.wire);
    ASSERT_FALSE(r.ok()) << c.wire;
    EXPECT_EQ(r.status().code(), c.code) << c.wire;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos)
        << c.wire << " -> " << r.status().message();
  }
}

TEST(CodecTest, ErrorRepliesCarryTheStatus) {
  auto r = DecodeReply(EncodeErrorReply(NotFound("no job 9")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "no job 9");
  auto ok = DecodeReply(EncodeOkReply({{"x", 1}}));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["x"], 1);
  EXPECT_FALSE(DecodeReply("nonsense").ok());
  EXPECT_FALSE(DecodeReply(R"({"ok":false,"error":{"code":7}})").ok());
}

TEST(SchemaTest, EveryMessageHasAUniqueWireNameAndKnownFields) {
  std::set<std::string_view> names;
  for (const auto& m : AllMessages()) {
    EXPECT_TRUE(names.insert(m.wire_name).second) << m.wire_name;
    EXPECT_EQ(MessageTypeFromWire(m.wire_name), m.type);
  }
  for (const auto& f : AllFields()) EXPECT_NE(WireName(f.message), "?");
}

}  // namespace
}  // namespace gandiva::protocol

namespace gandiva::protocol {
namespace {

// ---- Replies

Json OperationReply() {
  return {{"kind", "migrate"}, {"state", "done"},   {"step", ""},          {"error", ""},
          {"target", "b"},     {"bytes", 1 << 20},  {"downtime_ms", 38.5}, {"to_job", 3},
          {"start_tries", 1},  {"duration_s", 1.25}};
}

Json JobReply() {
  return {{"id", 1},
          {"name", "cnn"},
          {"device", "cpu0"},
          {"devices", {"cpu0"}},
          {"state", "running"},
          {"held", false},
          {"boundary_warning", ""},
          {"weight", 1.0},
          {"pid", 4242},
          {"command", {"python3", "train.py"}},
          {"iterations", 17},
          {"mean_ms", 4.5},
          {"ewma_ms", 4.4},
          {"p50_ms", 4.3},
          {"p99_ms", 6.0},
          {"iterations_per_s", 220.0},
          {"alone_ms", 4.1},
          {"rate_vs_alone", nullptr},
          {"slices", 3},
          {"swaps", 0},
          {"swapped_bytes", 0},
          {"parks", 3},
          {"device_time_s", 0.3},
          {"wall_time_s", 1.5},
          {"device_bytes", 0},
          {"device_allocations", 0},
          {"auto_boundaries", 0},
          {"boundary_source", "explicit"},
          {"swap_state", "resident"},
          {"exit_reason", "none"},
          {"exit_signal", 0},
          {"exit_detail", ""},
          {"launched", true},
          {"user", "ada"},
          {"stdout_log", "/run/gandiva/job-1.stdout"},
          {"stderr_log", "/run/gandiva/job-1.stderr"},
          {"memory_limit", ""},
          {"gpu_memory_bytes", 0},
          {"fail_open", false},
          {"exit_code", -1},
          {"migrated_from", ""},
          {"managed_by", ""},
          {"pod_namespace", ""},
          {"pod", ""},
          {"container", ""},
          {"operation", nullptr},
          {"ranks", 1},
          {"gang_error", ""}};
}

Json DeviceReply() {
  return {{"name", "cpu0"},
          {"kind", "cpu"},
          {"model", "host CPU"},
          {"memory_bytes", 0},
          {"resident_bytes", 0},
          {"capacity", 1},
          {"slice_ms", 100},
          {"slice_now_ms", 100},
          {"jobs", {1, 2}},
          {"running", {1}},
          {"switches", 12},
          {"mean_handover_ms", 0.25},
          {"share_mode", "auto"},
          {"packing", true},
          {"share_phase", "decided"},
          {"share_decision",
           {{"mode", "pack"},
            {"reason", "measured"},
            {"jobs", {1, 2}},
            {"slice_rate", 0.98},
            {"pack_rate", 1.4},
            {"window_s", 3.0},
            {"alone_estimated", false},
            {"at_s", 12.0}}},
          {"mps", "off: not a GPU"}};
}

Json SchedJobReply() {
  return {{"id", 1},
          {"name", "train"},
          {"user", "ana"},
          {"uid", 1001},
          {"vc", "vc1"},
          {"kind", "python3 train.py"},
          {"state", "running"},
          {"gpus", 1},
          {"ranks", 1},
          {"restartable", true},
          {"command", {"python3", "train.py"}},
          {"node", "a"},
          {"device", "cpu0"},
          {"node_job", 3},
          {"attempt", 1},
          {"submit_time", 1.7e9},
          {"start_time", 1.7e9 + 2},
          {"end_time", 0.0},
          {"attained_s", 10.5},
          {"run_time_s", 12.0},
          {"rate", nullptr},
          {"checkpoint_dir", ""},
          {"exit_code", 0},
          {"detail", ""},
          {"failure", ""},
          {"retries", 0},
          {"not_before", 0.0}};
}

// A valid ok reply for every message, as gandivad and the scheduler send them.
std::map<MessageType, Json> GoodReplies() {
  Json job_with_op = JobReply();
  job_with_op["operation"] = OperationReply();
  return {
      {MessageType::kHello,
       {{"version", 1},
        {"node", "a"},
        {"pid", 99},
        {"endpoint", "ipc:///tmp/gd.sock"},
        {"memory_limits", "not enforced: no cgroup v2 hierarchy is mounted"}}},
      {MessageType::kListDevices, {{"devices", {DeviceReply()}}}},
      {MessageType::kListJobs, {{"jobs", {JobReply(), job_with_op}}}},
      {MessageType::kRegisterJob,
       {{"job", 1},
        {"name", "job1"},
        {"device", "gpu0"},
        {"devices", {"gpu0", "gpu1"}},
        {"device_kind", "gpu"},
        {"control_block", "/gandiva.a.1.1"},
        {"lease_ms", 2000},
        {"ranks", 1},
        {"env", Json::object()}}},
      {MessageType::kLaunch,
       {{"job", 3},
        {"name", "job3"},
        {"device", "cpu0"},
        {"devices", {"cpu0"}},
        {"pid", 4343},
        {"stdout_log", "/run/gandiva/job-3.stdout"},
        {"stderr_log", "/run/gandiva/job-3.stderr"},
        {"memory_limit", "enforced: memory.max 1073741824 bytes in /sys/fs/cgroup/g/job-3"}}},
      {MessageType::kReadLog,
       {{"data", "epoch 1\n"},
        {"offset", 0},
        {"next_offset", 8},
        {"end_offset", 8},
        {"ended", false}}},
      {MessageType::kJobStarted, Json::object()},
      {MessageType::kJobExited, Json::object()},
      {MessageType::kSuspend, {{"state", "suspending"}}},
      {MessageType::kResume, {{"state", "running"}}},
      {MessageType::kKill, Json::object()},
      {MessageType::kSetSlice, Json::object()},
      {MessageType::kSetShareMode, Json::object()},
      {MessageType::kSetWeight, Json::object()},
      {MessageType::kAssignDevice, Json::object()},
      {MessageType::kListSwitches,
       {{"switches",
         {{{"device", "cpu0"}, {"from", 1}, {"to", 2}, {"at_s", 12.5}, {"handover_ms", 0.2}}}}}},
      {MessageType::kCheckpoint, Json::object()},
      {MessageType::kMigrate, Json::object()},
      {MessageType::kMigratePrepare, {{"job", 2}, {"log", "/run/gandiva/job-2.log"}}},
      {MessageType::kMigrateBegin, {{"bulk_port", 40123}}},
      {MessageType::kMigrateCommit, {{"bytes", 123456}}},
      {MessageType::kMigrateStart, {{"state", "queued"}}},
      {MessageType::kMigrateAbort, Json::object()},
      {MessageType::kSubmit, {{"job", 1}, {"name", "train"}}},
      {MessageType::kQueue,
       {{"jobs", {SchedJobReply()}},
        {"policy", "gandiva"},
        {"now_s", 12.5},
        {"nodes", {{{"name", "a"}, {"up", true}, {"devices", {"cpu0", "cpu1"}}}}}}},
      {MessageType::kCancel, {{"state", "cancelled"}}},
  };
}

TEST(ReplyTest, EveryMessagesGoodReplyPasses) {
  const auto good = GoodReplies();
  for (const auto& m : AllMessages()) {
    auto it = good.find(m.type);
    ASSERT_NE(it, good.end()) << "no sample reply for " << m.wire_name;
    EXPECT_TRUE(ValidateReply(m.type, it->second).ok())
        << m.wire_name << ": " << ValidateReply(m.type, it->second).ToString();
    // The same on the wire, envelope included.
    EXPECT_TRUE(ValidateReplyFrame(m.type, EncodeOkReply(it->second)).ok()) << m.wire_name;
  }
}

TEST(ReplyTest, EachKindOfBadReplyFailsAndSaysWhere) {
  struct Case {
    const char* what;
    MessageType type;
    Json reply;
    const char* says;
  };
  auto jobs_with = [](const std::function<void(Json&)>& change) {
    Json job = JobReply();
    change(job);
    return Json{{"jobs", {JobReply(), job}}};
  };
  std::vector<Case> cases = {
      {"missing field",
       MessageType::kHello,
       {{"version", 1}, {"node", "a"}, {"endpoint", "x"}},
       "reply to 'hello': missing field 'pid'"},
      {"unknown field",
       MessageType::kSuspend,
       {{"state", "running"}, {"stat", 1}},
       "reply to 'suspend': unknown field 'stat'"},
      {"unknown field in an empty reply", MessageType::kKill, {{"ok", true}}, "unknown field 'ok'"},
      {"wrong type",
       MessageType::kHello,
       {{"version", 1}, {"node", "a"}, {"pid", "99"}, {"endpoint", "x"}},
       "pid: must be int, not string"},
      {"float for an int",
       MessageType::kMigrateCommit,
       {{"bytes", 1.5}},
       "bytes: must be uint, not floating-point number"},
      {"negative uint",
       MessageType::kMigrateCommit,
       {{"bytes", -1}},
       "bytes: must be uint, not negative int"},
      {"enum value not in the list",
       MessageType::kSuspend,
       {{"state", "paused"}},
       "state: 'paused' is not a job_state (starting, running, suspending, suspended, detached, "
       "exited, failed, migrated)"},
      {"enum of another enum",
       MessageType::kMigrateStart,
       {{"state", "suspended"}},
       "'suspended' is not a migrate_start_state (running, queued)"},
      {"enum not a string",
       MessageType::kSuspend,
       {{"state", 1}},
       "state: must be job_state, not uint"},
      {"missing field of a record in a list", MessageType::kListJobs,
       jobs_with([](Json& j) { j.erase("held"); }), "jobs[1]: missing field 'held'"},
      {"unknown field of a record", MessageType::kListJobs,
       jobs_with([](Json& j) { j["colour"] = "red"; }), "jobs[1]: unknown field 'colour'"},
      {"bad enum in a record", MessageType::kListJobs,
       jobs_with([](Json& j) { j["swap_state"] = "swapped"; }),
       "jobs[1].swap_state: 'swapped' is not a swap_state"},
      {"bad enum in a nested record", MessageType::kListJobs, jobs_with([](Json& j) {
         j["operation"] = OperationReply();
         j["operation"]["kind"] = "restore";
       }),
       "jobs[1].operation.kind: 'restore' is not a operation_kind (checkpoint, migrate)"},
      {"null where not nullable", MessageType::kListJobs,
       jobs_with([](Json& j) { j["name"] = nullptr; }), "jobs[1].name: must be string, not null"},
      {"nullable record of the wrong type", MessageType::kListJobs,
       jobs_with([](Json& j) { j["operation"] = "none"; }),
       "jobs[1].operation: must be operation?, not string"},
      {"record list not a list",
       MessageType::kListJobs,
       {{"jobs", JobReply()}},
       "jobs: must be job[], not object"},
      {"record list element not an object",
       MessageType::kListJobs,
       {{"jobs", {1}}},
       "jobs[0]: must be an object, not uint"},
      {"list element of the wrong type",
       MessageType::kListDevices,
       {{"devices", {[] {
           Json d = DeviceReply();
           d["running"] = {1, "2"};
           return d;
         }()}}},
       "devices[0].running[1]: must be uint, not string"},
      {"string list element", MessageType::kListJobs, jobs_with([](Json& j) {
         j["command"] = {"python3", 7};
       }),
       "jobs[1].command[1]: must be string, not uint"},
      {"not an object", MessageType::kHello, Json::array(), "must be an object, not array"},
  };
  for (const auto& c : cases) {
    Status s = ValidateReply(c.type, c.reply);
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(s.message().find(c.says), std::string::npos)
        << c.what << ": " << s.message() << "\n  expected: " << c.says;
  }
}

TEST(ReplyTest, ToleratingUnknownFieldsStillChecksTheKnownOnes) {
  Json extra = {{"state", "running"}, {"added_later", 1}};
  EXPECT_FALSE(ValidateReply(MessageType::kResume, extra).ok());
  EXPECT_TRUE(ValidateReply(MessageType::kResume, extra, UnknownFields::kAllow).ok());
  Json jobs = {{"jobs", {JobReply()}}};
  jobs["jobs"][0]["added_later"] = true;
  EXPECT_TRUE(ValidateReply(MessageType::kListJobs, jobs, UnknownFields::kAllow).ok());
  jobs["jobs"][0]["state"] = "paused";
  EXPECT_FALSE(ValidateReply(MessageType::kListJobs, jobs, UnknownFields::kAllow).ok());
  EXPECT_FALSE(
      ValidateReply(MessageType::kResume, {{"added_later", 1}}, UnknownFields::kAllow).ok());
}

TEST(ReplyTest, FramesNeedTheirEnvelope) {
  EXPECT_TRUE(
      ValidateReplyFrame(MessageType::kSuspend, EncodeErrorReply(NotFound("no job 9"))).ok());
  struct Case {
    std::string frame;
    const char* says;
  } cases[] = {
      {"nonsense", "not a JSON object"},
      {R"({"ok":true,"state":"running"})", "'v' must be 1"},
      {R"({"v":2,"ok":true,"state":"running"})", "'v' must be 1"},
      {R"({"v":1,"state":"running"})", "no boolean 'ok'"},
      {R"({"v":1,"ok":true,"state":"paused"})", "'paused' is not a job_state"},
      {R"({"v":1,"ok":false})", "exactly v, ok and error"},
      {R"({"v":1,"ok":false,"error":{"code":"nope","message":"x"}})", "status code name"},
      {R"({"v":1,"ok":false,"error":{"code":"not_found","message":3}})", "error.message"},
      {R"({"v":1,"ok":false,"error":{"code":"not_found","message":"x"},"state":"running"})",
       "exactly v, ok and error"},
  };
  for (const auto& c : cases) {
    Status s = ValidateReplyFrame(MessageType::kSuspend, c.frame);
    ASSERT_FALSE(s.ok()) << c.frame;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.frame << " -> " << s.message();
  }
}

// ---- Enums

template <typename E>
void ExpectEnumMatchesSchema() {
  std::vector<std::string_view> from_schema, from_enum;
  SchemaType id = SchemaType::None;
  for (const auto& e : AllEnums())
    if (e.name == EnumInfo<E>::kName) id = e.id;
  ASSERT_NE(id, SchemaType::None) << EnumInfo<E>::kName;
  for (const auto& v : AllEnumValues())
    if (v.enum_type == id) from_schema.push_back(v.wire);
  for (E value : EnumInfo<E>::kValues) {
    from_enum.push_back(ToString(value));
    EXPECT_EQ(FromString<E>(ToString(value)), value) << ToString(value);
    EXPECT_EQ(EnumFromJson<E>(Json(value)), value) << "to_json writes the wire string";
  }
  EXPECT_EQ(from_enum, from_schema) << EnumInfo<E>::kName;
  EXPECT_EQ(FromString<E>("no such value"), std::nullopt);
  EXPECT_EQ(FromString<E>(""), std::nullopt);
}

TEST(EnumTest, EveryEnumRoundTripsThroughItsWireStrings) {
  ExpectEnumMatchesSchema<JobState>();
  ExpectEnumMatchesSchema<OperationKind>();
  ExpectEnumMatchesSchema<OperationState>();
  ExpectEnumMatchesSchema<BoundarySource>();
  ExpectEnumMatchesSchema<SwapState>();
  ExpectEnumMatchesSchema<DeviceKind>();
  ExpectEnumMatchesSchema<MigrateStartState>();
  ExpectEnumMatchesSchema<ExitReason>();
  ExpectEnumMatchesSchema<ShareMode>();
  ExpectEnumMatchesSchema<SchedJobState>();
  EXPECT_EQ(AllEnums().size(), 10u) << "a new enum: add it to this test";
}

TEST(EnumTest, ValuesAreTheWireStrings) {
  static_assert(ToString(JobState::kSuspended) == "suspended");
  static_assert(FromString<SwapState>("swapped_out") == SwapState::kSwappedOut);
  EXPECT_EQ(Json({{"state", JobState::kMigrated}}).dump(), R"({"state":"migrated"})");
  EXPECT_EQ(EnumFromJson<OperationState>(Json(3)), std::nullopt);
  // An enum built into a reply validates as its enum.
  EXPECT_TRUE(ValidateReply(MessageType::kSuspend, {{"state", JobState::kSuspending}}).ok());
}

// ---- docs/api.md describes the same schema as messages.def: keep them in step

std::string ReadDoc() {
  std::ifstream doc(GANDIVA_SOURCE_DIR "/docs/api.md");
  return std::string((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
}

// "| a | b |" -> {"a", "b"}
std::vector<std::string> Cells(const std::string& row) {
  std::vector<std::string> cells;
  size_t start = 1;
  for (size_t bar; (bar = row.find('|', start)) != std::string::npos; start = bar + 1) {
    std::string cell = row.substr(start, bar - start);
    cell.erase(0, cell.find_first_not_of(' '));
    cell.erase(cell.find_last_not_of(' ') + 1);
    cells.push_back(cell);
  }
  return cells;
}

// "`job`* int (default 15), `name` string" -> {"job* int", "name string"}: every field
// of a cell with its type as TypeDocName writes it; "*" marks required, " (optional)"
// a reply field that may be absent.
std::set<std::string> FieldsInCell(const std::string& cell) {
  static const std::regex field(R"(`([a-z_0-9]+)`(\*?) ([a-z_]+(?:\[\])?\??)( \(optional\))?)");
  std::set<std::string> out;
  for (std::sregex_iterator it(cell.begin(), cell.end(), field), end; it != end; ++it)
    out.insert((*it)[1].str() + (*it)[2].str() + " " + (*it)[3].str() + (*it)[4].str());
  return out;
}

std::string Documented(std::string_view name, std::string type, bool star, bool optional) {
  return std::string(name) + (star ? "*" : "") + " " + type + (optional ? " (optional)" : "");
}

TEST(SchemaTest, DocsDescribeEveryRequestReplyRecordAndEnum) {
  const std::string text = ReadDoc();
  ASSERT_FALSE(text.empty()) << "cannot read docs/api.md";
  // Rows by section: "## Messages" tables, "### `record`" tables, the "## Enums" table.
  std::map<std::string, std::vector<std::string>> message_rows, enum_rows;
  std::map<std::string, std::set<std::string>> record_fields;
  std::string section, record;
  std::istringstream lines(text);
  static const std::regex record_heading(R"(^### `([a-z_]+)`)");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (line.rfind("## ", 0) == 0) section = line.substr(3), record.clear();
    if (std::regex_search(line, m, record_heading)) record = m[1];
    if (line.rfind("| `", 0) != 0) continue;
    const auto cells = Cells(line);
    static const std::regex name(R"(`([a-z_0-9]+)`)");
    if (cells.empty() || !std::regex_search(cells[0], m, name)) continue;
    if (section == "Messages") {
      message_rows[m[1]] = cells;
    } else if (section == "Records" && !record.empty()) {
      // | `field` | type | meaning |
      ASSERT_GE(cells.size(), 2u) << line;
      auto field = FieldsInCell(cells[0] + " " + cells[1]);
      ASSERT_EQ(field.size(), 1u) << "not | `field` | type | ...: " << line;
      record_fields[record].insert(*field.begin());
    } else if (section == "Enums") {
      enum_rows[m[1]] = cells;
    }
  }

  std::set<std::string> messages;
  for (const auto& msg : AllMessages()) {
    const std::string wire(msg.wire_name);
    messages.insert(wire);
    auto row = message_rows.find(wire);
    ASSERT_NE(row, message_rows.end()) << wire << " has no row in docs/api.md's messages";
    ASSERT_EQ(row->second.size(), 3u) << wire << ": | type | request | reply |";
    std::set<std::string> request, reply;
    for (const auto& f : AllFields())
      if (f.message == msg.type)
        request.insert(
            Documented(f.name, TypeDocName(f.type, SchemaType::None), f.required, false));
    for (const auto& f : AllReplyFields())
      if (f.message == msg.type)
        reply.insert(Documented(f.name, TypeDocName(f.type, f.of, f.presence), false,
                                f.presence == Presence::kOptional));
    EXPECT_EQ(FieldsInCell(row->second[1]), request) << wire << "'s request fields";
    EXPECT_EQ(FieldsInCell(row->second[2]), reply) << wire << "'s reply fields";
  }
  for (const auto& [wire, row] : message_rows)
    EXPECT_TRUE(messages.count(wire))
        << "docs/api.md documents a message '" << wire << "' that messages.def does not have";

  std::set<std::string> records;
  for (const auto& r : AllRecords()) {
    records.insert(std::string(r.name));
    std::set<std::string> fields;
    for (const auto& f : AllRecordFields())
      if (f.record == r.id)
        fields.insert(Documented(f.name, TypeDocName(f.type, f.of, f.presence), false,
                                 f.presence == Presence::kOptional));
    EXPECT_EQ(record_fields[std::string(r.name)], fields)
        << "the fields of record '" << r.name << "' (### `" << r.name << "` in docs/api.md)";
  }
  for (const auto& [name, fields] : record_fields)
    EXPECT_TRUE(records.count(name))
        << "docs/api.md documents a record '" << name << "' that messages.def does not have";

  std::set<std::string> enums;
  for (const auto& e : AllEnums()) {
    enums.insert(std::string(e.name));
    auto row = enum_rows.find(std::string(e.name));
    ASSERT_NE(row, enum_rows.end()) << "enum " << e.name << " has no row in docs/api.md";
    std::vector<std::string> documented, declared;
    static const std::regex value(R"(`([a-z_0-9]+)`)");
    const std::string& cell = row->second[1];
    for (std::sregex_iterator it(cell.begin(), cell.end(), value), end; it != end; ++it)
      documented.push_back((*it)[1]);
    for (const auto& v : AllEnumValues())
      if (v.enum_type == e.id) declared.emplace_back(v.wire);
    EXPECT_EQ(documented, declared) << "the values of enum " << e.name << " in docs/api.md";
  }
  for (const auto& [name, row] : enum_rows)
    EXPECT_TRUE(enums.count(name))
        << "docs/api.md documents an enum '" << name << "' that messages.def does not have";
}

}  // namespace
}  // namespace gandiva::protocol
