#include "webhook_commands.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iomanip>
#include <locale>
#include <sstream>
#include <vector>

#include <boost/json.hpp>

#include "txmq/cli/format.h"
#include "txmq/client/cluster_admin.h"
#include "txmq/protocol/message_id.h"
#include "txmq/common/units.h"

namespace txmq::cli::detail {
namespace {

namespace po = boost::program_options;
namespace json = boost::json;

std::string arg(const po::variables_map& vm, const std::string& name) {
  if (!vm.count(name)) throw po::error("missing " + name);
  return vm[name].as<std::string>();
}

// "500ms", "15s", "3m", "1h", "2d" in milliseconds: the grammar of every txmq binary.
std::int64_t duration_ms(const std::string& text, const std::string& what) {
  auto d = common::parse_duration(text);
  if (!d) throw po::error(what + ": " + d.error().message);
  return d.value().count();
}

std::vector<std::uint32_t> schedule_ms(const std::string& text) {
  auto steps = common::parse_duration_list(text);
  if (!steps) throw po::error("--schedule: " + steps.error().message);
  std::vector<std::uint32_t> out;
  for (const auto step : steps.value()) {
    if (step.count() <= 0 || step.count() > std::int64_t{UINT32_MAX}) {
      throw po::error("--schedule: steps must be between 1ms and 49d");
    }
    out.push_back(static_cast<std::uint32_t>(step.count()));
  }
  return out;
}

// --since: an ISO-8601 UTC time (2026-11-26T01:00:00Z), or a duration meaning that long ago.
std::int64_t since_ms(const std::string& text) {
  std::tm tm{};
  std::istringstream in(text);
  in.imbue(std::locale::classic());
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  if (!in.fail()) {
    std::string rest;
    in >> rest;
    if (rest == "Z" || rest.empty()) return static_cast<std::int64_t>(timegm(&tm)) * 1000;
  }
  try {
    const auto ago = duration_ms(text, "--since");
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
    return now - ago;
  } catch (const po::error&) {
    throw po::error("--since: '" + text + "' is neither a UTC time like 2026-11-26T01:00:00Z nor a duration like 10m");
  }
}

std::string id_text(const std::string& raw) {
  auto u = protocol::uuid::from_bytes(raw);
  return u ? u.value().to_string() : "-";
}

std::string schedule_text(const v1::Webhook& w) {
  std::string out;
  for (auto ms : w.schedule_ms()) out += (out.empty() ? "" : ",") + duration_text(ms);
  return out;
}

// "WEBHOOK_TIMED_OUT" -> "timed_out", the words of the broker's metric labels.
std::string outcome_text(v1::WebhookOutcome o) {
  std::string name = v1::WebhookOutcome_Name(o).substr(std::string_view("WEBHOOK_").size());
  for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name;
}

json::object webhook_json(const v1::Webhook& w) {
  json::object o{{"id", w.id()}, {"topic", w.topic()}, {"url", w.url()}};
  json::array schedule;
  for (auto ms : w.schedule_ms()) schedule.push_back(json::string(duration_text(ms)));
  o["schedule"] = std::move(schedule);
  o["timeout"] = duration_text(w.timeout_ms());
  o["concurrency"] = w.concurrency();
  o["rate_per_second"] = w.rate_per_second();
  o["payload"] = w.payload() == v1::WEBHOOK_PAYLOAD_ENVELOPE ? "envelope" : "raw";
  if (w.has_filter_key()) o["filter_key"] = w.filter_key();
  json::object fh;
  for (auto& [k, v] : w.filter_headers()) fh[k] = v;
  o["filter_headers"] = std::move(fh);
  if (!w.secrets().empty()) {
    json::array secrets;
    for (auto& sec : w.secrets()) {
      json::object so{{"secret", sec.secret()}};
      if (sec.expires_ms()) so["expires"] = iso_time(sec.expires_ms());
      secrets.push_back(std::move(so));
    }
    o["secret"] = w.secrets(0).secret();
    o["secrets"] = std::move(secrets);
  }
  if (!w.token().empty()) o["token"] = w.token();
  o["state"] = w.disabled() ? "disabled" : "active";
  if (w.disabled()) o["disabled_reason"] = w.disabled_reason();
  o["created"] = iso_time(w.created_ms());
  o["backlog"] = w.backlog();
  o["exhausted"] = w.exhausted();
  o["in_flight"] = w.in_flight();
  return o;
}

// Sends the request; the answer's body when it is of the expected kind.
std::optional<v1::Frame> call(session& s, v1::Frame request, v1::Frame::BodyCase expected, const std::string& what,
                              int& status) {
  auto conn = s.connect();
  if (!conn) {
    status = exit_failure;
    return std::nullopt;
  }
  auto r = conn->request(std::move(request), s.timeout());
  if (!r) {
    status = s.fail(what, r.error());
    return std::nullopt;
  }
  if (r.value().body_case() != expected) {
    status = s.fail(what + ": the broker answered with an unexpected frame");
    return std::nullopt;
  }
  return std::move(r.value());
}

void print_webhook(session& s, const v1::Webhook& w) {
  if (s.json()) {
    s.env().out << json::serialize(webhook_json(w)) << '\n';
    return;
  }
  table t({"ID", "TOPIC", "URL", "SECRET", "TOKEN"});
  t.add({w.id(), w.topic(), w.url(), w.secrets().empty() ? "-" : w.secrets(0).secret(),
         w.token().empty() ? "-" : w.token()});
  t.print(s.env().out);
}

}  // namespace

void webhook_create_options(po::options_description& o) {
  o.add_options()("url", po::value<std::string>()->value_name("URL"), "http:// or https:// endpoint (required)")(
      "secret", po::value<std::string>()->value_name("S"), "signing secret whsec_<base64> (default: generated)")(
      "schedule", po::value<std::string>()->value_name("15s,15s,..."),
      "delays before attempts 2, 3, ... (default: the broker's webhook_schedule)")(
      "timeout", po::value<std::string>()->value_name("5s"), "time the endpoint has to answer 2xx")(
      "key", po::value<std::string>()->value_name("K"), "only messages with this key")(
      "header", po::value<std::vector<std::string>>()->value_name("k=v"), "only messages with this header; repeatable")(
      "concurrency", po::value<std::uint32_t>()->value_name("N"), "requests in flight at once")(
      "rate", po::value<std::uint32_t>()->value_name("N"), "attempts per second (0: unlimited)")(
      "from", po::value<std::string>()->value_name("latest|earliest"),
      "first message to notify: produced after now (default) or the earliest retained")(
      "payload", po::value<std::string>()->value_name("raw|envelope"),
      "request body: the message body (raw, default) or the Standard Webhooks envelope "
      "{\"type\", \"timestamp\", \"data\"|\"data_base64\"} (envelope)");
}

int webhook_create(session& s, const po::variables_map& vm) {
  v1::Frame f;
  auto* req = f.mutable_webhook_create();
  auto* w = req->mutable_webhook();
  w->set_topic(arg(vm, "TOPIC"));
  w->set_url(arg(vm, "url"));
  if (vm.count("secret")) w->add_secrets()->set_secret(vm["secret"].as<std::string>());
  if (vm.count("schedule")) {
    for (auto ms : schedule_ms(vm["schedule"].as<std::string>())) w->add_schedule_ms(ms);
  }
  if (vm.count("timeout")) {
    const auto ms = duration_ms(vm["timeout"].as<std::string>(), "--timeout");
    if (ms <= 0 || ms > 300'000) throw po::error("--timeout must be between 1ms and 5m");
    w->set_timeout_ms(static_cast<std::uint32_t>(ms));
  }
  if (vm.count("key")) w->set_filter_key(vm["key"].as<std::string>());
  if (vm.count("header")) {
    for (auto& h : vm["header"].as<std::vector<std::string>>()) {
      const auto eq = h.find('=');
      if (eq == std::string::npos || eq == 0) throw po::error("--header wants k=v, got '" + h + "'");
      (*w->mutable_filter_headers())[h.substr(0, eq)] = h.substr(eq + 1);
    }
  }
  if (vm.count("concurrency")) {
    if (vm["concurrency"].as<std::uint32_t>() == 0) throw po::error("--concurrency must be at least 1");
    w->set_concurrency(vm["concurrency"].as<std::uint32_t>());
  }
  if (vm.count("rate")) w->set_rate_per_second(vm["rate"].as<std::uint32_t>());
  if (vm.count("from")) {
    const auto from = vm["from"].as<std::string>();
    if (from != "latest" && from != "earliest") throw po::error("--from wants latest or earliest, got '" + from + "'");
    req->set_from_earliest(from == "earliest");
  }
  if (vm.count("payload")) {
    const auto payload = vm["payload"].as<std::string>();
    if (payload != "raw" && payload != "envelope") throw po::error("--payload wants raw or envelope, got '" + payload + "'");
    w->set_payload(payload == "envelope" ? v1::WEBHOOK_PAYLOAD_ENVELOPE : v1::WEBHOOK_PAYLOAD_RAW);
  }
  int status = exit_ok;
  auto r = call(s, std::move(f), v1::Frame::kWebhook, "create a webhook for topic '" + w->topic() + "'", status);
  if (!r) return status;
  print_webhook(s, r->webhook());
  return exit_ok;
}

int webhook_list(session& s, const po::variables_map&) {
  v1::Frame f;
  f.mutable_webhook_list();
  int status = exit_ok;
  auto r = call(s, std::move(f), v1::Frame::kWebhookListResponse, "list webhooks", status);
  if (!r) return status;
  table t({"ID", "TOPIC", "URL", "STATE", "BACKLOG", "EXHAUSTED", "IN_FLIGHT", "TIMEOUT", "SCHEDULE"});
  for (auto& w : r->webhook_list_response().webhooks()) {
    if (s.json()) {
      s.env().out << json::serialize(webhook_json(w)) << '\n';
    } else {
      t.add({w.id(), w.topic(), w.url(), w.disabled() ? "disabled" : "active", std::to_string(w.backlog()),
             std::to_string(w.exhausted()), std::to_string(w.in_flight()), duration_text(w.timeout_ms()),
             schedule_text(w)});
    }
  }
  if (!s.json()) t.print(s.env().out);
  return exit_ok;
}

int webhook_delete(session& s, const po::variables_map& vm) {
  v1::Frame f;
  const auto id = arg(vm, "ID");
  f.mutable_webhook_delete()->set_id(id);
  int status = exit_ok;
  auto r = call(s, std::move(f), v1::Frame::kWebhookDeleteResponse, "delete webhook '" + id + "'", status);
  if (!r) return status;
  if (s.json()) {
    s.env().out << json::serialize(json::object{{"id", id}, {"deleted", true}}) << '\n';
  } else {
    s.env().out << "deleted " << id << '\n';
  }
  return exit_ok;
}

void webhook_attempts_options(po::options_description& o) {
  o.add_options()("message", po::value<std::string>()->value_name("MSGID"), "only this message's attempts")(
      "limit", po::value<std::uint32_t>()->value_name("N"), "at most N attempts (default 1000)");
}

int webhook_attempts(session& s, const po::variables_map& vm) {
  const auto id = arg(vm, "ID");
  std::string message_id;
  if (vm.count("message")) {
    auto m = protocol::uuid::parse(vm["message"].as<std::string>());
    if (!m) throw po::error("--message: not a message id in canonical UUID text");
    message_id = std::string(m.value().raw());
  }
  // The broker answers at most 1,000 a page (fewer for long error texts); --limit may ask for
  // more: the pages are followed (next_after) until it is reached or none follow. In a cluster
  // every node's log is read and merged by time (client/cluster_admin.h).
  const std::size_t wanted = vm.count("limit") && vm["limit"].as<std::uint32_t>() > 0 ? vm["limit"].as<std::uint32_t>() : 1000;
  auto conn = s.connect();
  if (!conn) return exit_failure;
  auto log = client::webhook_attempts_all(conn, id, message_id, wanted);
  if (!log) return s.fail("read the attempts of webhook '" + id + "'", log.error());
  for (const auto& why : log.value().unanswered) {
    s.env().err << "txmq: warning: node " << why << "; its attempts are left out\n";
  }
  auto& all = log.value().attempts;
  table t({"TIME", "MESSAGE", "ATTEMPT", "STATUS", "LATENCY", "OUTCOME", "ERROR"});
  for (auto& a : all) {
    if (s.json()) {
      json::object o{{"webhook", a.webhook_id()},   {"message", id_text(a.message_id())},
                     {"topic", a.topic()},          {"partition", a.partition()},
                     {"offset", a.offset()},        {"attempt", a.attempt()},
                     {"time", iso_time(a.time_ms())}, {"time_ms", a.time_ms()},
                     {"status", a.status()},        {"latency_ms", a.latency_ms()},
                     {"outcome", outcome_text(a.outcome())}, {"error", a.error()},
                     {"replay", a.replay()}};
      s.env().out << json::serialize(o) << '\n';
    } else {
      t.add({iso_time(a.time_ms()), id_text(a.message_id()), std::to_string(a.attempt()) + (a.replay() ? " (replay)" : ""),
             a.status() ? std::to_string(a.status()) : "-", std::to_string(a.latency_ms()) + "ms",
             outcome_text(a.outcome()), a.error().empty() ? "-" : escape_control(a.error())});
    }
  }
  if (!s.json()) t.print(s.env().out);
  return exit_ok;
}

void webhook_replay_options(po::options_description& o) {
  o.add_options()("since", po::value<std::string>()->value_name("TIME"),
                  "resend messages published since TIME: UTC like 2026-11-26T01:00:00Z, or a duration ago like 10m "
                  "(required)");
}

int webhook_replay(session& s, const po::variables_map& vm) {
  v1::Frame f;
  auto* req = f.mutable_webhook_replay();
  const auto id = arg(vm, "ID");
  req->set_id(id);
  req->set_since_ms(since_ms(arg(vm, "since")));
  int status = exit_ok;
  auto r = call(s, std::move(f), v1::Frame::kWebhookReplayResponse, "replay webhook '" + id + "'", status);
  if (!r) return status;
  const auto queued = r->webhook_replay_response().queued();
  if (s.json()) {
    s.env().out << json::serialize(json::object{{"id", id}, {"queued", queued}}) << '\n';
  } else {
    s.env().out << "queued " << queued << " messages for " << id << '\n';
  }
  return exit_ok;
}

void webhook_rotate_options(po::options_description& o) {
  o.add_options()("secret", po::value<std::string>()->value_name("S"), "the new secret (default: generated)")(
      "grace", po::value<std::string>()->value_name("D"),
      "how long the old secret keeps signing (default: the broker's webhook_secret_grace)");
}

int webhook_rotate(session& s, const po::variables_map& vm) {
  v1::Frame f;
  auto* req = f.mutable_webhook_rotate_secret();
  const auto id = arg(vm, "ID");
  req->set_id(id);
  if (vm.count("secret")) req->set_secret(vm["secret"].as<std::string>());
  if (vm.count("grace")) {
    const auto ms = duration_ms(vm["grace"].as<std::string>(), "--grace");
    if (ms <= 0 || ms > std::int64_t{UINT32_MAX}) throw po::error("--grace must be between 1ms and 49d");
    req->set_grace_ms(static_cast<std::uint32_t>(ms));
  }
  int status = exit_ok;
  auto r = call(s, std::move(f), v1::Frame::kWebhook, "rotate the secret of webhook '" + id + "'", status);
  if (!r) return status;
  print_webhook(s, r->webhook());
  return exit_ok;
}

}  // namespace txmq::cli::detail
