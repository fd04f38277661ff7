// JSON codec and schema validation for API messages; exceptions stop here.
#include "gandiva/protocol/codec.h"

namespace gandiva::protocol {
namespace {

bool HasType(const Json& v, FieldType type) {
  switch (type) {
    case FieldType::kString:
      return v.is_string();
    case FieldType::kInt:
      return v.is_number_integer();
    case FieldType::kNumber:
      return v.is_number();
    case FieldType::kBool:
      return v.is_boolean();
    case FieldType::kObject:
      return v.is_object();
    case FieldType::kStringList:
      if (!v.is_array()) return false;
      for (const auto& e : v)
        if (!e.is_string()) return false;
      return true;
  }
  return false;
}

Status Validate(MessageType type, std::string_view wire, const Json& body) {
  for (const auto& f : AllFields()) {
    if (f.message != type) continue;
    auto it = body.find(std::string(f.name));
    if (it == body.end()) {
      if (f.required)
        return InvalidArgument("'" + std::string(wire) + "' needs field '" + std::string(f.name) +
                               "'");
      continue;
    }
    if (!HasType(*it, f.type))
      return InvalidArgument("field '" + std::string(f.name) + "' of '" + std::string(wire) +
                             "' must be a " + FieldTypeName(f.type));
  }
  for (auto it = body.begin(); it != body.end(); ++it) {
    bool known = false;
    for (const auto& f : AllFields())
      if (f.message == type && f.name == it.key()) known = true;
    if (!known)
      return InvalidArgument("'" + std::string(wire) + "' has no field '" + it.key() + "'");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Request> DecodeRequest(std::string_view bytes) {
  Json doc = Json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("request is not valid JSON");
  if (!doc.is_object()) return InvalidArgument("request must be a JSON object");
  auto v = doc.find("v");
  if (v == doc.end() || !v->is_number_integer())
    return InvalidArgument("request has no protocol version 'v'");
  if (v->get<int64_t>() != kProtocolVersion)
    return FailedPrecondition("protocol version " + std::to_string(v->get<int64_t>()) +
                              " not supported; this daemon speaks " +
                              std::to_string(kProtocolVersion));
  auto t = doc.find("type");
  if (t == doc.end() || !t->is_string()) return InvalidArgument("request has no 'type'");
  const std::string wire = t->get<std::string>();
  auto type = MessageTypeFromWire(wire);
  if (!type) return InvalidArgument("unknown request type '" + wire + "'");
  doc.erase("v");
  doc.erase("type");
  GD_RETURN_IF_ERROR(Validate(*type, wire, doc));
  return Request{*type, std::move(doc), {}};
}

std::string EncodeRequest(MessageType type, const Json& fields) {
  Json doc = fields.is_object() ? fields : Json::object();
  doc["v"] = kProtocolVersion;
  doc["type"] = std::string(WireName(type));
  return doc.dump();
}

std::string EncodeOkReply(const Json& fields) {
  Json doc = fields.is_object() ? fields : Json::object();
  doc["v"] = kProtocolVersion;
  doc["ok"] = true;
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string EncodeErrorReply(const Status& status) {
  Json doc = {{"v", kProtocolVersion},
              {"ok", false},
              {"error", {{"code", StatusCodeName(status.code())}, {"message", status.message()}}}};
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace);
}

StatusOr<Json> DecodeReply(std::string_view bytes) {
  Json doc = Json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return DataLoss("reply is not a JSON object");
  auto ok = doc.find("ok");
  if (ok == doc.end() || !ok->is_boolean()) return DataLoss("reply has no 'ok'");
  if (!ok->get<bool>()) {
    auto err = doc.find("error");
    if (err == doc.end() || !err->is_object()) return Internal("error reply without details");
    auto field = [&](const char* key, const char* fallback) {
      auto f = err->find(key);
      return f != err->end() && f->is_string() ? f->get<std::string>() : std::string(fallback);
    };
    std::string code = field("code", "internal");
    std::string msg = field("message", "");
    return Status(StatusCodeFromName(code).value_or(StatusCode::kInternal), msg);
  }
  doc.erase("v");
  doc.erase("ok");
  return doc;
}

}  // namespace gandiva::protocol
