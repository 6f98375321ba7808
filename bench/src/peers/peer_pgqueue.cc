// A PostgreSQL table used as a queue through libpq: publishing is an INSERT (one multi-row
// statement per batch, committed with synchronous_commit on, i.e. after the WAL fsync),
// consuming is `DELETE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1000)
// RETURNING body` (the committed delete is the ack). Batches in flight run on their own
// connections, as concurrent application transactions would, so PostgreSQL's group commit
// applies to them as txmq's does to concurrent produce requests.

#include <libpq-fe.h>
#include <poll.h>

#include <deque>
#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>

#include "peers/system_under_test.h"

namespace txmq::bench::detail {
namespace {

// Each in-flight batch needs its own connection; beyond this many, batches wait for one.
constexpr std::size_t k_max_connections = 64;

std::string quote_identifier(const std::string& name) { return "\"" + name + "\""; }

struct pg_result {
  PGresult* r;
  ~pg_result() { PQclear(r); }
};

class pg_link {
 public:
  explicit pg_link(const std::string& conninfo) : c_(PQconnectdb(conninfo.c_str())) {
    if (PQstatus(c_) != CONNECTION_OK) {
      const std::string why = PQerrorMessage(c_);
      PQfinish(c_);
      throw std::runtime_error("pgqueue: connect '" + conninfo + "': " + why);
    }
  }
  ~pg_link() { PQfinish(c_); }
  pg_link(const pg_link&) = delete;
  pg_link& operator=(const pg_link&) = delete;
  [[nodiscard]] PGconn* get() const { return c_; }

  void exec(const std::string& sql) {
    pg_result r{PQexec(c_, sql.c_str())};
    if (PQresultStatus(r.r) != PGRES_COMMAND_OK) throw std::runtime_error("pgqueue: " + sql + ": " + PQerrorMessage(c_));
  }

 private:
  PGconn* c_;
};

class pg_publisher final : public publisher {
 public:
  pg_publisher(const std::string& conninfo, const std::string& table, std::size_t max_requests) : table_(quote_identifier(table)) {
    const std::size_t n = std::clamp<std::size_t>(max_requests, 1, k_max_connections);
    for (std::size_t i = 0; i < n; ++i) {
      slots_.push_back(std::make_unique<slot>(conninfo));
      if (PQsetnonblocking(slots_.back()->link.get(), 1) != 0) throw std::runtime_error("pgqueue: cannot make the connection non-blocking");
      idle_.push_back(slots_.back().get());
    }
  }

  void send(std::vector<std::string> bodies, completion done) override {
    ++outstanding_;
    waiting_.push_back({std::move(bodies), std::move(done)});
    dispatch();
  }

  void poll(std::chrono::nanoseconds max_wait) override {
    std::vector<pollfd> fds;
    std::vector<slot*> busy;
    for (auto& s : slots_) {
      if (!s->current) continue;
      // A non-blocking connection may still hold query bytes to send.
      const bool writing = PQflush(s->link.get()) == 1;
      fds.push_back({PQsocket(s->link.get()), static_cast<short>(POLLIN | (writing ? POLLOUT : 0)), 0});
      busy.push_back(s.get());
    }
    if (busy.empty()) {
      std::this_thread::sleep_for(max_wait);
      return;
    }
    // ppoll, not poll: a steady-rate sender's wait is tens of microseconds, and poll's whole
    // milliseconds would hold its next send back.
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(max_wait);
    const timespec wait{static_cast<time_t>(secs.count()), static_cast<long>((max_wait - secs).count())};
    if (::ppoll(fds.data(), fds.size(), &wait, nullptr) <= 0) return;
    std::vector<job> finished;
    for (std::size_t i = 0; i < busy.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto* s = busy[i];
      if (!PQconsumeInput(s->link.get())) throw std::runtime_error(std::string("pgqueue: ") + PQerrorMessage(s->link.get()));
      bool ok = true;
      bool complete = false;
      while (!PQisBusy(s->link.get())) {
        PGresult* r = PQgetResult(s->link.get());
        if (!r) {
          complete = true;
          break;
        }
        ok = ok && PQresultStatus(r) == PGRES_COMMAND_OK;
        s->ok = s->ok && ok;
        PQclear(r);
      }
      if (!complete) continue;
      auto j = std::move(*s->current);
      j.ok = s->ok;
      s->current.reset();
      idle_.push_back(s);
      finished.push_back(std::move(j));
    }
    dispatch();
    for (auto& j : finished) {
      --outstanding_;
      j.done(j.ok);
    }
  }

  [[nodiscard]] std::size_t outstanding() const override { return outstanding_; }

 private:
  struct job {
    std::vector<std::string> bodies;
    completion done;
    bool ok = true;
  };
  struct slot {
    explicit slot(const std::string& conninfo) : link(conninfo) {}
    pg_link link;
    std::optional<job> current;  // the batch this connection runs, if any
    bool ok = true;
  };

  const std::string& insert_sql(std::size_t n) {
    auto& sql = sql_by_count_[n];
    if (sql.empty()) {
      sql = "INSERT INTO " + table_ + " (body) VALUES ";
      for (std::size_t i = 1; i <= n; ++i) sql += (i > 1 ? ",($" : "($") + std::to_string(i) + "::bytea)";
    }
    return sql;
  }

  void dispatch() {
    while (!waiting_.empty() && !idle_.empty()) {
      auto* s = idle_.back();
      idle_.pop_back();
      s->current = std::move(waiting_.front());
      s->ok = true;
      waiting_.pop_front();
      auto& bodies = s->current->bodies;
      std::vector<const char*> values;
      std::vector<int> lengths, formats(bodies.size(), 1);
      for (const auto& b : bodies) {
        values.push_back(b.data());
        lengths.push_back(static_cast<int>(b.size()));
      }
      if (!PQsendQueryParams(s->link.get(), insert_sql(bodies.size()).c_str(), static_cast<int>(bodies.size()), nullptr,
                             values.data(), lengths.data(), formats.data(), 0)) {
        throw std::runtime_error(std::string("pgqueue: INSERT: ") + PQerrorMessage(s->link.get()));
      }
    }
  }

  std::string table_;
  std::vector<std::unique_ptr<slot>> slots_;
  std::vector<slot*> idle_;
  std::deque<job> waiting_;
  std::map<std::size_t, std::string> sql_by_count_;
  std::size_t outstanding_ = 0;
};

class pg_consumer final : public consumer {
 public:
  pg_consumer(const std::string& conninfo, const std::string& table)
      : link_(conninfo),
        sql_("DELETE FROM " + quote_identifier(table) + " WHERE id IN (SELECT id FROM " + quote_identifier(table) +
             " ORDER BY id LIMIT 1000 FOR UPDATE SKIP LOCKED) RETURNING body") {}

  std::size_t poll(std::chrono::nanoseconds max_wait, const delivery& on_message) override {
    pg_result r{PQexecParams(link_.get(), sql_.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 1)};
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) throw std::runtime_error(std::string("pgqueue: consume: ") + PQerrorMessage(link_.get()));
    const int rows = PQntuples(r.r);
    for (int i = 0; i < rows; ++i) {
      on_message(std::string_view(PQgetvalue(r.r, i, 0), static_cast<std::size_t>(PQgetlength(r.r, i, 0))));
    }
    // An empty queue is polled again after a short pause (a table has no push delivery
    // without LISTEN/NOTIFY triggers, which a plain table queue does not have).
    if (rows == 0) std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(max_wait, std::chrono::milliseconds(1)));
    return static_cast<std::size_t>(rows);
  }

 private:
  pg_link link_;
  std::string sql_;
};

class pg_system final : public system_under_test {
 public:
  explicit pg_system(const system_options& o) : conninfo_(o.address), table_(o.name) {
    pg_link admin(conninfo_);
    admin.exec("SET client_min_messages = warning");
    admin.exec("CREATE TABLE IF NOT EXISTS " + quote_identifier(table_) + " (id bigserial PRIMARY KEY, body bytea NOT NULL)");
  }

  ~pg_system() override {
    // Best effort: a table left behind only costs disk in the benchmark's private cluster.
    try {
      pg_link admin(conninfo_);
      admin.exec("DROP TABLE IF EXISTS " + quote_identifier(table_));
    } catch (const std::exception&) {
    }
  }

  std::unique_ptr<publisher> make_publisher(std::size_t max_requests) override {
    return std::make_unique<pg_publisher>(conninfo_, table_, max_requests);
  }
  std::unique_ptr<consumer> make_consumer() override { return std::make_unique<pg_consumer>(conninfo_, table_); }
  std::string durability() const override { return "INSERT committed with synchronous_commit on (WAL fsync, group commit)"; }

 private:
  std::string conninfo_, table_;
};

}  // namespace

std::unique_ptr<system_under_test> open_pgqueue(const system_options& options) {
  return std::make_unique<pg_system>(options);
}

}  // namespace txmq::bench::detail
