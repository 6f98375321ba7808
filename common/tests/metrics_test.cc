#include "txmq/common/metrics.h"

#include <array>
#include <cmath>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace txmq::common {
namespace {

using testing::HasSubstr;

TEST(metrics, counter_exposition) {
  metrics_registry registry;
  auto& produced = registry.add_counter("txmq_messages_produced_total", "Messages produced.");
  produced.inc();
  produced.inc(41);
  EXPECT_EQ(produced.value(), 42u);
  EXPECT_EQ(registry.render(),
            "# HELP txmq_messages_produced_total Messages produced.\n"
            "# TYPE txmq_messages_produced_total counter\n"
            "txmq_messages_produced_total 42\n");
}

TEST(metrics, gauge_with_labels_sorted_by_name_and_series) {
  metrics_registry registry;
  registry.add_gauge("txmq_group_in_flight", "Deliveries awaiting an ack.",
                     {{"topic", "orders"}, {"group", "g2"}})
      .set(3);
  auto& g1 = registry.add_gauge("txmq_group_in_flight", "ignored: first HELP wins",
                                {{"group", "g1"}, {"topic", "orders"}});
  g1.inc();
  g1.inc();
  g1.dec();
  g1.add(0.5);
  registry.add_gauge("txmq_connections", "Open client connections.").set(-2);
  EXPECT_EQ(registry.render(),
            "# HELP txmq_connections Open client connections.\n"
            "# TYPE txmq_connections gauge\n"
            "txmq_connections -2\n"
            "# HELP txmq_group_in_flight Deliveries awaiting an ack.\n"
            "# TYPE txmq_group_in_flight gauge\n"
            "txmq_group_in_flight{group=\"g1\",topic=\"orders\"} 1.5\n"
            "txmq_group_in_flight{group=\"g2\",topic=\"orders\"} 3\n");
}

TEST(metrics, same_name_and_labels_give_the_same_object) {
  metrics_registry registry;
  auto& a = registry.add_counter("txmq_x_total", "x", {{"a", "1"}, {"b", "2"}});
  auto& b = registry.add_counter("txmq_x_total", "x", {{"b", "2"}, {"a", "1"}});
  auto& c = registry.add_counter("txmq_x_total", "x", {{"a", "2"}, {"b", "2"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
}

TEST(metrics, histogram_buckets_sum_and_count) {
  metrics_registry registry;
  const std::array<double, 3> bounds = {0.001, 0.1, 1};
  auto& h = registry.add_histogram("txmq_produce_latency_seconds", "Produce latency.", bounds,
                                   {{"durability", "sync"}});
  h.observe(0.0005);
  h.observe(0.001);  // bounds are inclusive
  h.observe(0.05);
  h.observe(std::chrono::milliseconds(250));
  h.observe(7.0);
  EXPECT_EQ(registry.render(),
            "# HELP txmq_produce_latency_seconds Produce latency.\n"
            "# TYPE txmq_produce_latency_seconds histogram\n"
            "txmq_produce_latency_seconds_bucket{durability=\"sync\",le=\"0.001\"} 2\n"
            "txmq_produce_latency_seconds_bucket{durability=\"sync\",le=\"0.1\"} 3\n"
            "txmq_produce_latency_seconds_bucket{durability=\"sync\",le=\"1\"} 4\n"
            "txmq_produce_latency_seconds_bucket{durability=\"sync\",le=\"+Inf\"} 5\n"
            "txmq_produce_latency_seconds_sum{durability=\"sync\"} 7.3015\n"
            "txmq_produce_latency_seconds_count{durability=\"sync\"} 5\n");
}

TEST(metrics, histogram_default_buckets_cover_100us_to_10s) {
  metrics_registry registry;
  auto& h = registry.add_histogram("txmq_fsync_seconds", "fsync latency.");
  EXPECT_EQ(h.upper_bounds().front(), 0.0001);
  EXPECT_EQ(h.upper_bounds().back(), 10.0);
  const std::string text = registry.render();
  EXPECT_THAT(text, HasSubstr("txmq_fsync_seconds_bucket{le=\"0.0001\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("txmq_fsync_seconds_bucket{le=\"0.00025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("txmq_fsync_seconds_bucket{le=\"2.5\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("txmq_fsync_seconds_bucket{le=\"10\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("txmq_fsync_seconds_sum 0\ntxmq_fsync_seconds_count 0\n"));
}

TEST(metrics, escaping_of_label_values_and_help) {
  metrics_registry registry;
  registry.add_counter("txmq_escaped_total", "Help with \\ and\nnewline, \"quotes\" kept.",
                       {{"topic", "a\"b\\c\nd"}})
      .inc();
  EXPECT_EQ(registry.render(),
            "# HELP txmq_escaped_total Help with \\\\ and\\nnewline, \"quotes\" kept.\n"
            "# TYPE txmq_escaped_total counter\n"
            "txmq_escaped_total{topic=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(metrics, callbacks_are_read_at_scrape_time) {
  metrics_registry registry;
  double lag = 5;
  registry.add_gauge_callback("txmq_group_lag", "Messages not yet acked.", {{"group", "g1"}},
                              [&lag] { return lag; });
  registry.add_counter_callback("txmq_stored_bytes_total", "Bytes written.", {},
                                [] { return 1e20; });
  registry.add_gauge_callback("txmq_broken", "Throws.", {}, []() -> double {
    throw std::runtime_error("source unavailable");
  });
  EXPECT_THAT(registry.render(), HasSubstr("txmq_group_lag{group=\"g1\"} 5\n"));
  lag = 0.25;
  const std::string text = registry.render();
  EXPECT_THAT(text, HasSubstr("txmq_group_lag{group=\"g1\"} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("txmq_stored_bytes_total 1e+20\n"));
  // A failing callback drops its sample, not the scrape.
  EXPECT_THAT(text, HasSubstr("# TYPE txmq_broken gauge\n"));
  EXPECT_THAT(text, testing::Not(HasSubstr("\ntxmq_broken ")));

  registry.add_gauge_callback("txmq_group_lag", "", {{"group", "g1"}}, [] { return 7.0; });
  EXPECT_THAT(registry.render(), HasSubstr("txmq_group_lag{group=\"g1\"} 7\n"));
}

TEST(metrics, a_collector_computes_its_family_at_scrape_time) {
  metrics_registry registry;
  int scrapes = 0;
  std::vector<std::pair<std::string, double>> lags = {{"g2", 2}, {"g1", 1}};
  registry.add_gauge_collector("txmq_group_lag", "Messages not yet acked.", [&] {
    ++scrapes;
    metrics_registry::collected_series out;
    for (auto& [g, v] : lags) out.push_back({{{"group", g}}, v});
    out.push_back({{{"bad name", "x"}}, 9});  // skipped, not rendered
    return out;
  });
  EXPECT_EQ(registry.render(),
            "# HELP txmq_group_lag Messages not yet acked.\n"
            "# TYPE txmq_group_lag gauge\n"
            "txmq_group_lag{group=\"g1\"} 1\n"
            "txmq_group_lag{group=\"g2\"} 2\n");
  EXPECT_EQ(scrapes, 1) << "one call computes every series";
  lags.push_back({"g3", 3});
  EXPECT_THAT(registry.render(), HasSubstr("txmq_group_lag{group=\"g3\"} 3\n"));

  // A collector's family takes no series, and a family with series takes no collector.
  EXPECT_THROW(registry.add_gauge_callback("txmq_group_lag", "", {{"group", "g9"}}, [] { return 0.0; }),
               std::invalid_argument);
  EXPECT_THROW(registry.add_gauge("txmq_group_lag", "", {{"group", "g9"}}), std::invalid_argument);
  registry.add_gauge("txmq_other", "", {{"k", "v"}});
  EXPECT_THROW(registry.add_gauge_collector("txmq_other", "", [] { return metrics_registry::collected_series{}; }),
               std::invalid_argument);

  // A collector that throws drops its family from that scrape only.
  registry.add_gauge_collector("txmq_group_lag", "", []() -> metrics_registry::collected_series {
    throw std::runtime_error("source unavailable");
  });
  EXPECT_THAT(registry.render(), testing::Not(HasSubstr("txmq_group_lag")));
  EXPECT_TRUE(registry.remove_collector("txmq_group_lag"));
  EXPECT_FALSE(registry.remove_collector("txmq_group_lag"));
  EXPECT_FALSE(registry.remove_collector("txmq_other"));
}

TEST(metrics, special_values) {
  metrics_registry registry;
  registry.add_gauge("txmq_a", "a", {{"k", "nan"}}).set(std::nan(""));
  registry.add_gauge("txmq_a", "a", {{"k", "pinf"}}).set(HUGE_VAL);
  registry.add_gauge("txmq_a", "a", {{"k", "ninf"}}).set(-HUGE_VAL);
  registry.add_gauge("txmq_a", "a", {{"k", "tiny"}}).set(0.00001);
  const std::string text = registry.render();
  EXPECT_THAT(text, HasSubstr("txmq_a{k=\"nan\"} NaN\n"));
  EXPECT_THAT(text, HasSubstr("txmq_a{k=\"pinf\"} +Inf\n"));
  EXPECT_THAT(text, HasSubstr("txmq_a{k=\"ninf\"} -Inf\n"));
  EXPECT_THAT(text, HasSubstr("txmq_a{k=\"tiny\"} 1e-05\n"));
}

TEST(metrics, remove_drops_the_series_and_the_empty_family) {
  metrics_registry registry;
  registry.add_counter("txmq_x_total", "x", {{"group", "a"}}).inc();
  registry.add_gauge_callback("txmq_y", "y", {{"group", "a"}}, [] { return 1.0; });
  registry.add_counter("txmq_x_total", "x", {{"group", "b"}}).inc(2);
  EXPECT_TRUE(registry.remove("txmq_x_total", {{"group", "a"}}));
  EXPECT_FALSE(registry.remove("txmq_x_total", {{"group", "a"}}));
  EXPECT_TRUE(registry.remove("txmq_y", {{"group", "a"}}));
  EXPECT_FALSE(registry.remove("txmq_nothing", {}));
  EXPECT_EQ(registry.render(),
            "# HELP txmq_x_total x\n"
            "# TYPE txmq_x_total counter\n"
            "txmq_x_total{group=\"b\"} 2\n");
  // With its family gone, the name may come back as another type.
  registry.add_gauge("txmq_y", "now a gauge").set(1);
}

TEST(metrics, misuse_is_refused_at_registration) {
  metrics_registry registry;
  registry.add_counter("txmq_c_total", "c");
  EXPECT_THROW(registry.add_gauge("txmq_c_total", "c"), std::invalid_argument);
  EXPECT_THROW(registry.add_counter("c_total", "no prefix"), std::invalid_argument);
  EXPECT_THROW(registry.add_counter("txmq_bad-name", "dash"), std::invalid_argument);
  EXPECT_THROW(registry.add_counter("txmq_l_total", "l", {{"bad-label", "x"}}),
               std::invalid_argument);
  EXPECT_THROW(registry.add_counter("txmq_l_total", "l", {{"a", "1"}, {"a", "2"}}),
               std::invalid_argument);
  EXPECT_THROW(registry.add_histogram("txmq_h", "h", k_latency_buckets_seconds, {{"le", "1"}}),
               std::invalid_argument);
  const std::array<double, 2> descending = {1, 0.5};
  EXPECT_THROW(registry.add_histogram("txmq_h", "h", descending), std::invalid_argument);
  const std::array<double, 2> other = {1, 2};
  registry.add_histogram("txmq_h", "h");
  EXPECT_THROW(registry.add_histogram("txmq_h", "h", other), std::invalid_argument);
  registry.add_gauge("txmq_g", "g");
  EXPECT_THROW(registry.add_gauge_callback("txmq_g", "g", {}, [] { return 1.0; }),
               std::invalid_argument);
  // A refused registration leaves no trace in the output.
  EXPECT_EQ(registry.render().find("txmq_l_total"), std::string::npos);
}

TEST(metrics, concurrent_updates_are_all_counted) {
  metrics_registry registry;
  constexpr int k_threads = 8;
  constexpr int k_per_thread = 20000;
  auto& c = registry.add_counter("txmq_ops_total", "ops");
  auto& g = registry.add_gauge("txmq_level", "level");
  const std::array<double, 2> bounds = {0.5, 1.5};
  auto& h = registry.add_histogram("txmq_sizes", "sizes", bounds);

  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < k_per_thread; ++i) {
        c.inc();
        g.add(1);
        h.observe(static_cast<double>((t + i) % 2));  // 0 or 1
        // Lazy lookups and scrapes race with the updates.
        if (i % 1000 == 0) {
          registry.add_counter("txmq_ops_total", "ops").inc(0);
          (void)registry.render();
        }
      }
    });
  }
  for (auto& t : threads) t.join();

  constexpr auto total = static_cast<std::uint64_t>(k_threads) * k_per_thread;
  EXPECT_EQ(c.value(), total);
  EXPECT_EQ(g.value(), static_cast<double>(total));
  const auto snap = h.collect();
  EXPECT_EQ(snap.count, total);
  EXPECT_EQ(snap.cumulative[0], total / 2);  // the zeros
  EXPECT_EQ(snap.cumulative[1], total);
  EXPECT_EQ(snap.sum, static_cast<double>(total / 2));
  EXPECT_THAT(registry.render(), HasSubstr("txmq_ops_total 160000\n"));
}

}  // namespace
}  // namespace txmq::common
