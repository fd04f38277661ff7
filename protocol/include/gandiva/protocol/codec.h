// Encoding and validation of API messages (JSON frames, see messages.def).
// Nothing here throws: malformed input becomes an InvalidArgument status.
#ifndef GANDIVA_PROTOCOL_CODEC_H_
#define GANDIVA_PROTOCOL_CODEC_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "gandiva/protocol/schema.h"
#include "gandiva/status.h"

namespace gandiva::protocol {

using Json = nlohmann::json;

struct Request {
  MessageType type;
  Json body;  // the validated fields (without "v" and "type")
  // Bulk bytes sent as a second frame (migration chunks), else empty. Points into
  // the received frame: valid only while the request is being handled.
  std::string_view payload;
};

// Parses and validates a request: JSON object, known version and type, every
// required field present, every field of its schema type, no unknown field.
StatusOr<Request> DecodeRequest(std::string_view bytes);
std::string EncodeRequest(MessageType type, const Json& fields);

std::string EncodeOkReply(const Json& fields);
std::string EncodeErrorReply(const Status& status);
// An ok reply's fields, or the error it carries as a Status.
StatusOr<Json> DecodeReply(std::string_view bytes);

}  // namespace gandiva::protocol

#endif  // GANDIVA_PROTOCOL_CODEC_H_
