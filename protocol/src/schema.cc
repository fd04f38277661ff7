// Tables expanded from messages.def.
#include "gandiva/protocol/schema.h"

namespace gandiva::protocol {
namespace {

constexpr MessageSpec kMessages[] = {
#define GD_MESSAGE(id, wire, route, doc) {MessageType::id, wire, route, doc},
#include "gandiva/protocol/messages.def"
};

constexpr FieldSpec kFields[] = {
#define GD_FIELD(msg, name, type, required) {MessageType::msg, name, FieldType::type, required},
#include "gandiva/protocol/messages.def"
};

constexpr ReplyFieldSpec kReplyFields[] = {
#define GD_REPLY(msg, name, type, of, presence) \
  {MessageType::msg, name, FieldType::type, SchemaType::of, Presence::presence},
#include "gandiva/protocol/messages.def"
};

constexpr NamedTypeSpec kRecords[] = {
#define GD_RECORD(id, name, doc) {SchemaType::id, name, doc},
#include "gandiva/protocol/messages.def"
};

constexpr RecordFieldSpec kRecordFields[] = {
#define GD_RECORD_FIELD(record, name, type, of, presence) \
  {SchemaType::record, name, FieldType::type, SchemaType::of, Presence::presence},
#include "gandiva/protocol/messages.def"
};

constexpr NamedTypeSpec kEnums[] = {
#define GD_ENUM(id, name, doc) {SchemaType::id, name, doc},
#include "gandiva/protocol/messages.def"
};

constexpr EnumValueSpec kEnumValues[] = {
#define GD_ENUM_VALUE(id, value, wire) {SchemaType::id, wire},
#include "gandiva/protocol/messages.def"
};

// A schema mistake (a kEnum field of a record, a list of an enum, a name used twice)
// fails the build rather than a validation at run time.
constexpr bool IsEnum(SchemaType t) {
  for (const auto& e : kEnums)
    if (e.id == t) return true;
  return false;
}
constexpr bool IsRecord(SchemaType t) {
  for (const auto& r : kRecords)
    if (r.id == t) return true;
  return false;
}
constexpr bool RefersRight(FieldType type, SchemaType of) {
  switch (type) {
    case FieldType::kEnum:
      return IsEnum(of);
    case FieldType::kRecord:
    case FieldType::kRecordList:
      return IsRecord(of);
    default:
      return of == SchemaType::None;
  }
}
constexpr bool FieldsAreWellFormed() {
  for (const auto& f : kReplyFields)
    if (!RefersRight(f.type, f.of)) return false;
  for (const auto& f : kRecordFields)
    if (!RefersRight(f.type, f.of) || !IsRecord(f.record)) return false;
  for (const auto& f : kFields)  // requests carry plain values
    if (f.type == FieldType::kEnum || f.type == FieldType::kRecord ||
        f.type == FieldType::kRecordList || f.type == FieldType::kUintList)
      return false;
  return true;
}
constexpr bool NamesAreUnique() {
  for (const auto& a : kReplyFields)
    for (const auto& b : kReplyFields)
      if (&a != &b && a.message == b.message && a.name == b.name) return false;
  for (const auto& a : kRecordFields)
    for (const auto& b : kRecordFields)
      if (&a != &b && a.record == b.record && a.name == b.name) return false;
  for (const auto& a : kEnumValues)
    for (const auto& b : kEnumValues)
      if (&a != &b && a.enum_type == b.enum_type && a.wire == b.wire) return false;
  return true;
}
static_assert(FieldsAreWellFormed(),
              "messages.def: kEnum needs an enum, kRecord/kRecordList a record, others None");
static_assert(NamesAreUnique(), "messages.def: a field or enum value is declared twice");

}  // namespace

std::span<const MessageSpec> AllMessages() { return kMessages; }
std::span<const FieldSpec> AllFields() { return kFields; }
std::span<const ReplyFieldSpec> AllReplyFields() { return kReplyFields; }
std::span<const NamedTypeSpec> AllRecords() { return kRecords; }
std::span<const RecordFieldSpec> AllRecordFields() { return kRecordFields; }
std::span<const NamedTypeSpec> AllEnums() { return kEnums; }
std::span<const EnumValueSpec> AllEnumValues() { return kEnumValues; }

std::optional<MessageType> MessageTypeFromWire(std::string_view wire_name) {
  for (const auto& m : kMessages)
    if (m.wire_name == wire_name) return m.type;
  return std::nullopt;
}

std::string_view WireName(MessageType type) {
  for (const auto& m : kMessages)
    if (m.type == type) return m.wire_name;
  return "?";
}

const char* FieldTypeName(FieldType type) {
  switch (type) {
    case FieldType::kString:
      return "string";
    case FieldType::kInt:
      return "integer";
    case FieldType::kUint:
      return "non-negative integer";
    case FieldType::kNumber:
      return "number";
    case FieldType::kBool:
      return "boolean";
    case FieldType::kStringList:
      return "list of strings";
    case FieldType::kUintList:
      return "list of non-negative integers";
    case FieldType::kObject:
      return "object";
    case FieldType::kEnum:
      return "enum string";
    case FieldType::kRecord:
      return "record";
    case FieldType::kRecordList:
      return "list of records";
  }
  return "?";
}

std::string_view SchemaTypeName(SchemaType type) {
  for (const auto& r : kRecords)
    if (r.id == type) return r.name;
  for (const auto& e : kEnums)
    if (e.id == type) return e.name;
  return "?";
}

std::string TypeDocName(FieldType type, SchemaType of, Presence presence) {
  std::string name;
  switch (type) {
    case FieldType::kString:
      name = "string";
      break;
    case FieldType::kInt:
      name = "int";
      break;
    case FieldType::kUint:
      name = "uint";
      break;
    case FieldType::kNumber:
      name = "number";
      break;
    case FieldType::kBool:
      name = "bool";
      break;
    case FieldType::kObject:
      name = "object";
      break;
    case FieldType::kStringList:
      name = "string[]";
      break;
    case FieldType::kUintList:
      name = "uint[]";
      break;
    case FieldType::kEnum:
    case FieldType::kRecord:
      name = SchemaTypeName(of);
      break;
    case FieldType::kRecordList:
      name = std::string(SchemaTypeName(of)) + "[]";
      break;
  }
  if (presence == Presence::kNullable) name += "?";
  return name;
}

}  // namespace gandiva::protocol
