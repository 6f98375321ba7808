// txmq_group_lag at scale: with 1,000 consumer groups (each with deliveries in flight, over a
// 16-partition topic and, for half of them, a second topic) every group's lag in the scrape is
// its topics' end offsets minus what it acknowledged, before and after more messages arrive.
// The scrape runs on the io thread (the admin HTTP server is there), so it must stay cheap:
// the test prints how long a scrape takes (a figure, not a check; scripts/metrics_scrape_bench.py
// measures the same on the real broker). It was O(groups²), then O(groups × (partitions² +
// deliveries in flight)); it is O(topics × partitions + groups × partitions).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "handler_test_support.h"

namespace txmq::broker::test {
namespace {

class group_lag_metrics_test : public handler_test {
 protected:
  group_lag_metrics_test() : metrics_(registry_) { metrics = &metrics_; }
  // The service unregisters its collectors from registry_ when it is destroyed, which the base
  // fixture would do after registry_ is gone.
  ~group_lag_metrics_test() override { svc_.reset(); }

  // group → value of `family` in one scrape.
  std::map<std::string, std::uint64_t> scrape(const std::string& family) {
    const std::string text = registry_.render();
    std::map<std::string, std::uint64_t> out;
    const std::regex line("\n" + family + "\\{group=\"([^\"]+)\"\\} ([0-9]+)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator(); ++it) {
      out[(*it)[1].str()] = std::stoull((*it)[2].str());
    }
    return out;
  }

  common::metrics_registry registry_;
  broker_metrics metrics_;
};

TEST_F(group_lag_metrics_test, every_groups_lag_is_right_with_a_thousand_groups) {
  constexpr int k_groups = 1000;
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 16)).has_topic_info());
  ASSERT_TRUE(request(c, create_topic_frame("u", 4)).has_topic_info());
  const auto produce = [&](const std::string& topic, int n) {
    for (int done = 0; done < n;) {
      std::vector<v1::Message> batch;
      for (int i = 0; i < 500 && done < n; ++i, ++done) batch.push_back(message("m" + std::to_string(done)));
      ASSERT_TRUE(request(c, produce_frame(topic, std::move(batch))).has_produce_response());
    }
  };
  ASSERT_NO_FATAL_FAILURE(produce("t", 3200));
  ASSERT_NO_FATAL_FAILURE(produce("u", 400));

  // Group i reads t (and u when i is odd): it acks the first i % 37 deliveries it fetched and
  // keeps the next 100 in flight.
  std::map<std::string, std::uint64_t> expected_lag;
  std::map<std::string, std::uint64_t> expected_in_flight;
  for (int i = 0; i < k_groups; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "g%04d", i);
    std::uint64_t total = 3200;
    const auto read = [&](const std::string& topic, std::uint32_t max) {
      v1::Frame f = fetch_frame(name, topic);
      f.mutable_fetch()->set_max_messages(max);
      return request(c, std::move(f));
    };
    const std::uint32_t acked = static_cast<std::uint32_t>(i % 37);
    if (acked > 0) {
      auto first = read("t", acked);
      ASSERT_EQ(first.fetch_response().deliveries_size(), static_cast<int>(acked)) << first.ShortDebugString();
      v1::Frame ack;
      ack.mutable_ack()->set_group(name);
      for (auto& d : first.fetch_response().deliveries()) *ack.mutable_ack()->add_refs() = ref_of(d.message());
      ASSERT_TRUE(request(c, std::move(ack)).has_delivery_results());
    }
    ASSERT_EQ(read("t", 100).fetch_response().deliveries_size(), 100);
    if (i % 2 == 1) {
      ASSERT_TRUE(read("u", 1).has_fetch_response());  // subscribes the group to u as well
      total += 400;
    }
    // Acking a fetched prefix of each partition moves its floor over all of it.
    expected_lag[name] = total - acked;
    expected_in_flight[name] = i % 2 == 1 ? 101 : 100;
  }

  EXPECT_EQ(scrape("txmq_group_lag"), expected_lag);
  EXPECT_EQ(scrape("txmq_group_in_flight"), expected_in_flight);

  // More messages: every group's lag grows by what its topics got.
  ASSERT_NO_FATAL_FAILURE(produce("u", 40));
  for (auto& [name, lag] : expected_lag) {
    if ((std::stoi(name.substr(1)) % 2) == 1) lag += 40;
  }
  EXPECT_EQ(scrape("txmq_group_lag"), expected_lag);

  // How long a scrape takes with these 1,000 groups (figure for the issue, not a check).
  constexpr int k_scrapes = 20;
  std::vector<double> ms;
  for (int i = 0; i < k_scrapes; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto text = registry_.render();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_FALSE(text.empty());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("scrape of %d groups: median %.3f ms, min %.3f ms, max %.3f ms over %d scrapes\n", k_groups,
              ms[ms.size() / 2], ms.front(), ms.back(), k_scrapes);
  RecordProperty("scrape_median_us", static_cast<int>(ms[ms.size() / 2] * 1000));
}

}  // namespace
}  // namespace txmq::broker::test
