// Encoding and validation of API messages (JSON frames, see messages.def):
// requests, and replies against their schema. Nothing here throws: malformed
// input becomes an InvalidArgument status.
#ifndef GANDIVA_PROTOCOL_CODEC_H_
#define GANDIVA_PROTOCOL_CODEC_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "gandiva/protocol/enums.h"
#include "gandiva/protocol/schema.h"
#include "gandiva/status.h"

namespace gandiva::protocol {

using Json = nlohmann::json;

struct Request {
  MessageType type;
  Json body;  // the validated fields (without "v" and "type")
};

// Parses and validates a request: JSON object, known version and type, every
// required field present, every field of its schema type, no unknown field.
StatusOr<Request> DecodeRequest(std::string_view bytes);
std::string EncodeRequest(MessageType type, const Json& fields);

std::string EncodeOkReply(const Json& fields);
std::string EncodeErrorReply(const Status& status);
// An ok reply's fields, or the error it carries as a Status.
StatusOr<Json> DecodeReply(std::string_view bytes);

// Whether a reply may carry fields its schema does not name. Tests and the daemon
// reject them (kReject: the schema is the whole truth); a client may tolerate them
// (kAllow), so that a newer daemon's extra field does not break an older client.
enum class UnknownFields { kReject, kAllow };

// Checks an ok reply's fields (what a handler returns, what DecodeReply gives)
// against the reply schema of `type` in messages.def, records and enums included:
// every required field there, of its type, enum values among the enum's, no field
// the schema does not name. The error names the place: "reply to 'list_jobs':
// jobs[0].state: 'paused' is not a job_state (starting, running, ...)".
Status ValidateReply(MessageType type, const Json& fields,
                     UnknownFields unknown = UnknownFields::kReject);
// The same for a whole reply frame: the envelope ("v", "ok", and "error" with a
// known status code and a message), then, when ok, the fields.
Status ValidateReplyFrame(MessageType type, std::string_view bytes);

// An enum field's value as its enum; nullopt when it is not one of its wire strings.
template <typename E>
std::optional<E> EnumFromJson(const Json& value) {
  if (!value.is_string()) return std::nullopt;
  return FromString<E>(value.get_ref<const std::string&>());
}

}  // namespace gandiva::protocol

#endif  // GANDIVA_PROTOCOL_CODEC_H_
