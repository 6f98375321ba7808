#pragma once

// What the broker commands print, shared by them (private to txmq_cli): JSON lines, and the way
// a message's id, key, headers and body appear in a table cell or a JSON object — text when it
// is valid UTF-8, base64 otherwise (README: "Conventions").

#include <map>
#include <ostream>
#include <string>

#include <boost/json.hpp>

#include "session.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::cli::detail {

// 'name', for names inside error messages.
[[nodiscard]] std::string quoted(const std::string& name);

// One JSON value on one line.
void print_json(std::ostream& out, const boost::json::value& v);

// A message id or txid (16 raw bytes) as canonical UUID text; anything else as base64:....
[[nodiscard]] std::string id_text(const std::string& raw);

// Bytes for one table cell: text when it is UTF-8, base64 otherwise.
[[nodiscard]] std::string bytes_cell(const std::string& bytes);

// Sets `name` (text) or `name_base64` on o.
void put_bytes(boost::json::object& o, const std::string& name, const std::string& bytes);

[[nodiscard]] std::map<std::string, std::string> headers_of(const v1::Message& m);
[[nodiscard]] boost::json::object headers_json(const v1::Message& m);

// Node ids (a partition's replicas or ISR) as one table cell, "1,2,3" ("-" when none), and as
// a JSON array.
[[nodiscard]] std::string id_list(const google::protobuf::RepeatedField<std::int64_t>& list);
[[nodiscard]] boost::json::array id_array(const google::protobuf::RepeatedField<std::int64_t>& list);

// The key's table cell: "-" when the message has none, "" when it is empty.
[[nodiscard]] std::string key_cell(const v1::Message& m);
// Sets `key` (null when the message has none) or `key_base64` on o.
void put_key(boost::json::object& o, const v1::Message& m);

// "a,b,c"; "-" when empty.
[[nodiscard]] std::string join(const google::protobuf::RepeatedPtrField<std::string>& items);

// Prints topics or groups: one JSON line each, or one table with a row each.
template <class Items, class Json, class Table, class Row>
int print_items(session& s, const Items& items, Json to_json, Table make_table, Row to_row) {
  if (s.json()) {
    for (const auto& item : items) print_json(s.env().out, to_json(item, false));
  } else {
    auto t = make_table();
    for (const auto& item : items) t.add(to_row(item));
    t.print(s.env().out);
  }
  return exit_ok;
}

}  // namespace txmq::cli::detail
