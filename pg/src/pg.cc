#include "txmq/pg/pg.h"

#include <cstdint>
#include <vector>

namespace txmq::pg {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "txmq.pg"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::database: return "database error";
    }
    return "unknown txmq.pg error " + std::to_string(ev);
  }
};

error database_error(std::string text) { return {errc::database, std::move(text)}; }

std::string trimmed(const char* text) {
  std::string s = text ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

constexpr std::string_view sqlstate_prefix = "SQLSTATE ";

result<result_ptr> checked(PGconn* conn, result_ptr res) {
  if (!res) return database_error("PostgreSQL: " + trimmed(PQerrorMessage(conn)));
  const auto status = PQresultStatus(res.get());
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return res;
  const char* state = PQresultErrorField(res.get(), PG_DIAG_SQLSTATE);
  const char* primary = PQresultErrorField(res.get(), PG_DIAG_MESSAGE_PRIMARY);
  if (state && primary) return database_error(std::string(sqlstate_prefix) + state + ": " + primary);
  return database_error("PostgreSQL: " + trimmed(PQerrorMessage(conn)));
}
}  // namespace

const std::error_category& pg_category() noexcept {
  static const category c;
  return c;
}

result<connection_ptr> connect(const std::string& conninfo) {
  connection_ptr conn(PQconnectdb(conninfo.c_str()));
  if (!conn) return database_error("libpq could not allocate a connection");
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    return database_error("cannot connect to PostgreSQL: " + trimmed(PQerrorMessage(conn.get())));
  }
  return conn;
}

result<result_ptr> exec(PGconn* conn, std::string_view sql, std::initializer_list<param> params) {
  return exec(conn, sql, std::span<const param>(params.begin(), params.size()));
}

result<result_ptr> exec(PGconn* conn, std::string_view sql, std::span<const param> params) {
  const std::string statement(sql);
  if (params.size() == 0) {
    // The simple protocol, so that a script of several statements (schema installs) runs too.
    result_ptr res(PQexec(conn, statement.c_str()));
    return checked(conn, std::move(res));
  }
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  result_ptr res(PQexecParams(conn, statement.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                              nullptr, 0));
  return checked(conn, std::move(res));
}

result<result_ptr> exec_binary(PGconn* conn, std::string_view sql, std::span<const param> params) {
  const std::string statement(sql);
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  result_ptr res(PQexecParams(conn, statement.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                              nullptr, 1));
  return checked(conn, std::move(res));
}

result<result_ptr> exec_prepared(PGconn* conn, const std::string& name, std::span<const param> params, bool binary_result,
                                 bool binary_params) {
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  values.reserve(params.size());
  for (const auto& p : params) {
    values.push_back(p ? p->data() : nullptr);
    if (binary_params) {
      lengths.push_back(p ? static_cast<int>(p->size()) : 0);
      formats.push_back(1);
    }
  }
  result_ptr res(PQexecPrepared(conn, name.c_str(), static_cast<int>(values.size()), values.data(),
                                binary_params ? lengths.data() : nullptr, binary_params ? formats.data() : nullptr,
                                binary_result ? 1 : 0));
  return checked(conn, std::move(res));
}

std::string uuid_array_binary(std::string_view raw) {
  constexpr std::uint32_t uuid_oid = 2950;  // pg_type.oid of uuid
  constexpr std::size_t uuid_bytes = 16;
  const auto n = static_cast<std::uint32_t>(raw.size() / uuid_bytes);
  std::string out;
  out.reserve(20 + n * (4 + uuid_bytes));
  auto put = [&out](std::uint32_t v) {  // network byte order, as array_recv reads it
    const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
    out.append(b, 4);
  };
  put(1);         // dimensions
  put(0);         // flags: no NULLs
  put(uuid_oid);  // element type
  put(n);         // length of the dimension
  put(1);         // its lower bound
  for (std::uint32_t i = 0; i < n; ++i) {
    put(static_cast<std::uint32_t>(uuid_bytes));
    out.append(raw.substr(i * uuid_bytes, uuid_bytes));
  }
  return out;
}

connection_pool::connection_pool(std::string conninfo, std::function<result<void>(PGconn*)> setup)
    : conninfo_(std::move(conninfo)), setup_(std::move(setup)) {}

result<connection_ptr> connection_pool::take() {
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  auto c = connect(conninfo_);
  if (!c) return c.error();
  if (setup_) {
    if (auto r = setup_(c.value().get()); !r) return r.error();
  }
  return c;
}

void connection_pool::give_back(connection_ptr c) {
  if (!c || PQstatus(c.get()) != CONNECTION_OK || PQtransactionStatus(c.get()) != PQTRANS_IDLE) return;
  std::lock_guard lock(mutex_);
  idle_.push_back(std::move(c));
}

std::string sqlstate(const error& e) {
  if (!e.is(errc::database) || !e.message.starts_with(sqlstate_prefix)) return {};
  return e.message.substr(sqlstate_prefix.size(), 5);
}

std::string int_array_literal(const std::set<int>& values) {
  std::string out = "{";
  for (int v : values) out += (out.size() > 1 ? "," : "") + std::to_string(v);
  return out + "}";
}

std::string bytea_literal(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 + bytes.size() * 2);
  out += "\\x";
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

result<std::string> bytea_value(std::string_view text) {
  if (!text.starts_with("\\x") || text.size() % 2 != 0) {
    return database_error("a bytea value not in hex form (bytea_output must be 'hex')");
  }
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve((text.size() - 2) / 2);
  for (std::size_t i = 2; i < text.size(); i += 2) {
    const int hi = nibble(text[i]);
    const int lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return database_error("a bytea value with a non-hex digit");
    out += static_cast<char>(hi << 4 | lo);
  }
  return out;
}

}  // namespace txmq::pg
