#pragma once

// The broker's metric families (GET /metrics). Counters are bumped on the io thread; callback
// gauges are read at scrape time, also on the io thread (the admin server runs there).

#include "txmq/common/metrics.h"

namespace txmq::broker {

// Prepare to resolution of a transaction, in seconds: check-backs stretch it to minutes.
inline constexpr std::array<double, 16> k_tx_resolution_buckets_seconds = {
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0};

// How late the io thread's probe timer fires: a handler that runs long (a store scan on a
// leadership change) shows here.
inline constexpr std::array<double, 12> k_stall_buckets_seconds = {
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0};

struct broker_metrics {
  explicit broker_metrics(common::metrics_registry& r)
      : registry(r),
        messages_in(r.add_counter("txmq_messages_in_total", "Messages stored by produce requests")),
        bytes_in(r.add_counter("txmq_bytes_in_total", "Body bytes stored by produce requests")),
        duplicates(r.add_counter("txmq_duplicates_total", "Produced messages whose id was already stored")),
        produce_errors(r.add_counter("txmq_produce_errors_total", "Produce requests answered with an error")),
        messages_out(r.add_counter("txmq_messages_out_total", "Deliveries handed to consumers")),
        bytes_out(r.add_counter("txmq_bytes_out_total", "Body bytes handed to consumers")),
        redeliveries(r.add_counter("txmq_redeliveries_total", "Deliveries with attempt > 1")),
        acks(r.add_counter("txmq_acks_total", "Deliveries acknowledged")),
        nacks(r.add_counter("txmq_nacks_total", "Deliveries negatively acknowledged")),
        dead_letters(r.add_counter("txmq_dead_letters_total", "Messages moved to a dead-letter queue")),
        produce_latency(r.add_histogram("txmq_produce_latency_seconds",
                                        "Produce request received to answered (includes the fsync)")),
        end_to_end_latency(r.add_histogram("txmq_end_to_end_latency_seconds",
                                           "Message publish time to its first delivery")),
        tx_prepared(r.add_gauge("txmq_tx_prepared", "Transactions prepared and not yet resolved or abandoned")),
        tx_abandoned_now(r.add_gauge("txmq_tx_abandoned_pending", "Abandoned transactions waiting for an operator")),
        tx_prepares(r.add_counter("txmq_tx_prepares_total", "Transactions prepared (retried Prepares not counted)")),
        tx_abandoned(r.add_counter("txmq_tx_abandoned_total",
                                   "Transactions abandoned after tx_max_checks undecided check-backs")),
        tx_resolution_latency(r.add_histogram("txmq_tx_resolution_seconds",
                                              "Prepare to commit or rollback of a transaction",
                                              k_tx_resolution_buckets_seconds)),
        io_loop_stall(r.add_histogram("txmq_io_loop_stall_seconds",
                                      "How late the io thread's 10 ms probe timer fired (the longest a handler kept "
                                      "the loop busy, within 10 ms)",
                                      k_stall_buckets_seconds)),
        io_loop_stall_max(r.add_gauge("txmq_io_loop_stall_max_seconds",
                                      "The longest io-loop stall seen since the broker started")),
        internal_errors(r.add_counter("txmq_internal_errors_total",
                                      "Exceptions that escaped a handler or timer on the io thread (logged; the "
                                      "broker kept serving)")) {}

  common::metrics_registry& registry;
  common::counter& messages_in;
  common::counter& bytes_in;
  common::counter& duplicates;
  common::counter& produce_errors;
  common::counter& messages_out;
  common::counter& bytes_out;
  common::counter& redeliveries;
  common::counter& acks;
  common::counter& nacks;
  common::counter& dead_letters;
  common::histogram& produce_latency;
  common::histogram& end_to_end_latency;
  // Transactions; the labelled families (txmq_tx_committed_total{by}, txmq_tx_rolled_back_total{by},
  // txmq_tx_checks_total{result}) are looked up by tx_coordinator when first used.
  common::gauge& tx_prepared;
  common::gauge& tx_abandoned_now;
  common::counter& tx_prepares;
  common::counter& tx_abandoned;
  common::histogram& tx_resolution_latency;
  // The service's probe timer (service.cc).
  common::histogram& io_loop_stall;
  common::gauge& io_loop_stall_max;
  // Bumped by run_guarded (io_thread.h).
  common::counter& internal_errors;
};

}  // namespace txmq::broker
