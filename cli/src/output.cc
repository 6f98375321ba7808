#include "output.h"

#include "txmq/cli/format.h"
#include "txmq/protocol/message_id.h"
#include "txmq/common/base64.h"

namespace txmq::cli::detail {

namespace json = boost::json;

std::string quoted(const std::string& name) { return "'" + name + "'"; }

void print_json(std::ostream& out, const json::value& v) { out << json::serialize(v) << '\n'; }

std::string id_text(const std::string& raw) {
  auto id = protocol::uuid::from_bytes(raw);
  return id ? id.value().to_string() : "base64:" + common::base64_encode(raw);
}

std::string bytes_cell(const std::string& bytes) {
  return is_valid_utf8(bytes) ? escape_control(bytes) : "base64:" + common::base64_encode(bytes);
}

void put_bytes(json::object& o, const std::string& name, const std::string& bytes) {
  if (is_valid_utf8(bytes)) {
    o[name] = bytes;
  } else {
    o[name + "_base64"] = common::base64_encode(bytes);
  }
}

std::map<std::string, std::string> headers_of(const v1::Message& m) {
  return {m.headers().begin(), m.headers().end()};
}

json::object headers_json(const v1::Message& m) {
  json::object h;
  for (const auto& [k, v] : headers_of(m)) h[k] = v;
  return h;
}

std::string key_cell(const v1::Message& m) {
  if (!m.has_key()) return "-";
  if (m.key().empty()) return "\"\"";
  return bytes_cell(m.key());
}

void put_key(json::object& o, const v1::Message& m) {
  if (!m.has_key()) {
    o["key"] = nullptr;
  } else {
    put_bytes(o, "key", m.key());
  }
}

std::string join(const google::protobuf::RepeatedPtrField<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out.empty() ? "-" : out;
}

std::string id_list(const google::protobuf::RepeatedField<std::int64_t>& list) {
  std::string out;
  for (auto id : list) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out.empty() ? "-" : out;
}

boost::json::array id_array(const google::protobuf::RepeatedField<std::int64_t>& list) {
  boost::json::array out;
  for (auto id : list) out.push_back(id);
  return out;
}

}  // namespace txmq::cli::detail
