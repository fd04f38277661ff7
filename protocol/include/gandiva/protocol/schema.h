// The message list of messages.def as C++: the message enum, wire names, and the
// tables of request fields, reply fields, records and enums that the validators
// (codec.h) and the docs test read. The enum types themselves are in enums.h.
#ifndef GANDIVA_PROTOCOL_SCHEMA_H_
#define GANDIVA_PROTOCOL_SCHEMA_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "gandiva/protocol/messages.def"  // only for GD_PROTOCOL_VERSION

namespace gandiva::protocol {

inline constexpr int kProtocolVersion = GD_PROTOCOL_VERSION;

enum class MessageType {
#define GD_MESSAGE(id, wire, route, doc) id,
#include "gandiva/protocol/messages.def"
};

// The records and enums of messages.def by their C++ id: what a kEnum, kRecord or
// kRecordList field holds; None for every other field.
enum class SchemaType {
  None,
#define GD_RECORD(id, name, doc) id,
#define GD_ENUM(id, name, doc) id,
#include "gandiva/protocol/messages.def"
};

enum class FieldType {
  kString,
  kInt,     // any integer
  kUint,    // an integer >= 0
  kNumber,  // integer or floating point
  kBool,
  kObject,  // any JSON object (an environment)
  kStringList,
  kUintList,
  kEnum,    // a string among an enum's values
  kRecord,  // an object with a record's fields
  kRecordList,
};

enum class Presence {
  kRequired,  // always there
  kNullable,  // always there, may be null
  kOptional,  // may be absent
};

// A request field (GD_FIELD).
struct FieldSpec {
  MessageType message;
  std::string_view name;
  FieldType type;
  bool required;
};

// A field of an ok reply (GD_REPLY) or of a record (GD_RECORD_FIELD).
struct ReplyFieldSpec {
  MessageType message;
  std::string_view name;
  FieldType type;
  SchemaType of;
  Presence presence;
};
struct RecordFieldSpec {
  SchemaType record;
  std::string_view name;
  FieldType type;
  SchemaType of;
  Presence presence;
};

struct MessageSpec {
  MessageType type;
  std::string_view wire_name;
  std::string_view route;
  std::string_view doc;
};

// A record (GD_RECORD) or an enum (GD_ENUM); `name` is what docs/api.md calls it.
struct NamedTypeSpec {
  SchemaType id;
  std::string_view name;
  std::string_view doc;
};
struct EnumValueSpec {
  SchemaType enum_type;
  std::string_view wire;
};

std::span<const MessageSpec> AllMessages();
std::span<const FieldSpec> AllFields();  // request fields
std::span<const ReplyFieldSpec> AllReplyFields();
std::span<const NamedTypeSpec> AllRecords();
std::span<const RecordFieldSpec> AllRecordFields();
std::span<const NamedTypeSpec> AllEnums();
std::span<const EnumValueSpec> AllEnumValues();  // grouped by enum, in declaration order

std::optional<MessageType> MessageTypeFromWire(std::string_view wire_name);
std::string_view WireName(MessageType type);
const char* FieldTypeName(FieldType type);  // for request errors: "integer", "list of strings"
// A record's or enum's name ("job", "job_state"); "?" for None.
std::string_view SchemaTypeName(SchemaType type);
// A field's type as docs/api.md and reply errors write it: "string", "int", "uint",
// "number", "bool", "object", "string[]", "uint[]", an enum's name ("job_state"), a
// record's name ("operation") or a list of them ("job[]"); with "?" when nullable.
std::string TypeDocName(FieldType type, SchemaType of, Presence presence = Presence::kRequired);

}  // namespace gandiva::protocol

#endif  // GANDIVA_PROTOCOL_SCHEMA_H_
