#include "http/json_mapping.h"

#include <array>
#include <cstdint>
#include <limits>
#include <string_view>

#include <boost/json.hpp>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include "txmq/common/base64.h"
#include "txmq/protocol/errc.h"
#include "txmq/protocol/message_id.h"

namespace txmq::broker::http_api {

namespace json = boost::json;
namespace pb = google::protobuf;
using fd = pb::FieldDescriptor;

namespace {

result<void> from_json_at(const json::value& v, pb::Message& m, const std::string& path);

constexpr std::array<std::string_view, 5> k_id_fields = {"id", "txid", "message_id", "after_txid", "next_after_txid"};

bool is_id_field(const fd& f) {
  if (f.type() != fd::TYPE_BYTES) return false;
  for (auto n : k_id_fields) {
    if (f.name() == n) return true;
  }
  return false;
}

std::string id_text(const std::string& raw) {
  if (raw.empty()) return {};
  auto u = protocol::uuid::from_bytes(raw);
  // A stored id is always 16 bytes; anything else is shown rather than hidden.
  return u ? u.value().to_string() : common::base64_encode(raw);
}

json::value scalar_to_json(const pb::Message& m, const fd& f, const pb::Reflection& r, int index) {
  const bool rep = f.is_repeated();
  switch (f.cpp_type()) {
    case fd::CPPTYPE_INT32: return rep ? r.GetRepeatedInt32(m, &f, index) : r.GetInt32(m, &f);
    case fd::CPPTYPE_INT64: return rep ? r.GetRepeatedInt64(m, &f, index) : r.GetInt64(m, &f);
    case fd::CPPTYPE_UINT32: return rep ? r.GetRepeatedUInt32(m, &f, index) : r.GetUInt32(m, &f);
    case fd::CPPTYPE_UINT64: return rep ? r.GetRepeatedUInt64(m, &f, index) : r.GetUInt64(m, &f);
    case fd::CPPTYPE_DOUBLE: return rep ? r.GetRepeatedDouble(m, &f, index) : r.GetDouble(m, &f);
    case fd::CPPTYPE_FLOAT: return rep ? r.GetRepeatedFloat(m, &f, index) : r.GetFloat(m, &f);
    case fd::CPPTYPE_BOOL: return rep ? r.GetRepeatedBool(m, &f, index) : r.GetBool(m, &f);
    case fd::CPPTYPE_ENUM: {
      const int v = rep ? r.GetRepeatedEnumValue(m, &f, index) : r.GetEnumValue(m, &f);
      const auto* e = f.enum_type()->FindValueByNumber(v);
      if (e) return json::string(e->name());
      return v;
    }
    case fd::CPPTYPE_STRING: {
      std::string s = rep ? r.GetRepeatedString(m, &f, index) : r.GetString(m, &f);
      if (f.type() == fd::TYPE_BYTES && is_id_field(f)) return json::string(id_text(s));
      return json::string(s);
    }
    case fd::CPPTYPE_MESSAGE: return to_json(rep ? r.GetRepeatedMessage(m, &f, index) : r.GetMessage(m, &f));
  }
  return nullptr;
}

// Sets bytes field `f` of `m` (or appends to it) with `bytes`.
void set_bytes(pb::Message& m, const fd& f, const pb::Reflection& r, std::string bytes) {
  if (f.is_repeated()) {
    r.AddString(&m, &f, std::move(bytes));
  } else {
    r.SetString(&m, &f, std::move(bytes));
  }
}

result<void> fail(const std::string& path, std::string what) {
  return error(protocol::errc::invalid_argument, path + ": " + what);
}

template <class T>
result<T> integer(const json::value& v, const std::string& path) {
  if (v.is_int64()) {
    const auto x = v.get_int64();
    if constexpr (std::is_signed_v<T>) {
      if (x >= std::numeric_limits<T>::min() && x <= std::numeric_limits<T>::max()) return static_cast<T>(x);
    } else {
      if (x >= 0 && static_cast<std::uint64_t>(x) <= std::numeric_limits<T>::max()) return static_cast<T>(x);
    }
  } else if (v.is_uint64()) {
    const auto x = v.get_uint64();
    if (x <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(x);
  } else if (v.is_double()) {
    return error(protocol::errc::invalid_argument, path + ": expected an integer, got a fraction");
  } else {
    return error(protocol::errc::invalid_argument, path + ": expected an integer");
  }
  return error(protocol::errc::invalid_argument, path + ": integer out of range");
}

result<void> set_scalar(pb::Message& m, const fd& f, const json::value& v, const std::string& path, bool base64);

result<void> set_value(pb::Message& m, const fd& f, const json::value& v, const std::string& path, bool base64) {
  const auto* r = m.GetReflection();
  if (f.is_map()) {
    if (!v.is_object()) return fail(path, "expected an object");
    const auto* entry = f.message_type();
    const auto* kf = entry->map_key();
    const auto* vf = entry->map_value();
    if (kf->cpp_type() != fd::CPPTYPE_STRING || vf->cpp_type() != fd::CPPTYPE_STRING) {
      return fail(path, "unsupported map type");
    }
    for (const auto& kv : v.as_object()) {
      if (!kv.value().is_string()) return fail(path + "." + std::string(kv.key()), "expected a string");
      auto* e = r->AddMessage(&m, &f);
      e->GetReflection()->SetString(e, kf, std::string(kv.key()));
      e->GetReflection()->SetString(e, vf, std::string(kv.value().as_string()));
    }
    return outcome::success();
  }
  if (f.is_repeated()) {
    if (!v.is_array()) return fail(path, "expected an array");
    std::size_t i = 0;
    for (const auto& item : v.as_array()) {
      TXMQ_TRY(set_scalar(m, f, item, path + "[" + std::to_string(i++) + "]", base64));
    }
    return outcome::success();
  }
  return set_scalar(m, f, v, path, base64);
}

result<void> set_scalar(pb::Message& m, const fd& f, const json::value& v, const std::string& path, bool base64) {
  const auto* r = m.GetReflection();
  const bool rep = f.is_repeated();
  switch (f.cpp_type()) {
    case fd::CPPTYPE_INT32: {
      auto x = integer<std::int32_t>(v, path);
      if (!x) return x.error();
      rep ? r->AddInt32(&m, &f, x.value()) : r->SetInt32(&m, &f, x.value());
      return outcome::success();
    }
    case fd::CPPTYPE_INT64: {
      auto x = integer<std::int64_t>(v, path);
      if (!x) return x.error();
      rep ? r->AddInt64(&m, &f, x.value()) : r->SetInt64(&m, &f, x.value());
      return outcome::success();
    }
    case fd::CPPTYPE_UINT32: {
      auto x = integer<std::uint32_t>(v, path);
      if (!x) return x.error();
      rep ? r->AddUInt32(&m, &f, x.value()) : r->SetUInt32(&m, &f, x.value());
      return outcome::success();
    }
    case fd::CPPTYPE_UINT64: {
      auto x = integer<std::uint64_t>(v, path);
      if (!x) return x.error();
      rep ? r->AddUInt64(&m, &f, x.value()) : r->SetUInt64(&m, &f, x.value());
      return outcome::success();
    }
    case fd::CPPTYPE_DOUBLE:
    case fd::CPPTYPE_FLOAT: {
      if (!v.is_number()) return fail(path, "expected a number");
      const double d = v.to_number<double>();
      if (f.cpp_type() == fd::CPPTYPE_DOUBLE) {
        rep ? r->AddDouble(&m, &f, d) : r->SetDouble(&m, &f, d);
      } else {
        rep ? r->AddFloat(&m, &f, static_cast<float>(d)) : r->SetFloat(&m, &f, static_cast<float>(d));
      }
      return outcome::success();
    }
    case fd::CPPTYPE_BOOL:
      if (!v.is_bool()) return fail(path, "expected true or false");
      rep ? r->AddBool(&m, &f, v.get_bool()) : r->SetBool(&m, &f, v.get_bool());
      return outcome::success();
    case fd::CPPTYPE_ENUM: {
      int number = 0;
      if (v.is_string()) {
        const auto* e = f.enum_type()->FindValueByName(std::string(v.get_string()));
        if (!e) return fail(path, "unknown value '" + std::string(v.get_string()) + "'");
        number = e->number();
      } else {
        auto x = integer<std::int32_t>(v, path);
        if (!x) return x.error();
        number = x.value();
      }
      rep ? r->AddEnumValue(&m, &f, number) : r->SetEnumValue(&m, &f, number);
      return outcome::success();
    }
    case fd::CPPTYPE_STRING: {
      if (!v.is_string()) return fail(path, "expected a string");
      std::string text(v.get_string());
      if (f.type() == fd::TYPE_BYTES) {
        if (is_id_field(f)) {
          if (text.empty()) {
            set_bytes(m, f, *r, {});
            return outcome::success();
          }
          auto u = protocol::uuid::parse(text);
          if (!u) return fail(path, "'" + text + "' is not a UUID (36 characters, 8-4-4-4-12 hex digits)");
          set_bytes(m, f, *r, std::string(u.value().raw()));
          return outcome::success();
        }
        if (base64) {
          auto raw = common::base64_decode(text);
          if (!raw) return fail(path, "not valid base64");
          set_bytes(m, f, *r, std::move(raw.value()));
          return outcome::success();
        }
        set_bytes(m, f, *r, std::move(text));
        return outcome::success();
      }
      rep ? r->AddString(&m, &f, std::move(text)) : r->SetString(&m, &f, std::move(text));
      return outcome::success();
    }
    case fd::CPPTYPE_MESSAGE: {
      if (!v.is_object()) return fail(path, "expected an object");
      pb::Message* sub = rep ? r->AddMessage(&m, &f) : r->MutableMessage(&m, &f);
      return from_json_at(v, *sub, path);
    }
  }
  return fail(path, "unsupported field type");
}

}  // namespace

bool is_text(std::string_view s) noexcept {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) return false;
  }
  return is_utf8(s);
}

bool is_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

json::value to_json(const pb::Message& m) {
  json::object o;
  const auto* d = m.GetDescriptor();
  const auto* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const fd& f = *d->field(i);
    if (f.is_map()) {
      json::object map;
      const auto* kf = f.message_type()->map_key();
      const auto* vf = f.message_type()->map_value();
      for (int k = 0; k < r->FieldSize(m, &f); ++k) {
        const auto& e = r->GetRepeatedMessage(m, &f, k);
        map[e.GetReflection()->GetString(e, kf)] = e.GetReflection()->GetString(e, vf);
      }
      o[f.name()] = std::move(map);
      continue;
    }
    const bool data_bytes = f.type() == fd::TYPE_BYTES && !is_id_field(f);
    if (f.is_repeated()) {
      json::array a;
      bool all_text = true;
      for (int k = 0; k < r->FieldSize(m, &f); ++k) {
        if (data_bytes && !is_text(r->GetRepeatedString(m, &f, k))) all_text = false;
      }
      for (int k = 0; k < r->FieldSize(m, &f); ++k) {
        if (data_bytes && !all_text) {
          a.push_back(json::string(common::base64_encode(r->GetRepeatedString(m, &f, k))));
        } else {
          a.push_back(scalar_to_json(m, f, *r, k));
        }
      }
      o[all_text ? f.name() : f.name() + "_base64"] = std::move(a);
      continue;
    }
    if ((f.has_presence() || f.cpp_type() == fd::CPPTYPE_MESSAGE) && !r->HasField(m, &f)) continue;
    if (data_bytes) {
      const std::string bytes = r->GetString(m, &f);
      if (is_text(bytes)) {
        o[f.name()] = bytes;
      } else {
        o[f.name() + "_base64"] = common::base64_encode(bytes);
      }
      continue;
    }
    o[f.name()] = scalar_to_json(m, f, *r, 0);
  }
  return o;
}

namespace {

result<void> from_json_at(const json::value& v, pb::Message& m, const std::string& path) {
  if (!v.is_object()) return fail(path.empty() ? "request body" : path, "expected a JSON object");
  const auto* d = m.GetDescriptor();
  for (const auto& kv : v.as_object()) {
    std::string name(kv.key());
    bool base64 = false;
    const fd* f = d->FindFieldByName(name);
    if (!f && name.ends_with("_base64")) {
      f = d->FindFieldByName(name.substr(0, name.size() - 7));
      if (f && (f->type() != fd::TYPE_BYTES || is_id_field(*f))) f = nullptr;
      base64 = f != nullptr;
    }
    const std::string at = path.empty() ? name : path + "." + name;
    if (!f) return fail(at, "unknown field");
    if (kv.value().is_null()) continue;
    if (f->type() == fd::TYPE_BYTES && !is_id_field(*f) && !f->is_repeated()) {
      // `body` and `body_base64` together: which one was meant?
      const std::string other = base64 ? f->name() : f->name() + "_base64";
      if (v.as_object().contains(other)) return fail(at, "give either " + f->name() + " or " + f->name() + "_base64");
    }
    TXMQ_TRY(set_value(m, *f, kv.value(), at, base64));
  }
  return outcome::success();
}

}  // namespace

result<void> from_json(const json::value& v, pb::Message& m) {
  m.Clear();
  return from_json_at(v, m, "");
}

}  // namespace txmq::broker::http_api
