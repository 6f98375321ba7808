// The log family's compression follows what the messages stored are (src/log_compression.h):
// the sampler's decisions, and a store that switches LZ4 on for compressible messages, keeps it
// off for incompressible ones, and reads back every message either way.

#include <fstream>
#include <random>
#include <sstream>

#include "log_compression.h"
#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

using detail::log_compression_sampler;
using namespace std::chrono_literals;

std::string random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

std::string text(std::size_t n) {
  std::string s;
  while (s.size() < n) s += R"({"order":12345,"customer":"c-42","items":[{"sku":"a","qty":1}],"status":"new"})";
  s.resize(n);
  return s;
}

log_compression_sampler::settings every_record() {
  log_compression_sampler::settings s;
  s.every = 1;
  s.min_interval = 0s;
  return s;
}

TEST(log_compression_sampler_test, compressible_records_switch_lz4_on_after_the_warmup) {
  log_compression_sampler sampler(every_record());
  std::vector<std::optional<bool>> changes;
  for (int i = 0; i < 6; ++i) changes.push_back(sampler.observe(text(4096)));
  EXPECT_EQ(changes, (std::vector<std::optional<bool>>{std::nullopt, std::nullopt, std::nullopt, true, std::nullopt,
                                                         std::nullopt}));
  EXPECT_TRUE(sampler.compressing());
  EXPECT_LT(sampler.average_ratio(), 0.3);
}

TEST(log_compression_sampler_test, incompressible_records_never_switch_it_on) {
  std::mt19937_64 rng(7);
  log_compression_sampler sampler(every_record());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sampler.observe(random_bytes(4096, rng)), std::nullopt);
  EXPECT_FALSE(sampler.compressing());
}

TEST(log_compression_sampler_test, a_change_of_payload_switches_it_off_again_and_small_records_are_not_sampled) {
  std::mt19937_64 rng(7);
  log_compression_sampler sampler(every_record());
  for (int i = 0; i < 8; ++i) sampler.observe(text(4096));
  ASSERT_TRUE(sampler.compressing());
  // Records below min_bytes say nothing, whatever they hold.
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sampler.observe(random_bytes(100, rng)), std::nullopt);
  ASSERT_TRUE(sampler.compressing());
  std::optional<bool> change;
  int n = 0;
  while (!change && n < 50) {
    change = sampler.observe(random_bytes(4096, rng));
    ++n;
  }
  EXPECT_EQ(change, false) << "after " << n << " incompressible records";
  EXPECT_FALSE(sampler.compressing());
}

TEST(log_compression_sampler_test, switches_are_at_least_min_interval_apart) {
  std::mt19937_64 rng(7);
  auto s = every_record();
  s.min_interval = 10s;
  log_compression_sampler sampler(s);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 8; ++i) sampler.observe(text(4096), t0);
  ASSERT_TRUE(sampler.compressing());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sampler.observe(random_bytes(4096, rng), t0 + 5s), std::nullopt);
  EXPECT_EQ(sampler.observe(random_bytes(4096, rng), t0 + 11s), false);
}

TEST(log_compression_sampler_test, only_one_record_in_every_is_compressed) {
  log_compression_sampler::settings s;
  s.every = 10;
  s.min_interval = 0s;
  log_compression_sampler sampler(s);
  // Samples are records 1, 11, 21, 31: the fourth decides.
  int decided_at = 0;
  for (int i = 1; i <= 40 && decided_at == 0; ++i) {
    if (sampler.observe(text(4096))) decided_at = i;
  }
  EXPECT_EQ(decided_at, 31);
}

// The compression of the log family in the store's newest OPTIONS file (RocksDB writes one at
// open and at every SetOptions).
std::string stored_log_compression(const fs::path& dir) {
  fs::path newest;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (name.starts_with("OPTIONS-") && (newest.empty() || name > newest.filename().string())) newest = e.path();
  }
  std::ifstream in(newest);
  std::string line;
  bool in_log = false;
  while (std::getline(in, line)) {
    if (line.starts_with("[")) in_log = line == R"([CFOptions "log"])";
    if (in_log && line.find("compression=") != std::string::npos && line.find("bottommost") == std::string::npos &&
        line.find("_compression=") == std::string::npos) {
      return line.substr(line.find('=') + 1);
    }
  }
  return "no OPTIONS file in " + dir.string();
}

class log_compression_store_test : public store_test {
 protected:
  // Enough log records (one per append) for the sampler's warm-up at its default settings, and
  // more bytes than one write buffer (the fixture's 4 MiB), so that a table file is flushed.
  void append_bodies(const std::function<std::string(std::size_t)>& body) {
    create_topic("t", 1);
    for (std::size_t r = 0; r < 200; ++r) {
      std::vector<v1::Message> batch;
      for (std::size_t i = 0; i < 12; ++i) batch.push_back(make_message(body(r * 12 + i)));
      append("t", std::move(batch));
    }
  }
  void expect_read_back(const std::function<std::string(std::size_t)>& body) {
    const auto all = read_all("t", 0);
    ASSERT_EQ(all.size(), 200u * 12u);
    for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i].body(), body(i)) << "offset " << i;
  }
};

TEST_F(log_compression_store_test, the_switch_is_recorded_while_compressible_messages_are_stored) {
  const auto body = [](std::size_t i) { return std::to_string(i) + text(2000); };
  EXPECT_EQ(stored_log_compression(dir_), "kNoCompression");
  append_bodies(body);
  EXPECT_EQ(stored_log_compression(dir_), "kLZ4Compression");
  expect_read_back(body);
  // Off again at open, until the messages say otherwise; what was written compressed reads back.
  reopen();
  EXPECT_EQ(stored_log_compression(dir_), "kNoCompression");
  expect_read_back(body);
}

TEST_F(log_compression_store_test, incompressible_messages_leave_it_off) {
  const auto body = [](std::size_t i) {
    std::mt19937_64 rng(i);
    return random_bytes(2000, rng);
  };
  append_bodies(body);
  EXPECT_EQ(stored_log_compression(dir_), "kNoCompression");
  expect_read_back(body);
  reopen();
  expect_read_back(body);
}

}  // namespace
}  // namespace txmq::storage::test
