// The message list of messages.def as C++: an enum, wire names, and the field
// table that validates every request before the controller sees it.
#ifndef GANDIVA_PROTOCOL_SCHEMA_H_
#define GANDIVA_PROTOCOL_SCHEMA_H_

#include <optional>
#include <span>
#include <string_view>

namespace gandiva::protocol {

#define GD_MESSAGE(id, wire, route, doc)
#define GD_FIELD(msg, name, type, required)
#include "gandiva/protocol/messages.def"
#undef GD_MESSAGE
#undef GD_FIELD

inline constexpr int kProtocolVersion = GD_PROTOCOL_VERSION;

enum class MessageType {
#define GD_MESSAGE(id, wire, route, doc) id,
#define GD_FIELD(msg, name, type, required)
#include "gandiva/protocol/messages.def"
#undef GD_MESSAGE
#undef GD_FIELD
};

enum class FieldType { kString, kInt, kNumber, kBool, kStringList, kObject };

struct FieldSpec {
  MessageType message;
  std::string_view name;
  FieldType type;
  bool required;
};

struct MessageSpec {
  MessageType type;
  std::string_view wire_name;
  std::string_view route;
  std::string_view doc;
};

std::span<const MessageSpec> AllMessages();
std::span<const FieldSpec> AllFields();
std::optional<MessageType> MessageTypeFromWire(std::string_view wire_name);
std::string_view WireName(MessageType type);
const char* FieldTypeName(FieldType type);

}  // namespace gandiva::protocol

#endif  // GANDIVA_PROTOCOL_SCHEMA_H_
