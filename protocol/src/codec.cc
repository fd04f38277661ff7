// JSON codec and schema validation for API messages, requests and replies;
// exceptions stop here.
#include "gandiva/protocol/codec.h"

#include <vector>

namespace gandiva::protocol {
namespace {

bool IsUint(const Json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

// Whether a value has a plain (not enum, not record) field type.
bool HasType(const Json& v, FieldType type) {
  auto all = [&](auto pred) {
    if (!v.is_array()) return false;
    for (const auto& e : v)
      if (!pred(e)) return false;
    return true;
  };
  switch (type) {
    case FieldType::kString:
      return v.is_string();
    case FieldType::kInt:
      return v.is_number_integer();
    case FieldType::kUint:
      return IsUint(v);
    case FieldType::kNumber:
      return v.is_number();
    case FieldType::kBool:
      return v.is_boolean();
    case FieldType::kObject:
      return v.is_object();
    case FieldType::kStringList:
      return all([](const Json& e) { return e.is_string(); });
    case FieldType::kUintList:
      return all(IsUint);
    case FieldType::kEnum:
    case FieldType::kRecord:
    case FieldType::kRecordList:
      return false;  // checked against their enum or record by ReplyChecker
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

// ---- Replies

// One field of a reply or of a record, whichever table it came from.
struct ShapeField {
  std::string_view name;
  FieldType type;
  SchemaType of;
  Presence presence;
};

std::vector<ShapeField> ReplyShape(MessageType type) {
  std::vector<ShapeField> fields;
  for (const auto& f : AllReplyFields())
    if (f.message == type) fields.push_back({f.name, f.type, f.of, f.presence});
  return fields;
}

std::vector<ShapeField> RecordShape(SchemaType record) {
  std::vector<ShapeField> fields;
  for (const auto& f : AllRecordFields())
    if (f.record == record) fields.push_back({f.name, f.type, f.of, f.presence});
  return fields;
}

// What a JSON value is, for errors ("string", "negative integer", ...).
std::string JsonKind(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "bool";
  if (v.is_number_unsigned()) return "uint";
  if (v.is_number_integer()) return v.get<int64_t>() < 0 ? "negative int" : "uint";
  if (v.is_number()) return "floating-point number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

std::string Join(const std::string& path, std::string_view name) {
  return path.empty() ? std::string(name) : path + "." + std::string(name);
}

// Walks a reply and its records; the first mismatch is the error, with its path.
class ReplyChecker {
 public:
  ReplyChecker(MessageType type, UnknownFields unknown) : type_(type), unknown_(unknown) {}

  Status Object(const Json& obj, const std::vector<ShapeField>& fields, const std::string& path) {
    if (!obj.is_object()) return Error(path, "must be an object, not " + JsonKind(obj));
    for (const auto& f : fields) {
      auto it = obj.find(std::string(f.name));
      if (it == obj.end()) {
        if (f.presence == Presence::kOptional) continue;
        return Error(path, "missing field '" + std::string(f.name) + "'");
      }
      GD_RETURN_IF_ERROR(Value(*it, f, Join(path, f.name)));
    }
    if (unknown_ == UnknownFields::kReject)
      for (auto it = obj.begin(); it != obj.end(); ++it) {
        bool known = false;
        for (const auto& f : fields) known = known || f.name == it.key();
        if (!known) return Error(path, "unknown field '" + it.key() + "'");
      }
    return Status::Ok();
  }

 private:
  Status Value(const Json& v, const ShapeField& f, const std::string& path) {
    if (v.is_null() && f.presence == Presence::kNullable) return Status::Ok();
    if (f.type == FieldType::kEnum && v.is_string())
      return EnumValue(v.get_ref<const std::string&>(), f.of, path);
    if (f.type == FieldType::kRecord && v.is_object()) return Object(v, RecordShape(f.of), path);
    if (f.type == FieldType::kRecordList && v.is_array()) {
      const auto fields = RecordShape(f.of);
      for (size_t i = 0; i < v.size(); ++i)
        GD_RETURN_IF_ERROR(Object(v[i], fields, path + "[" + std::to_string(i) + "]"));
      return Status::Ok();
    }
    if ((f.type == FieldType::kStringList || f.type == FieldType::kUintList) && v.is_array()) {
      // Name the element that is wrong, not just the list.
      const FieldType element =
          f.type == FieldType::kStringList ? FieldType::kString : FieldType::kUint;
      for (size_t i = 0; i < v.size(); ++i)
        if (!HasType(v[i], element))
          return Error(
              path + "[" + std::to_string(i) + "]",
              "must be " + TypeDocName(element, SchemaType::None) + ", not " + JsonKind(v[i]));
      return Status::Ok();
    }
    if (HasType(v, f.type)) return Status::Ok();
    return Error(path, "must be " + TypeDocName(f.type, f.of, f.presence) + ", not " + JsonKind(v));
  }

  Status EnumValue(const std::string& value, SchemaType enum_type, const std::string& path) {
    std::string allowed;
    for (const auto& e : AllEnumValues()) {
      if (e.enum_type != enum_type) continue;
      if (e.wire == value) return Status::Ok();
      allowed += (allowed.empty() ? "" : ", ") + std::string(e.wire);
    }
    return Error(path, "'" + value + "' is not a " + std::string(SchemaTypeName(enum_type)) + " (" +
                           allowed + ")");
  }

  Status Error(const std::string& path, const std::string& what) const {
    return InvalidArgument("reply to '" + std::string(WireName(type_)) +
                           "': " + (path.empty() ? what : path + ": " + what));
  }

  MessageType type_;
  UnknownFields unknown_;
};

}  // namespace

Status ValidateReply(MessageType type, const Json& fields, UnknownFields unknown) {
  return ReplyChecker(type, unknown).Object(fields, ReplyShape(type), "");
}

Status ValidateReplyFrame(MessageType type, std::string_view bytes) {
  Json doc = Json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  const std::string where = "reply to '" + std::string(WireName(type)) + "': ";
  if (doc.is_discarded() || !doc.is_object()) return InvalidArgument(where + "not a JSON object");
  auto v = doc.find("v");
  if (v == doc.end() || !v->is_number_integer() || v->get<int64_t>() != kProtocolVersion)
    return InvalidArgument(where + "'v' must be " + std::to_string(kProtocolVersion));
  auto ok = doc.find("ok");
  if (ok == doc.end() || !ok->is_boolean()) return InvalidArgument(where + "no boolean 'ok'");
  if (ok->get<bool>()) {
    doc.erase("v");
    doc.erase("ok");
    return ValidateReply(type, doc);
  }
  // {"v", "ok": false, "error": {"code": <a status name>, "message": <string>}}, nothing else.
  auto err = doc.find("error");
  if (doc.size() != 3 || err == doc.end() || !err->is_object() || err->size() != 2)
    return InvalidArgument(where + "an error reply has exactly v, ok and error {code, message}");
  auto code = err->find("code");
  auto message = err->find("message");
  if (code == err->end() || !code->is_string() || !StatusCodeFromName(code->get<std::string>()))
    return InvalidArgument(where + "error.code must be a status code name");
  if (message == err->end() || !message->is_string())
    return InvalidArgument(where + "error.message must be a string");
  return Status::Ok();
}

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
  return Request{*type, std::move(doc)};
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
