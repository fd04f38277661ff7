// The wire protocol: schema validation of requests, replies, errors.
#include "gandiva/protocol/codec.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

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

// docs/api.md describes the same messages as messages.def: keep them in step.
TEST(SchemaTest, EveryMessageIsDocumented) {
  std::ifstream doc(GANDIVA_SOURCE_DIR "/docs/api.md");
  ASSERT_TRUE(doc.good());
  std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  for (const auto& m : AllMessages())
    EXPECT_NE(text.find("| `" + std::string(m.wire_name) + "` |"), std::string::npos)
        << m.wire_name << " is not in docs/api.md";
}

}  // namespace
}  // namespace gandiva::protocol
