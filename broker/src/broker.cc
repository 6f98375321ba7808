#include "txmq/broker/broker.h"

#include <pthread.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <string_view>
#include <thread>

#include <boost/asio.hpp>

#include "broker_metrics.h"
#include "cluster_mode/cluster_node.h"
#include "cluster_mode/replication.h"
#include "auth/access_control.h"
#include "auth/http_access.h"
#include "console/console_routes.h"
#include "http/http_api.h"
#include "fd_limit.h"
#include "io_thread.h"
#include "net/connection.h"
#include "service/service.h"
#include "store_health.h"
#include "txmq/common/admin_http.h"
#include "txmq/common/log.h"
#include "txmq/common/log_limiter.h"
#include "txmq/common/tls.h"
#include "txmq/storage/store.h"
#include "webhooks/egress_guard.h"

namespace txmq::broker {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// How long a SIGTERM in cluster mode waits for the in-sync followers to catch up and for the
// leadership hand-over writes in etcd (docs/cluster.md "Draining a broker").
constexpr std::chrono::seconds k_drain_wait{5};

// The data directory holds tokens' hashes, webhook secrets and every message: created 0700; an
// existing one that others may read is used, with a warning (the operator may have reasons).
result<void> prepare_data_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (!ec) fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
    if (ec) return error(ec, "cannot create the data directory " + dir + ": " + ec.message());
    return outcome::success();
  }
  const auto perms = fs::status(dir, ec).permissions();
  if (!ec && (perms & (fs::perms::group_all | fs::perms::others_all)) != fs::perms::none) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(perms) & 0777u);
    common::log::warn("the data directory ", dir, " is open to other users (mode ", mode,
                      "); it holds messages and secrets: chmod 700 ", dir);
  }
  return outcome::success();
}

}  // namespace

struct broker::impl {
  explicit impl(const broker_config& c) : config(c), acceptor(io) {}

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) {
        // Out of file descriptors and the like: say so, back off a little, keep serving.
        common::log::warn("accept failed: ", ec.message());
        asio::steady_timer pause(io, std::chrono::milliseconds(50));
        co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
        continue;
      }
      admit(std::move(socket));
      // Then what else waits in the listen queue, up to a batch, without going round the io
      // queue for each: one accept per turn of the loop let a connect() flood's backlog (and a
      // well-behaved client's new connection behind it) wait hundreds of turns while thousands
      // of other handlers were queued.
      for (std::size_t i = 1; i < k_accept_batch && acceptor.is_open(); ++i) {
        boost::system::error_code more_ec;
        tcp::socket more(io);
        acceptor.accept(more, more_ec);  // non-blocking: would_block once the queue is empty
        if (more_ec) break;             // would_block, or an error the next async_accept reports
        admit(std::move(more));
      }
    }
  }

  void admit(tcp::socket socket) {
    // Counted from accept, so sockets that never finish Hello take slots too (they hold file
    // descriptors); hello_timeout frees the slots of those that never speak.
    if (open_connections >= config.max_connections) {
      refuse(std::move(socket));
      return;
    }
    ++open_connections;
    // Each connection keeps the context it was accepted with; a reload serves the next ones.
    auto stream = tls ? common::wire_stream(std::move(socket), tls->current()) : common::wire_stream(std::move(socket));
    auto c = std::make_shared<connection>(std::move(stream), *svc, limits, ++next_connection_id,
                                          [this] { --open_connections; });
    c->start();
  }

  void refuse(tcp::socket socket) {
    // A flood of refusals (thousands a second) logs one line a second, which counts the rest;
    // the health timer logs the count left when the flood stops.
    if (auto line = refusal_lines.admit()) {
      boost::system::error_code ec;
      const auto ep = socket.remote_endpoint(ec);
      common::log::warn("refusing connection from ", ec ? std::string("?") : ep.address().to_string(),
                        ": max_connections (", config.max_connections, ") reached", line.suppressed_note());
    }
    // Refusals linger a second each; a flood beyond this many is closed without an answer.
    if (refusing >= k_max_refusing) return;
    ++refusing;
    v1::Frame f;
    f.mutable_error()->set_code(v1::LIMIT_EXCEEDED);
    f.mutable_error()->set_message("the broker has max_connections (" + std::to_string(config.max_connections) +
                                   ") connections; try again later");
    asio::co_spawn(io, refuse_connection(std::move(socket), std::move(f)), [this](std::exception_ptr e) {
      --refusing;
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        common::log::error("refusing a connection failed: ", ex.what());
      }
    });
  }

  void schedule_retention() {
    retention_timer.expires_after(config.retention_interval);
    retention_timer.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      store->enforce_retention([](result<storage::retention_result> r) {
        if (!r) common::log::error("retention pass failed: ", r.error().message);
        else if (r.value().messages_removed) common::log::info("retention removed ", r.value().messages_removed, " messages");
      });
      schedule_retention();
    });
  }

  // insecure = true on a non-loopback address: said at start and every hour after.
  void schedule_insecure_warning() {
    insecure_timer.expires_after(std::chrono::hours(1));
    insecure_timer.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      warn_insecure();
      schedule_insecure_warning();
    });
  }
  void warn_insecure() const {
    common::log::warn("insecure = true: serving ", config.listen.to_string(), " and ", config.http.to_string(),
                      " beyond loopback with auth ", config.auth ? "on" : "off", " and TLS ",
                      tls ? "on" : "off", "; anyone who can reach these ports can ",
                      config.auth ? "read tokens off the wire" : "do everything");
  }

  // Logs a change of the store's health (checked every second): the reason, once.
  void schedule_health_log() {
    health_timer.expires_after(std::chrono::seconds(1));
    health_timer.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      const auto h = store->health();
      if (auto line = store_health_change(logged_health, h)) {
        if (h.status == storage::store_health::state::ok) common::log::info(*line);
        else common::log::error(*line);
      }
      logged_health = h.status;
      if (const auto left = refusal_lines.flush()) {
        common::log::warn(left, " more connections refused (max_connections ", config.max_connections,
                          " reached) after the last line about it");
      }
      schedule_health_log();
    });
  }

  broker_config config;
  asio::io_context io;
  common::metrics_registry registry;
  std::unique_ptr<broker_metrics> metrics;
  std::unique_ptr<common::admin_http_server> http;
  tcp::acceptor acceptor;
  asio::steady_timer retention_timer{io};
  asio::steady_timer health_timer{io};
  asio::steady_timer insecure_timer{io};
  // Set when tls_cert_file is: the wire port and the admin HTTP serve TLS only.
  std::shared_ptr<common::server_tls> tls;
  storage::store_health::state logged_health = storage::store_health::state::ok;
  std::unique_ptr<storage::store> store;
  std::unique_ptr<service> svc;
  // Cluster mode (cluster_etcd set): this node's session and control-plane part; else nullptr.
  std::unique_ptr<cluster_mode::cluster_node> cluster;
  std::unique_ptr<http_api::gateway> api;  // the /v1 routes of the admin HTTP server
  // Shared by every connection (limits.memory); declared after io, whose executor it uses.
  std::unique_ptr<request_memory> memory;
  // Deadline closes in slices (net/io_pacer.h): at most this many per turn of the io loop, so
  // that silent sockets timing out together do not hold up the connections being served.
  static constexpr std::size_t k_flood_work_per_turn = 32;
  // Sockets accepted per wake-up of the accept loop (the rest in the next one).
  static constexpr std::size_t k_accept_batch = 64;
  std::unique_ptr<io_pacer> pacer;
  connection_limits limits;
  std::uint64_t next_connection_id = 0;
  // Sockets accepted and not yet closed, Hello or not; checked against max_connections.
  std::size_t open_connections = 0;
  static constexpr std::size_t k_max_refusing = 64;
  std::size_t refusing = 0;  // sockets being refused (answer written, lingering)
  common::log::log_limiter refusal_lines{1, std::chrono::seconds(1)};
  std::thread io_thread;
  tcp::endpoint bound;
  tcp::endpoint http_bound;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool stopped = false;
};

broker::broker(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

broker::~broker() { stop(); }

result<std::unique_ptr<broker>> broker::start(const broker_config& config) {
  auto p = std::make_unique<impl>(config);
  auto& m = *p;
  // Before the store opens its files: one descriptor per connection, plus the store's.
  const auto fds = raise_fd_limit(config.max_connections);
  m.config.max_connections = fds.max_connections;
  if (fds.warning) common::log::warn(*fds.warning);
  else if (fds.soft_after != fds.soft_before) {
    common::log::info("open file limit raised from ", fds.soft_before, " to ", fds.soft_after, " for max_connections ",
                      fds.max_connections);
  }

  // With auth on the admin token must be usable before anything else starts.
  std::string admin_hash;
  if (config.auth) {
    auto token = auth::read_admin_token(config.admin_token_file);
    if (!token) return error(token.error().code, "cannot start with auth = true: " + token.error().message);
    admin_hash = auth::sha256(token.value());
  }
  // The brokers of a cluster authenticate to each other with the cluster token (docs/cluster.md
  // "Between brokers"); a follower sends it, the leader keeps only its hash.
  std::string cluster_token;
  if (config.auth && !config.cluster_etcd.empty()) {
    auto token = auth::read_token_file("cluster_token_file", config.cluster_token_file);
    if (!token) return error(token.error().code, "cannot start with auth = true in a cluster: " + token.error().message);
    cluster_token = std::move(token).value();
  }
  if (!config.tls_cert_file.empty()) {
    auto loaded = common::server_tls::load({config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file});
    if (!loaded) return error(loaded.error().code, "cannot serve TLS: " + loaded.error().message);
    m.tls = std::move(loaded).value();
  }
  if (auto r = prepare_data_dir(config.data_dir); !r) return r.error();

  storage::store_options so;
  so.dir = config.data_dir;
  so.dedupe_window = config.dedupe_window;
  so.min_free_bytes = config.min_free_disk_bytes;
  so.verify_checksums_on_open = config.verify_store_on_start;
  so.low_priority_background = config.low_priority_background;
  so.min_fsync_interval = config.min_fsync_interval;
  // The answers of one fsync's requests reach the io thread in one post.
  so.around_completions = gather_completions;
  // Where a produce's latency went (txmq_produce_latency_seconds is the whole): the store's
  // queue, its part up to durable, and each fsync (issue #15, the tail at a steady rate).
  {
    auto* fsync = &m.registry.add_histogram("txmq_store_fsync_seconds", "Duration of each WAL fsync");
    auto* queue = &m.registry.add_histogram("txmq_store_queue_seconds",
                                            "Write request submitted to taken into a commit group by the writer");
    auto* commit = &m.registry.add_histogram(
        "txmq_store_commit_seconds",
        "Write request submitted to durable (queue, apply, write, waiting for and doing the fsync)");
    so.observe_fsync = [fsync](std::chrono::nanoseconds d) { fsync->observe(d); };
    so.observe_queue = [queue](std::chrono::nanoseconds d) { queue->observe(d); };
    so.observe_commit = [commit](std::chrono::nanoseconds d) { commit->observe(d); };
  }
  // Auto-created topics (the first produce or prepare naming them) get the broker's retention,
  // as topics created without their own do.
  so.auto_create_retention_ms = config.retention.count();
  so.auto_create_retention_bytes = config.retention_bytes;
  // Cluster mode: consumer-group changes travel with their partition (docs/cluster.md).
  so.log_group_changes = !config.cluster_etcd.empty();
  auto opened = storage::open_store(so);
  if (!opened) return opened.error();
  m.store = std::move(opened.value());

  service_settings ss;
  ss.delivery.ack_deadline = config.ack_deadline;
  ss.delivery.retry_schedule = config.retry_schedule;
  ss.delivery.max_attempts = config.max_attempts;
  ss.max_message_bytes = static_cast<std::uint32_t>(config.max_message_bytes);
  ss.max_frame_bytes = static_cast<std::uint32_t>(config.max_frame_bytes);
  ss.auto_create_topics = config.auto_create_topics;
  ss.default_partitions = config.default_partitions;
  ss.default_retention_ms = config.retention.count();
  ss.default_retention_bytes = config.retention_bytes;
  ss.sync = config.durability == durability_mode::sync;
  ss.max_topics = config.max_topics;
  ss.tx.tx_timeout = config.tx_timeout;
  ss.tx.check_schedule = config.tx_check_schedule;
  ss.tx.max_checks = config.tx_max_checks;
  ss.tx.checks_in_flight = config.tx_checks_in_flight;
  ss.tx.answer_timeout = config.tx_check_answer_timeout;
  ss.webhooks.schedule = config.webhook_schedule;
  ss.webhooks.timeout = config.webhook_timeout;
  ss.webhooks.concurrency = config.webhook_concurrency;
  ss.webhooks.rate_per_second = config.webhook_rate_limit;
  ss.webhooks.attempt_retention = config.webhook_attempt_retention;
  ss.webhooks.secret_grace = config.webhook_secret_grace;
  ss.webhooks.ca_file = config.webhook_ca_file;
  ss.webhooks.max_webhooks = config.webhook_max_subscriptions;
  ss.webhooks.guard.allow_private = config.webhook_allow_private;
  // validate() parsed the list already, so this cannot fail.
  if (auto hosts = parse_allow_hosts(config.webhook_allow_hosts)) ss.webhooks.guard.allowed = std::move(hosts).value();
  ss.auth = config.auth;
  ss.admin_token_sha256 = std::move(admin_hash);
  if (!cluster_token.empty()) ss.cluster_token_sha256 = auth::sha256(cluster_token);
  m.limits.max_frame_bytes = static_cast<std::uint32_t>(config.max_frame_bytes);
  m.limits.max_in_flight = config.max_in_flight_per_connection;
  m.limits.hello_timeout = config.hello_timeout;
  m.limits.frame_read_timeout = config.frame_read_timeout;
  m.limits.idle_timeout = config.idle_timeout;
  m.memory = std::make_unique<request_memory>(m.io.get_executor(), config.max_request_memory);
  m.limits.memory = m.memory.get();
  m.pacer = std::make_unique<io_pacer>(m.io.get_executor(), impl::k_flood_work_per_turn);
  m.limits.pacer = m.pacer.get();
  m.metrics = std::make_unique<broker_metrics>(m.registry);
  m.svc = std::make_unique<service>(m.io, *m.store, ss, m.metrics.get());
  {
    auto* store = m.store.get();
    auto stat = [store](std::uint64_t storage::store_stats::*field) {
      return [store, field] { return static_cast<double>(store->stats().*field); };
    };
    m.registry.add_counter_callback("txmq_store_fsyncs_total", "WAL fsyncs (each covers one or more commit groups)",
                                    {}, stat(&storage::store_stats::fsyncs));
    m.registry.add_counter_callback("txmq_store_commit_groups_total", "Write batches written by the group committer",
                                    {}, stat(&storage::store_stats::commit_groups));
    m.registry.add_counter_callback("txmq_store_operations_total", "Write requests applied by the group committer",
                                    {}, stat(&storage::store_stats::operations));
    m.registry.add_counter_callback("txmq_store_messages_appended_total", "Messages appended to partition logs", {},
                                    stat(&storage::store_stats::messages_appended));
    m.registry.add_gauge_callback("txmq_store_largest_group", "Most requests merged into one write batch", {},
                                  stat(&storage::store_stats::largest_group));
    m.registry.add_gauge_callback(
        "txmq_store_background_lowered",
        "1 while the store's flushes and compactions run at low CPU priority (low_priority_background)", {},
        [store] { return store->stats().background_lowered ? 1.0 : 0.0; });
    m.registry.add_counter_callback("txmq_store_background_raised_total",
                                    "Times a write stall raised the store's flushes and compactions back to the "
                                    "process's CPU priority",
                                    {}, stat(&storage::store_stats::background_raised));
    auto* memory = m.memory.get();
    m.registry.add_gauge_callback("txmq_request_memory_bytes",
                                  "Bytes of the requests being handled (max_request_memory)", {},
                                  [memory] { return static_cast<double>(memory->used()); });
    m.registry.add_counter_callback("txmq_request_memory_pauses_total",
                                    "Times a connection stopped reading because max_request_memory was reached", {},
                                    [memory] { return static_cast<double>(memory->pauses()); });
    auto* accepted = &m.open_connections;  // read on the io thread, which also serves /metrics
    m.registry.add_gauge_callback("txmq_connections_open",
                                  "Client sockets accepted and not yet closed, Hello or not (max_connections)", {},
                                  [accepted] { return static_cast<double>(*accepted); });
    auto* svc = m.svc.get();
    m.registry.add_gauge_callback("txmq_connections", "Open client connections", {},
                                  [svc] { return static_cast<double>(svc->connections()); });
  }
  if (auto r = m.svc->start(); !r) {
    return error(r.error().code, "cannot load the consumer groups from " + config.data_dir + ": " + r.error().message);
  }

  auto ep = common::to_endpoint(config.listen);
  if (!ep) {
    return error(ep.error().code, "cannot listen on " + config.listen.to_string() + ": not an IP address");
  }
  boost::system::error_code ec;
  m.acceptor.open(ep.value().protocol(), ec);
  if (!ec) m.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(ep.value(), ec);
  if (!ec) m.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) m.acceptor.non_blocking(true, ec);  // for the batch accepts after each async_accept
  if (ec) {
    return error(std::error_code(ec.value(), std::system_category()),
                 "cannot listen on " + config.listen.to_string() + ": " + ec.message() +
                     (ec == asio::error::address_in_use ? " (another broker running? choose another port with --listen)"
                                                        : ""));
  }
  m.bound = m.acceptor.local_endpoint();
  const std::string advertise = !config.advertise.empty()
                                    ? config.advertise
                                    : common::host_port{config.listen.host, m.bound.port()}.to_string();
  m.svc->set_advertise(advertise);
  if (!config.cluster_etcd.empty()) {
    auto endpoints = cluster::parse_etcd_endpoints(config.cluster_etcd);  // validate() checked it
    if (!endpoints) return endpoints.error();
    cluster_mode::node_settings ns;
    ns.etcd = std::move(endpoints).value();
    ns.member.cluster_name = config.cluster_name;
    ns.member.id = config.node_id;
    ns.member.advertise = advertise;
    ns.member.node_lease_ttl = std::chrono::duration_cast<std::chrono::seconds>(config.node_lease_ttl);
    m.cluster = std::make_unique<cluster_mode::cluster_node>(std::move(ns));
    m.cluster->enable_metrics(m.registry);
    m.svc->set_cluster(m.cluster.get());
    cluster_mode::replication_settings rs;
    rs.replication_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(config.replication_timeout);
    rs.replica_lag_max = std::chrono::duration_cast<std::chrono::milliseconds>(config.replica_lag_max);
    rs.fetch_pipeline = config.replica_fetch_pipeline;
    // A followed topic's retention when its etcd record sets none (as the store's auto-creation).
    rs.default_retention_ms = std::chrono::duration_cast<std::chrono::milliseconds>(config.retention).count();
    rs.default_retention_bytes = config.retention_bytes;
    rs.peer.token = cluster_token;
    rs.peer.client_id = "txmq-replica-" + std::to_string(config.node_id);
    if (m.tls) {
      // The peers serve TLS as this broker does: verified against the cluster's CAs; with mTLS
      // they require a client certificate, and this broker presents its own.
      const std::string& ca = !config.cluster_tls_ca_file.empty() ? config.cluster_tls_ca_file : config.tls_client_ca_file;
      auto ctx = cluster_mode::make_peer_tls_context(ca, config.tls_cert_file, config.tls_key_file,
                                                     !config.tls_client_ca_file.empty());
      if (!ctx) return ctx.error();
      rs.peer.tls = std::move(ctx).value();
    }
    // A quarter of the frame for its other fields and the estimate's slack.
    rs.max_answer_bytes = static_cast<std::size_t>(config.max_frame_bytes / 4 * 3);
#ifdef TXMQ_FAULT_HOOKS
    // The deliberately broken build of the history checker's own test (replication.h).
    if (const char* v = std::getenv("TXMQ_TEST_ACK_BEFORE_REPLICAS"); v && std::string_view(v) == "1") {
      rs.ack_before_replicas = true;
      common::log::warn("TXMQ_TEST_ACK_BEFORE_REPLICAS=1: acknowledging before the followers fsync (a test fault)");
    }
    // A machine crash that took the last N written, not yet fsynced, messages (replication.h).
    if (const char* v = std::getenv("TXMQ_TEST_LOSE_TAIL"); v && std::atoi(v) > 0) {
      cluster_mode::lose_tail_for_test(*m.store, static_cast<std::uint64_t>(std::atoi(v)));
    }
#endif
    m.svc->set_replication(rs);
  }

  auto http_ep = common::to_endpoint(config.http);
  if (!http_ep) {
    return error(http_ep.error().code, "cannot serve HTTP on " + config.http.to_string() + ": not an IP address");
  }
  common::admin_http_options hopts;
  hopts.log_error = [](std::string_view text) { common::log::warn("admin http: ", text); };
  // HTTP/JSON API requests carry what a frame would: bounded the same way.
  hopts.max_body_bytes = config.max_frame_bytes;
  if (m.tls) hopts.tls = [tls = m.tls] { return tls->current(); };
  m.http = std::make_unique<common::admin_http_server>(m.io, m.registry, hopts);
  // Before the listener opens: no request is ever served unchecked.
  if (config.auth) m.http->set_access_hook(auth::make_http_access_hook(m.svc->access()));
  auto http_bound = m.http->start(http_ep.value());
  if (!http_bound) return http_bound.error();
  m.http_bound = http_bound.value();
  m.svc->webhooks().register_routes(*m.http);
  m.api = std::make_unique<http_api::gateway>(*m.svc, static_cast<std::uint32_t>(config.max_frame_bytes));
  m.api->register_routes(*m.http);
  console::register_routes(*m.http);
  watch_store_health(*m.store, m.registry, *m.http);

  asio::co_spawn(m.io, m.accept_loop(), [](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      common::log::error("accept loop failed: ", ex.what());
    }
  });
  m.schedule_retention();
  m.schedule_health_log();
  if (config.insecure && (!common::is_loopback_host(config.listen.host) || !common::is_loopback_host(config.http.host))) {
    m.warn_insecure();
    m.schedule_insecure_warning();
  }
  if (m.cluster) m.cluster->start();
  m.io_thread = std::thread([&m] {
    pthread_setname_np(pthread_self(), "txmq-io");  // for top, perf and gdb
    auto guard = asio::make_work_guard(m.io);
    run_guarded(m.io, m.metrics->internal_errors);
  });

  common::log::info("txmq broker listening on ", m.bound.address().to_string(), ":", m.bound.port(), " (admin HTTP on ",
            m.http_bound.address().to_string(), ":", m.http_bound.port(), "), data in ", config.data_dir,
            ", durability ", to_string(config.durability), config.auth ? ", auth on" : ", auth off",
            m.tls ? (m.tls->requires_client_certificate() ? ", TLS with client certificates" : ", TLS") : "",
            m.cluster ? ", cluster node " + std::to_string(config.node_id) + " of '" + config.cluster_name + "' (etcd " +
                            config.cluster_etcd + ", advertised as " + advertise + ")"
                      : std::string());
  if (config.durability == durability_mode::async) {
    common::log::warn("durability = async: produce is acknowledged before fsync; a power loss can lose acknowledged "
              "messages");
  }
  return std::unique_ptr<broker>(new broker(std::move(p)));
}

result<void> broker::reload_tls() {
  if (!impl_->tls) return outcome::success();
  auto r = impl_->tls->reload();
  if (!r) {
    common::log::error("TLS reload failed, still serving the previous certificate: ", r.error().message);
    return r;
  }
  common::log::info("TLS certificate reloaded from ", impl_->config.tls_cert_file, "; new connections use it");
  return outcome::success();
}

tcp::endpoint broker::endpoint() const { return impl_->bound; }
tcp::endpoint broker::http_endpoint() const { return impl_->http_bound; }

void broker::stop() {
  auto& m = *impl_;
  {
    std::lock_guard lk(m.mu);
    if (m.stopping) return;
    m.stopping = true;
  }
  // Step 0, cluster mode: hand the replicated partitions led here over to in-sync replicas while
  // still serving (docs/cluster.md "Draining a broker"): producers get NOT_LEADER and move
  // before this node leaves, instead of after the controller notices it gone.
  if (m.cluster) {
    auto drained = std::make_shared<std::promise<void>>();
    auto finished = drained->get_future();
    asio::post(m.io, [&m, drained] { m.svc->drain(k_drain_wait, [drained] { drained->set_value(); }); });
    // drain() ends itself at k_drain_wait; the margin covers an io thread busy with a request.
    if (finished.wait_for(k_drain_wait + std::chrono::seconds(2)) != std::future_status::ready) {
      common::log::warn("draining did not finish within ", (k_drain_wait + std::chrono::seconds(2)).count(),
                        " s; leaving the cluster anyway");
    }
  }
  // Step 1: stop accepting and answer parked long polls, on the io thread.
  std::promise<void> accepted_stopped;
  asio::post(m.io, [&m, &accepted_stopped] {
    boost::system::error_code ec;
    m.acceptor.close(ec);
    if (m.http) m.http->stop();
    m.retention_timer.cancel();
    m.health_timer.cancel();
    m.insecure_timer.cancel();
    m.svc->stop();
    accepted_stopped.set_value();
  });
  accepted_stopped.get_future().wait();
  // Leave the cluster now (lease revoked), so that leaderships move without waiting for the TTL.
  if (m.cluster) m.cluster->stop();
  // Step 2: the store finishes the writes it has queued (their answers are posted to the io
  // thread and sent), then the connections close.
  m.store->close();
  std::promise<void> closed;
  asio::post(m.io, [&m, &closed] {
    m.svc->close_all();
    closed.set_value();
  });
  closed.get_future().wait();
  // Give the writers up to two seconds to flush the last answers to their peers.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    std::promise<std::size_t> open;
    asio::post(m.io, [&m, &open] { open.set_value(m.svc->connections()); });
    if (open.get_future().get() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a count, not ordering events
  }
  m.io.stop();
  if (m.io_thread.joinable()) m.io_thread.join();
  common::log::info("txmq broker stopped");
  {
    std::lock_guard lk(m.mu);
    m.stopped = true;
  }
  m.cv.notify_all();
}

void broker::wait() {
  std::unique_lock lk(impl_->mu);
  impl_->cv.wait(lk, [&] { return impl_->stopped; });
}

}  // namespace txmq::broker
