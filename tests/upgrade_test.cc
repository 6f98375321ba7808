// Upgrades (DESIGN.md §7, issue #13 item 7): the current txmq-broker opens a data directory
// written by an older build (storage/tests/fixtures/format-v1, made by make-format-v1.sh with
// the binaries of format version 1) and serves all of it: the messages, a group's acks and
// its dead letter, a prepared and a committed transaction, a webhook subscription. A directory
// of a newer format is refused at start with a message naming both versions.

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "broker_process.h"
#include "cli_runner.h"
#include "raw_client.h"

namespace txmq::test {
namespace {

namespace fs = std::filesystem;
const fs::path k_fixture = TXMQ_FORMAT_V1_FIXTURE;
const fs::path k_v1_tx_fixture = TXMQ_FORMAT_V1_TX_FIXTURE;
const fs::path k_v2_tx_fixture = TXMQ_FORMAT_V2_TX_FIXTURE;

std::string str(const json::object& o, const char* key) { return std::string(o.at(key).as_string()); }
std::uint64_t num(const json::object& o, const char* key) { return o.at(key).to_number<std::uint64_t>(); }

// "prepared TXID" and "committed TXID", the first lines of the fixture's expected.txt.
std::map<std::string, std::string> fixture_txids() {
  std::ifstream in(k_fixture / "expected.txt");
  std::map<std::string, std::string> out;
  std::string what, txid;
  while (in >> what >> txid && (what == "prepared" || what == "committed")) out[what] = txid;
  return out;
}

void copy_fixture_to(const broker_process& b) {
  fs::copy(k_fixture / "data", b.data_dir(), fs::copy_options::recursive);
}

TEST(upgrade_test, a_format_v1_directory_is_served_whole) {
  const auto txids = fixture_txids();
  ASSERT_EQ(txids.size(), 2u);
  // The fixture was written on 2026-11-26 and does not age with it: a dedupe window and a
  // retention pass that count from today would expire its resolved transaction (after 24 h) and
  // its messages (the topic's 7 days), so both are pushed out of the test's reach.
  broker_process b({"--min-free-disk-bytes", "0", "--dedupe-window", "87600h", "--retention-interval", "87600h"});
  copy_fixture_to(b);
  b.start();

  auto list = txmq(b, {"topic", "list"});
  ASSERT_EQ(list.status, 0) << list;
  ASSERT_EQ(list.rows().size(), 1u) << list;
  EXPECT_EQ(fields(list.rows()[0])[0], "orders");
  auto topic = txmq(b, {"--json", "topic", "describe", "orders"});
  ASSERT_EQ(topic.status, 0) << topic;
  ASSERT_EQ(topic.objects().size(), 1u) << topic;
  EXPECT_EQ(num(topic.objects()[0], "partitions"), 2u);
  EXPECT_EQ(num(topic.objects()[0], "messages"), 6u);  // 5 produced + 1 committed in a transaction

  // billing acknowledged 3 of them; describe shows it, and consuming gets the other 3.
  auto group = txmq(b, {"--json", "group", "describe", "billing"});
  ASSERT_EQ(group.status, 0) << group;
  EXPECT_EQ(num(group.objects().at(0), "lag"), 3u) << group;
  auto rest = txmq(b, {"--json", "consume", "orders", "--group", "billing", "--max", "3", "--wait", "5000"});
  ASSERT_EQ(rest.status, 0) << rest;
  std::set<std::string> bodies;
  for (auto& m : rest.objects()) bodies.insert(str(m, "body"));
  EXPECT_EQ(bodies, (std::set<std::string>{"order-3", "order-5", "tx-committed"})) << rest;
  for (auto& m : rest.objects()) {
    if (str(m, "body") == "order-3") {
      EXPECT_EQ(str(m, "key"), "k3");
      EXPECT_EQ(str(m.at("headers").as_object(), "source"), "fixture");
      EXPECT_EQ(str(m, "id"), "00000000-0000-7000-8000-000000000003");
    }
  }

  // audit's one delivery ran out of attempts: its dead letter is there.
  auto dlq = txmq(b, {"--json", "dlq", "list", "audit"});
  ASSERT_EQ(dlq.status, 0) << dlq;
  ASSERT_EQ(dlq.objects().size(), 1u) << dlq;
  EXPECT_EQ(str(dlq.objects()[0], "id"), "00000000-0000-7000-8000-000000000002");
  EXPECT_EQ(str(dlq.objects()[0], "body"), "order-2");

  // The transactions keep their states; the prepared one can still be decided.
  auto committed = txmq(b, {"--json", "tx", "show", txids.at("committed")});
  ASSERT_EQ(committed.status, 0) << committed;
  EXPECT_EQ(str(committed.objects().at(0), "state"), "COMMITTED");
  auto prepared = txmq(b, {"--json", "tx", "show", txids.at("prepared")});
  ASSERT_EQ(prepared.status, 0) << prepared;
  EXPECT_EQ(str(prepared.objects().at(0), "state"), "PREPARED") << prepared;
  EXPECT_EQ(str(prepared.objects().at(0), "producer_group"), "shop");
  ASSERT_EQ(txmq(b, {"tx", "commit", txids.at("prepared")}).status, 0);
  auto decided = txmq(b, {"--json", "consume", "orders", "--group", "billing", "--max", "1", "--wait", "5000"});
  ASSERT_EQ(decided.status, 0) << decided;
  ASSERT_EQ(decided.objects().size(), 1u) << decided;
  EXPECT_EQ(str(decided.objects()[0], "body"), "tx-prepared");

  // The webhook subscription is there with its URL and state.
  auto hooks = txmq(b, {"--json", "webhook", "list"});
  ASSERT_EQ(hooks.status, 0) << hooks;
  ASSERT_EQ(hooks.objects().size(), 1u) << hooks;
  EXPECT_EQ(str(hooks.objects()[0], "url"), "http://127.0.0.1:9/hook");
  EXPECT_EQ(str(hooks.objects()[0], "topic"), "orders");
  EXPECT_EQ(str(hooks.objects()[0], "state"), "active");

  // And the store takes new writes.
  ASSERT_EQ(txmq(b, {"produce", "orders", "after-upgrade"}).status, 0);
  auto fresh = txmq(b, {"--json", "consume", "orders", "--group", "billing", "--max", "1", "--wait", "5000"});
  ASSERT_EQ(fresh.status, 0) << fresh;
  ASSERT_EQ(fresh.objects().size(), 1u) << fresh;
  EXPECT_EQ(str(fresh.objects()[0], "body"), "after-upgrade");
  EXPECT_EQ(b.stop(), 0);
}

TEST(upgrade_test, a_newer_format_is_refused_at_start_naming_both_versions) {
  broker_process b({"--min-free-disk-bytes", "0"});
  copy_fixture_to(b);
  {
    // What a future build would have written: format version 4.
    std::vector<std::string> names;
    ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), b.data_dir().string(), &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (auto& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), b.data_dir().string(), cfs, &handles, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[0], "v", "4").ok());
    for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  }
  EXPECT_THROW(b.start(std::chrono::seconds(20)), std::runtime_error);
  const std::string log = b.log();
  EXPECT_NE(log.find("cannot start"), std::string::npos) << log;
  EXPECT_NE(log.find("has format version 4, written by a newer txmq; this txmq reads format versions 1 to 3"),
            std::string::npos)
      << log;
}

// A format-vN-tx fixture's txids by what they were when it was written: "prepared",
// "abandoned", "resolved" (the first lines of its expected.txt).
std::map<std::string, std::set<std::string>> tx_fixture(const fs::path& fixture) {
  std::ifstream in(fixture / "expected.txt");
  std::map<std::string, std::set<std::string>> out;
  std::string what, txid;
  while (in >> what >> txid && (what == "prepared" || what == "abandoned" || what == "resolved")) out[what].insert(txid);
  return out;
}

std::set<std::string> listed(const broker_process& b, std::vector<std::string> state) {
  std::vector<std::string> args{"--json", "tx", "list"};
  args.insert(args.end(), state.begin(), state.end());
  auto r = txmq(b, args);
  EXPECT_EQ(r.status, 0) << r;
  std::set<std::string> out;
  for (auto& o : r.objects()) out.insert(str(o, "txid"));
  return out;
}

// The value of a metric without labels, from GET /metrics.
double gauge(const broker_process& b, const std::string& name) {
  std::string text;
  try {
    text = http_get(b.http_port(), "/metrics");
  } catch (const std::exception& e) {
    // Seen once under load (port refused right after the CLI's listings): the broker's log says why.
    throw std::runtime_error(std::string(e.what()) + " (broker " + (b.running() ? "running" : "not running") + ")\n" + b.log());
  }
  const auto at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

std::string stored_format_version(const fs::path& dir) {
  std::vector<std::string> names;
  EXPECT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir.string(), &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (auto& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), dir.string(), cfs, &handles, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return "(cannot open)";
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string v;
  EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), handles[0], "v", &v).ok());
  for (auto* h : handles) EXPECT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  return v;
}

// A store of an older format with transactions in every state (a format-vN-tx fixture), served
// by this build: the gauges and listings, which read the index of unresolved transactions,
// answer what the older broker answered, before and after a restart, and the store is raised to
// this build's format.
void serves_a_tx_fixture(const fs::path& fixture, const std::string& version) {
  auto txs = tx_fixture(fixture);
  ASSERT_EQ(txs["prepared"].size(), 2u);
  ASSERT_EQ(txs["abandoned"].size(), 2u);
  ASSERT_EQ(txs["resolved"].size(), 3u);
  // The fixture does not age: its resolved outcomes stay (dedupe window) and its prepared
  // transactions stay prepared (their checks, due since, find no producer: undecided, and many
  // are allowed before an abandon).
  broker_process b({"--min-free-disk-bytes", "0", "--dedupe-window", "87600h", "--tx-max-checks", "1000"});
  fs::copy(fixture / "data", b.data_dir(), fs::copy_options::recursive);
  EXPECT_EQ(stored_format_version(b.data_dir()), version);
  b.start();
  auto unresolved = txs["prepared"];
  unresolved.insert(txs["abandoned"].begin(), txs["abandoned"].end());
  EXPECT_EQ(listed(b, {"--state", "prepared"}), txs["prepared"]);
  EXPECT_EQ(listed(b, {"--state", "abandoned"}), txs["abandoned"]);
  EXPECT_EQ(listed(b, {}), unresolved);
  EXPECT_EQ(listed(b, {"--state", "all"}).size(), 7u);
  EXPECT_EQ(gauge(b, "txmq_tx_prepared"), 2);
  EXPECT_EQ(gauge(b, "txmq_tx_abandoned_pending"), 2);

  // An operator's decision on an abandoned one takes it out of the index, across a restart.
  const std::string decided = *txs["abandoned"].begin();
  ASSERT_EQ(txmq(b, {"tx", "rollback", decided}).status, 0);
  auto left = txs["abandoned"];
  left.erase(decided);
  EXPECT_EQ(listed(b, {"--state", "abandoned"}), left);
  EXPECT_EQ(gauge(b, "txmq_tx_abandoned_pending"), 1);
  EXPECT_EQ(b.stop(), 0);
  EXPECT_EQ(stored_format_version(b.data_dir()), "3");
  b.start();
  EXPECT_EQ(gauge(b, "txmq_tx_prepared"), 2);
  EXPECT_EQ(gauge(b, "txmq_tx_abandoned_pending"), 1);
  EXPECT_EQ(listed(b, {"--state", "prepared"}), txs["prepared"]);
  EXPECT_EQ(listed(b, {"--state", "abandoned"}), left);
  EXPECT_EQ(b.stop(), 0);
}

// Format 2 keeps an index of unresolved transactions (storage/README.md "Format version"): a
// format-1 store gets it built at its first open.
TEST(upgrade_test, a_format_v1_stores_unresolved_transactions_are_indexed_at_the_first_open) {
  serves_a_tx_fixture(k_v1_tx_fixture, "1");
}

// Format 3 writes a young Prepare's due entry late: a format-2 store, whose every PREPARED
// transaction has its entry, needs no conversion.
TEST(upgrade_test, a_format_v2_stores_transactions_are_served_as_they_were) {
  serves_a_tx_fixture(k_v2_tx_fixture, "2");
}

}  // namespace
}  // namespace txmq::test
