// libFuzzer harness: the API's decoders and validators (protocol/codec.h) on
// arbitrary frames, as a daemon or scheduler receives them from any client.
//  - DecodeRequest: JSON, version, type, and the fields against messages.def.
//    A request it accepts must survive EncodeRequest and decode again to the
//    same body (a handler may re-encode it, e.g. to forward it to a peer).
//  - DecodeReply and ValidateReplyFrame, as a client checks a reply: the type
//    it is checked against comes from the input's size, so that every message's
//    reply schema is reached without a selector byte in the seeds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gandiva/protocol/codec.h"
#include "gandiva/protocol/schema.h"

namespace protocol = gandiva::protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view frame(reinterpret_cast<const char*>(data), size);

  auto request = protocol::DecodeRequest(frame);
  if (request.ok()) {
    const std::string again = protocol::EncodeRequest(request->type, request->body);
    auto decoded = protocol::DecodeRequest(again);
    if (!decoded.ok() || decoded->type != request->type || decoded->body != request->body)
      std::abort();  // the encoder and the decoder disagree
  }

  const auto messages = protocol::AllMessages();
  const protocol::MessageType type = messages[size % messages.size()].type;
  (void)protocol::ValidateReplyFrame(type, frame);
  auto reply = protocol::DecodeReply(frame);
  if (reply.ok()) {
    (void)protocol::ValidateReply(type, *reply, protocol::UnknownFields::kAllow);
    // What a daemon sends back must encode whatever a handler put in it.
    (void)protocol::EncodeOkReply(*reply);
  }
  return 0;
}
