// The enums of messages.def (job state, operation state and kind, boundary source,
// swap state, device kind, ...) as C++ enum classes with their wire strings: use
// these, not string literals, wherever a reply is built or read.
#ifndef GANDIVA_PROTOCOL_ENUMS_H_
#define GANDIVA_PROTOCOL_ENUMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gandiva::protocol {

// Each enum of the list expands into the same five pieces, one pass each.
// clang-format off

// enum class JobState : uint8_t { kStarting, kRunning, ... };
#define GD_ENUM(id, name, doc) enum class id : uint8_t {
#define GD_ENUM_VALUE(id, value, wire) value,
#define GD_ENUM_END(id) };
#include "gandiva/protocol/messages.def"

// ToString(JobState::kRunning) == "running": the value on the wire.
#define GD_ENUM(id, name, doc) constexpr std::string_view ToString(id v) { switch (v) {
#define GD_ENUM_VALUE(id, value, wire) case id::value: return wire;
#define GD_ENUM_END(id) } return "?"; }
#include "gandiva/protocol/messages.def"

// FromString<JobState>("running") == JobState::kRunning; nullopt for any other string.
template <typename E>
constexpr std::optional<E> FromString(std::string_view wire);

#define GD_ENUM(id, name, doc) \
  template <> constexpr std::optional<id> FromString<id>(std::string_view wire) {
#define GD_ENUM_VALUE(id, value, w) if (wire == w) return id::value;
#define GD_ENUM_END(id) return std::nullopt; }
#include "gandiva/protocol/messages.def"

// EnumInfo<JobState>::kName == "job_state", its name in the schema and docs/api.md;
// EnumInfo<JobState>::kValues: every value, in declaration order.
template <typename E>
struct EnumInfo;

#define GD_ENUM(id, name, doc) template <> struct EnumInfo<id> { \
  static constexpr std::string_view kName = name;                \
  static constexpr id kValues[] = {
#define GD_ENUM_VALUE(id, value, wire) id::value,
#define GD_ENUM_END(id) }; };
#include "gandiva/protocol/messages.def"

// nlohmann::json writes an enum as its wire string: Json{{"state", JobState::kRunning}}
// (without this it would write the integer). Reading one is EnumFromJson<E> (codec.h),
// which cannot throw: j.get<JobState>() does not compile, rather than read an integer.
#define GD_ENUM_END(id) \
  template <typename BasicJson> void to_json(BasicJson& j, id v) { j = std::string(ToString(v)); } \
  template <typename BasicJson> void from_json(const BasicJson& j, id& v) = delete;
#include "gandiva/protocol/messages.def"

// clang-format on

// A job in one of these states is over on this node: it will not run here again.
constexpr bool HasEnded(JobState state) {
  return state == JobState::kExited || state == JobState::kFailed || state == JobState::kMigrated;
}

}  // namespace gandiva::protocol

#endif  // GANDIVA_PROTOCOL_ENUMS_H_
