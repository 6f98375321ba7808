#include "message_commands.h"

#include <algorithm>
#include <deque>
#include <future>
#include <istream>
#include <ostream>
#include <vector>

#include <boost/json.hpp>

#include "output.h"
#include "txmq/cli/format.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"

namespace txmq::cli::detail {

namespace json = boost::json;
using std::chrono::milliseconds;

// ---- produce -------------------------------------------------------------------------------

int produce(session& s, const produce_args& a) {
  std::vector<std::string> bodies;
  const bool from_stdin = !a.body;
  if (a.id && from_stdin) {
    // One id names one message: know the input before sending any of it.
    std::string line;
    while (std::getline(s.env().in, line)) bodies.push_back(line);
    if (bodies.size() > 1) {
      s.env().err << "txmq: --id names one message, but stdin has " << bodies.size()
                  << " lines; give BODY or a single line\n";
      return exit_usage;
    }
  } else if (a.body) {
    bodies.push_back(*a.body);
  }

  auto conn = s.connect();
  if (!conn) return exit_failure;
  producer::producer_options options;
  options.connection = conn->options();
  options.delivery_timeout = s.timeout();
  options.request_timeout = s.timeout();
  // Input lines are stored in input order, retries included (also the library's default).
  options.max_in_flight_batches_per_topic = 1;
  producer::producer p(conn, options);

  struct pending_send {
    std::uint64_t line;
    std::future<client::result<producer::send_result>> outcome;
  };
  std::deque<pending_send> pending;
  table rows({"ID", "PARTITION", "OFFSET", "STATUS"});
  std::optional<client::error> first_error;
  std::uint64_t first_error_line = 0;
  std::uint64_t failures = 0;
  std::uint64_t sent = 0;
  auto& out = s.env().out;

  const auto settle_front = [&] {
    auto r = pending.front().outcome.get();
    const auto line = pending.front().line;
    pending.pop_front();
    if (!r) {
      if (!first_error) {
        first_error = r.error();
        first_error_line = line;
      }
      ++failures;
      return;
    }
    const auto& v = r.value();
    if (s.json()) {
      print_json(out, json::object{{"id", v.id.to_string()},
                                   {"topic", a.topic},
                                   {"partition", v.partition},
                                   {"offset", v.offset},
                                   {"duplicate", v.duplicate}});
    } else {
      rows.write_row(out, {v.id.to_string(), std::to_string(v.partition), std::to_string(v.offset),
                           v.duplicate ? "duplicate" : "stored"});
    }
  };
  const auto send = [&](std::string body) {
    producer::outgoing_message m;
    m.topic = a.topic;
    m.key = a.key;
    m.headers = a.headers;
    m.body = std::move(body);
    m.id = a.id;
    pending.push_back({++sent, p.async_send(std::move(m))});
  };
  const auto drain = [&] {
    while (!pending.empty()) settle_front();
    out.flush();
  };

  if (!from_stdin || a.id) {
    for (auto& b : bodies) send(std::move(b));
  } else {
    std::string line;
    auto* in = s.env().in.rdbuf();
    while (!first_error && std::getline(s.env().in, line)) {
      send(std::move(line));
      while (!pending.empty() && pending.front().outcome.wait_for(milliseconds(0)) == std::future_status::ready) {
        settle_front();
      }
      // Lines already waiting are sent as one batch; before blocking for more input, report
      // what was sent so far, so that an interactive user sees each acknowledgement.
      if (pending.size() >= 1000 || in == nullptr || in->in_avail() <= 0) drain();
    }
  }
  drain();
  p.close();
  if (first_error) {
    std::string what = "produce to topic " + quoted(a.topic) + " failed";
    if (from_stdin) what += " for input line " + std::to_string(first_error_line);
    if (failures > 1) what += " (and " + std::to_string(failures - 1) + " more messages)";
    return s.fail(what, *first_error);
  }
  return exit_ok;
}

// ---- consume -------------------------------------------------------------------------------

namespace {

// Acks a fetched batch. Each ref carries its delivery's attempt, so an ack never settles a
// newer delivery of the same message (one whose deadline passed and that went out again).
int ack_deliveries(session& s, consumer::consumer& c, const std::string& group,
                   const std::vector<consumer::delivery>& deliveries) {
  std::vector<consumer::delivery_ref> refs;
  refs.reserve(deliveries.size());
  for (const auto& d : deliveries) refs.push_back(d.ref());
  const std::string what = "ack in group " + quoted(group);
  auto answer = c.ack(refs);
  if (!answer) return s.fail(what, answer.error());
  std::size_t failed = 0;
  std::string first;
  for (std::size_t i = 0; i < answer.value().size(); ++i) {
    const auto& r = answer.value()[i];
    if (r) continue;
    if (failed++ == 0) {
      const auto& ref = refs[i];
      first = ref.topic + "/" + std::to_string(ref.partition) + "@" + std::to_string(ref.offset) + " attempt " +
              std::to_string(ref.attempt) + ": " + r.error().to_string();
    }
  }
  if (failed > 0) {
    return s.fail(what + " failed for " + std::to_string(failed) + " of " + std::to_string(deliveries.size()) +
                  " messages (first: " + first + ")");
  }
  return exit_ok;
}

}  // namespace

int consume(session& s, const consume_args& a) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  consumer::consumer_options options;
  options.connection = conn->options();
  options.group = a.group;
  options.topics = {a.topic};
  consumer::consumer c(conn, options);
  table rows({"ID", "KEY", "HEADERS", "PARTITION", "OFFSET", "ATTEMPT", "BODY"});
  auto& out = s.env().out;
  std::uint64_t handled = 0;
  constexpr std::uint64_t k_batch = 100;
  while (a.max == 0 || handled < a.max) {
    const auto want = static_cast<std::uint32_t>(a.max == 0 ? k_batch : std::min(k_batch, a.max - handled));
    auto got = c.fetch(want, a.wait);
    if (!got) return s.fail("consume topic " + quoted(a.topic) + " as group " + quoted(a.group), got.error());
    const auto& deliveries = got.value();
    if (deliveries.empty()) break;
    for (const auto& d : deliveries) {
      const auto& m = d.message;
      if (s.json()) {
        json::object o{{"id", id_text(m.id())}, {"topic", m.topic()}};
        put_key(o, m);
        o["headers"] = headers_json(m);
        o["partition"] = m.partition();
        o["offset"] = m.offset();
        o["attempt"] = m.attempt();
        o["publish_time"] = iso_time(m.publish_time_ms());
        put_bytes(o, "body", m.body());
        print_json(out, o);
      } else {
        rows.write_row(out, {id_text(m.id()), key_cell(m), headers_text(headers_of(m)), std::to_string(m.partition()),
                             std::to_string(m.offset()), std::to_string(m.attempt()), bytes_cell(m.body())});
      }
    }
    out.flush();
    if (!a.no_ack) {
      if (const int status = ack_deliveries(s, c, a.group, deliveries); status != exit_ok) return status;
    }
    handled += deliveries.size();
  }
  return exit_ok;
}

}  // namespace txmq::cli::detail
