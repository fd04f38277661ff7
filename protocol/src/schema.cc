// Tables expanded from messages.def.
#include "gandiva/protocol/schema.h"

#include <array>

namespace gandiva::protocol {
namespace {

constexpr MessageSpec kMessages[] = {
#define GD_MESSAGE(id, wire, route, doc) {MessageType::id, wire, route, doc},
#define GD_FIELD(msg, name, type, required)
#include "gandiva/protocol/messages.def"
#undef GD_MESSAGE
#undef GD_FIELD
};

constexpr FieldSpec kFields[] = {
#define GD_MESSAGE(id, wire, route, doc)
#define GD_FIELD(msg, name, type, required) {MessageType::msg, name, FieldType::type, required},
#include "gandiva/protocol/messages.def"
#undef GD_MESSAGE
#undef GD_FIELD
};

}  // namespace

std::span<const MessageSpec> AllMessages() { return kMessages; }
std::span<const FieldSpec> AllFields() { return kFields; }

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
    case FieldType::kNumber:
      return "number";
    case FieldType::kBool:
      return "boolean";
    case FieldType::kStringList:
      return "list of strings";
    case FieldType::kObject:
      return "object";
  }
  return "?";
}

}  // namespace gandiva::protocol
