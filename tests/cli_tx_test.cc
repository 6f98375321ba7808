// The txmq tx commands (cli/README.md) against the real broker: the real `txmq` binary is run as a
// child process, as in cli_test.cc.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "broker_process.h"
#include "cli_runner.h"
#include "eventually.h"
#include "pg_cluster.h"
#include "txmq/pg/pg.h"
#include "txmq/producer/pg_schema.h"

extern char** environ;

namespace txmq::test {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;


std::string str(const json::object& o, const char* key) { return std::string(o.at(key).as_string()); }

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// A txmq command left running in the background (tx checker), its stdout kept in a file.
class background_txmq {
 public:
  explicit background_txmq(const broker_process& b, const std::vector<std::string>& args) {
    std::vector<std::string> argv{binary_path("txmq"), "--broker", b.address()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    char path[] = "/tmp/cli_tx_test_out_XXXXXX";
    const int out_fd = ::mkstemp(path);
    EXPECT_GE(out_fd, 0) << std::strerror(errno);
    out_path_ = path;
    pid_ = ::fork();
    if (pid_ == 0) {
      const int null_fd = ::open("/dev/null", O_RDWR);
      ::dup2(null_fd, 0);
      ::dup2(out_fd, 1);
      ::dup2(null_fd, 2);
      ::execv(raw[0], raw.data());
      ::_exit(127);
    }
    if (out_fd >= 0) ::close(out_fd);
  }
  ~background_txmq() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (!out_path_.empty()) ::unlink(out_path_.c_str());
  }

  // What it wrote to stdout so far.
  [[nodiscard]] std::string output() const {
    std::ifstream in(out_path_);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  background_txmq(const background_txmq&) = delete;
  background_txmq& operator=(const background_txmq&) = delete;

  // Sends sig and waits (up to 10 s) for the exit; returns the exit status, 128+signal when
  // killed by one, -1 when it did not exit.
  int stop(int sig) {
    ::kill(pid_, sig);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      ::poll(nullptr, 0, 10);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  std::string out_path_;
};

std::string tx_state(const broker_process& b, const std::string& txid) {
  auto r = txmq(b, {"--json", "tx", "show", txid});
  if (r.status != 0) return "exit " + std::to_string(r.status);
  auto objs = r.objects();
  return objs.size() == 1 ? str(objs[0], "state") : "?";
}

std::vector<std::string> consumed_bodies(const broker_process& b, const std::string& topic, const std::string& group) {
  auto r = txmq(b, {"--json", "consume", topic, "--group", group, "--wait", "300"});
  EXPECT_EQ(r.status, 0) << r;
  std::vector<std::string> bodies;
  for (const auto& o : r.objects()) bodies.push_back(str(o, "body"));
  return bodies;
}

TEST(cli_tx_test, prepare_list_commit_rollback) {
  broker_process b;
  b.start();
  ASSERT_EQ(txmq(b, {"topic", "create", "orders", "--partitions", "1"}).status, 0);

  auto prepared = txmq(b, {"tx", "prepare", "orders", "first", "--group", "pg", "--key", "k1"});
  ASSERT_EQ(prepared.status, 0) << prepared;
  const auto tx1 = trimmed(prepared.out);
  ASSERT_EQ(tx1.size(), 36u) << prepared;
  auto other = txmq(b, {"tx", "prepare", "orders", "second", "--group", "pg"});
  ASSERT_EQ(other.status, 0) << other;
  const auto tx2 = trimmed(other.out);
  ASSERT_EQ(tx2.size(), 36u) << other;
  EXPECT_NE(tx1, tx2);

  // Half messages are invisible to consumers.
  EXPECT_TRUE(consumed_bodies(b, "orders", "g").empty());

  auto list = txmq(b, {"tx", "list"});
  ASSERT_EQ(list.status, 0) << list;
  EXPECT_TRUE(list.out.starts_with("TXID")) << list;
  ASSERT_EQ(list.rows().size(), 2u) << list;
  bool seen = false;
  for (const auto& row : list.rows()) {
    const auto f = fields(row);
    if (f[0] != tx1) continue;
    seen = true;
    EXPECT_EQ(f[1], "pg");
    EXPECT_EQ(f[2], "PREPARED");
    EXPECT_EQ(f[3], "orders");
    EXPECT_EQ(f[4], "k1");
  }
  EXPECT_TRUE(seen) << list;
  auto json_list = txmq(b, {"--json", "tx", "list", "--state", "prepared", "--topic", "orders"});
  ASSERT_EQ(json_list.status, 0) << json_list;
  ASSERT_EQ(json_list.objects().size(), 2u) << json_list;
  EXPECT_EQ(str(json_list.objects()[0], "state"), "PREPARED");
  EXPECT_EQ(txmq(b, {"--json", "tx", "list", "--topic", "elsewhere"}).out, "");

  auto commit = txmq(b, {"tx", "commit", tx1});
  ASSERT_EQ(commit.status, 0) << commit;
  EXPECT_EQ(consumed_bodies(b, "orders", "g"), std::vector<std::string>{"first"});
  EXPECT_EQ(tx_state(b, tx1), "COMMITTED");

  auto rollback = txmq(b, {"tx", "rollback", tx2});
  ASSERT_EQ(rollback.status, 0) << rollback;
  EXPECT_EQ(tx_state(b, tx2), "ROLLED_BACK");
  EXPECT_TRUE(consumed_bodies(b, "orders", "g2-after").size() == 1u);  // "first" only

  // The same decision again is idempotent; the contrary one is refused.
  EXPECT_EQ(txmq(b, {"tx", "commit", tx1}).status, 0);
  auto contrary = txmq(b, {"tx", "rollback", tx1});
  EXPECT_EQ(contrary.status, 1) << contrary;
  EXPECT_NE(contrary.err.find("TX_ALREADY_RESOLVED"), std::string::npos) << contrary;
  auto contrary2 = txmq(b, {"tx", "commit", tx2});
  EXPECT_EQ(contrary2.status, 1) << contrary2;
  EXPECT_NE(contrary2.err.find("TX_ALREADY_RESOLVED"), std::string::npos) << contrary2;

  auto all = txmq(b, {"--json", "tx", "list", "--state", "all"});
  ASSERT_EQ(all.status, 0) << all;
  EXPECT_EQ(all.objects().size(), 2u) << all;
  EXPECT_EQ(txmq(b, {"tx", "list"}).rows().size(), 0u);

  // Unknown and malformed txids.
  const std::string unknown = "00000000-0000-4000-8000-000000000001";
  for (const auto* cmd : {"show", "commit", "rollback"}) {
    auto r = txmq(b, {"tx", cmd, unknown});
    EXPECT_EQ(r.status, 1) << r;
    EXPECT_NE(r.err.find("UNKNOWN_TX"), std::string::npos) << r;
    EXPECT_EQ(txmq(b, {"tx", cmd, "not-a-uuid"}).status, 2);
  }
  EXPECT_EQ(txmq(b, {"tx", "prepare", "orders", "x"}).status, 2);  // no --group
  EXPECT_EQ(txmq(b, {"tx", "list", "--state", "committed"}).status, 2);
  auto both = txmq(b, {"tx", "checker", "--group", "pg", "--pg", "postgres://x", "--answer", "commit"});
  EXPECT_EQ(both.status, 2) << both;
  EXPECT_NE(both.err.find("exactly one of --answer and --pg"), std::string::npos) << both;
}

TEST(cli_tx_test, checker_commits_a_prepared_transaction) {
  // Checks made before the checker connects count as undecided; with the default 15 the
  // transaction would be ABANDONED ~1.6 s after its Prepare, which a loaded machine can reach
  // before the checker process is up.
  broker_process b({"--tx-timeout", "200ms", "--tx-check-schedule", "100ms", "--tx-max-checks", "1000"});
  b.start();
  auto prepared = txmq(b, {"tx", "prepare", "orders", "checked", "--group", "pg-c"});
  ASSERT_EQ(prepared.status, 0) << prepared;
  const auto txid = trimmed(prepared.out);

  background_txmq checker(b, {"tx", "checker", "--group", "pg-c", "--answer", "commit"});
  ASSERT_TRUE(eventually([&] { return checker.output().find("answering checks") != std::string::npos; }))
      << checker.output();
  EXPECT_TRUE(eventually([&] { return tx_state(b, txid) == "COMMITTED"; })) << tx_state(b, txid);
  auto show = txmq(b, {"--json", "tx", "show", txid});
  ASSERT_EQ(show.status, 0) << show;
  EXPECT_EQ(str(show.objects().at(0), "resolved_by"), "check");
  EXPECT_EQ(consumed_bodies(b, "orders", "g"), std::vector<std::string>{"checked"});
  EXPECT_NE(checker.output().find(" of " + txid), std::string::npos) << checker.output();
  EXPECT_EQ(checker.stop(SIGTERM), 0);
}

TEST(cli_tx_test, pg_checker_answers_from_the_barrier_table) {
  // Checks made before the checker connects count as undecided; with the default 15 the
  // transaction would be ABANDONED ~1.6 s after its Prepare, which a loaded machine can reach
  // before the checker process is up.
  broker_process b({"--tx-timeout", "200ms", "--tx-check-schedule", "100ms", "--tx-max-checks", "1000"});
  b.start();
  const std::string conninfo = shared_pg_cluster().create_database("cli_checker");
  auto db = pg::connect(conninfo);
  ASSERT_TRUE(db) << db.error();
  ASSERT_TRUE(producer::install_schema(db.value().get()));
  auto committed = txmq(b, {"tx", "prepare", "orders", "money-moved", "--group", "pg-db"});
  auto never = txmq(b, {"tx", "prepare", "orders", "money-stayed", "--group", "pg-db"});
  ASSERT_EQ(committed.status, 0) << committed;
  ASSERT_EQ(never.status, 0) << never;
  // The business transaction of the first committed with its barrier row; the second's never ran.
  ASSERT_TRUE(pg::exec(db.value().get(), "INSERT INTO txmq_tx_barrier (txid, outcome) VALUES ($1, 'commit')",
                       {trimmed(committed.out)}));

  background_txmq checker(b, {"tx", "checker", "--group", "pg-db", "--pg", conninfo});
  ASSERT_TRUE(eventually([&] { return checker.output().find("the barrier table") != std::string::npos; }))
      << checker.output();
  EXPECT_TRUE(eventually([&] { return tx_state(b, trimmed(committed.out)) == "COMMITTED"; }));
  EXPECT_TRUE(eventually([&] { return tx_state(b, trimmed(never.out)) == "ROLLED_BACK"; }));
  EXPECT_EQ(consumed_bodies(b, "orders", "g"), std::vector<std::string>{"money-moved"});
  EXPECT_EQ(checker.stop(SIGTERM), 0);
}

TEST(cli_tx_test, unknown_answers_abandon_the_transaction) {
  broker_process b({"--tx-timeout", "200ms", "--tx-check-schedule", "100ms", "--tx-max-checks", "2"});
  b.start();
  auto prepared = txmq(b, {"tx", "prepare", "orders", "undecided", "--group", "pg-u"});
  ASSERT_EQ(prepared.status, 0) << prepared;
  const auto txid = trimmed(prepared.out);

  background_txmq checker(b, {"tx", "checker", "--group", "pg-u", "--answer", "unknown"});
  ASSERT_TRUE(eventually([&] { return checker.output().find("answering checks") != std::string::npos; }))
      << checker.output();
  EXPECT_TRUE(eventually([&] {
    auto r = txmq(b, {"tx", "list", "--state", "abandoned"});
    for (const auto& row : r.rows()) {
      if (fields(row).at(0) == txid) return true;
    }
    return false;
  }));
  auto abandoned = txmq(b, {"--json", "tx", "list", "--state", "abandoned"});
  ASSERT_EQ(abandoned.objects().size(), 1u) << abandoned;
  EXPECT_EQ(str(abandoned.objects()[0], "state"), "ABANDONED");
  EXPECT_EQ(abandoned.objects()[0].at("check_count").to_number<int>(), 2);
  EXPECT_TRUE(consumed_bodies(b, "orders", "g").empty());
  EXPECT_EQ(checker.stop(SIGINT), 0);

  // An operator can still decide.
  EXPECT_EQ(txmq(b, {"tx", "commit", txid}).status, 0);
  EXPECT_EQ(consumed_bodies(b, "orders", "g"), std::vector<std::string>{"undecided"});
}

}  // namespace
}  // namespace txmq::test
