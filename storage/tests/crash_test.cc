// Kills a process that appends through the group committer with SIGKILL at random moments, 20
// times over one store, and checks after each kill that every acknowledged message is readable
// at its acknowledged position, that offsets are dense and that no id is stored twice. Once with
// the store's defaults, once with its fsyncs spaced (store_options::min_fsync_interval).

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "txmq/storage/store.h"

namespace fs = std::filesystem;
using namespace txmq;

namespace {

struct acked {
  std::uint32_t partition;
  std::uint64_t offset;
};

std::string to_hex(std::string_view raw) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

class crash_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("txmq-crash-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the child until it has acknowledged `kill_after` messages, kills it, and collects every
  // line it wrote (lines written before the kill are acknowledgements too).
  void run_child_and_kill(std::size_t kill_after, const fs::path& prior) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      ::close(fds[1]);
      const std::string store_dir = (dir_ / "store").string();
      const std::string prior_path = prior.string();
      const std::string interval = std::to_string(fsync_interval_us_);
      ::execl(TXMQ_CRASH_CHILD, TXMQ_CRASH_CHILD, store_dir.c_str(), prior_path.c_str(), interval.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    FILE* in = ::fdopen(fds[0], "r");
    char line[512];
    std::size_t acks_this_run = 0;
    bool killed = false;
    while (std::fgets(line, sizeof line, in)) {
      std::istringstream ls(line);
      std::string kind, id;
      acked a{};
      ls >> kind >> id >> a.partition >> a.offset;
      if (kind == "dup") {
        int dup = 0;
        ls >> dup;
        ++dups_checked_;
        auto it = acked_.find(id);
        ASSERT_NE(it, acked_.end()) << "child re-sent an id the parent never saw acknowledged";
        EXPECT_EQ(dup, 1) << "re-append of an acknowledged id was not recognised as a duplicate: " << id;
        EXPECT_EQ(a.partition, it->second.partition);
        EXPECT_EQ(a.offset, it->second.offset) << "duplicate answered a different position for " << id;
        continue;
      }
      ASSERT_EQ(kind, "ack") << line;
      auto [it, inserted] = acked_.emplace(id, a);
      EXPECT_TRUE(inserted) << "id acknowledged twice: " << id;
      if (++acks_this_run == kill_after && !killed) {
        ::kill(pid, SIGKILL);
        killed = true;
      }
    }
    std::fclose(in);
    if (!killed) ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited by itself with status " << WEXITSTATUS(status);
    ASSERT_EQ(WTERMSIG(status), SIGKILL);
  }

  void verify_store() {
    storage::store_options options;
    options.dir = dir_ / "store";
    auto opened = storage::open_store(options);
    ASSERT_TRUE(opened) << opened.error();
    auto& s = *opened.value();
    auto info = s.topic("crash");
    ASSERT_TRUE(info.has_value());
    std::map<std::pair<std::uint32_t, std::uint64_t>, std::string> stored;
    std::set<std::string> ids;
    for (std::uint32_t p = 0; p < info->config.partitions; ++p) {
      std::uint64_t expect = 0;
      for (;;) {
        storage::read_request rr;
        rr.topic = "crash";
        rr.partition = p;
        rr.from_offset = expect;
        rr.max_messages = 5000;
        rr.max_bytes = 16u << 20;
        auto r = s.read(rr);
        ASSERT_TRUE(r) << r.error().message;
        if (r.value().messages.empty()) break;
        for (auto& m : r.value().messages) {
          ASSERT_EQ(m.offset(), expect) << "offsets not dense in partition " << p;
          ++expect;
          const std::string id = to_hex(m.id());
          EXPECT_TRUE(ids.insert(id).second) << "id stored twice: " << id;
          stored[{p, m.offset()}] = id;
        }
      }
      EXPECT_EQ(expect, info->partitions[p].next_offset);
    }
    for (auto& [id, a] : acked_) {
      auto it = stored.find({a.partition, a.offset});
      ASSERT_NE(it, stored.end()) << "acknowledged id " << id << " lost (partition " << a.partition << " offset "
                                  << a.offset << ")";
      if (it->second != id) {
        auto other = acked_.find(it->second);
        ADD_FAILURE() << "another message at the acknowledged position of " << id << " (partition " << a.partition
                      << " offset " << a.offset << "): " << it->second
                      << (other == acked_.end() ? " which was never acknowledged"
                                                : " acknowledged at offset " + std::to_string(other->second.offset));
      }
    }
    stored_total_ = stored.size();
  }

  // `rounds` kills, each after a random number of acknowledgements, the store checked after each.
  void kill_and_verify(int rounds) {
    std::mt19937 rng(std::random_device{}());
    for (int round = 0; round < rounds; ++round) {
      // A sample of ids acknowledged so far, to be re-appended by the next child.
      const fs::path prior = dir_ / "prior.txt";
      {
        std::ofstream out(prior);
        std::size_t i = 0;
        for (auto& [id, _] : acked_) {
          if (i++ % 97 == 0) out << id << "\n";
        }
      }
      const std::size_t kill_after = 1 + rng() % 3000;
      ASSERT_NO_FATAL_FAILURE(run_child_and_kill(kill_after, prior)) << "round " << round;
      ASSERT_NO_FATAL_FAILURE(verify_store()) << "round " << round;
    }
    EXPECT_GT(acked_.size(), 20u);
    EXPECT_GT(dups_checked_, 0u);
    RecordProperty("acknowledged", static_cast<int>(acked_.size()));
    RecordProperty("stored", static_cast<int>(stored_total_));
  }

  long long fsync_interval_us_ = 0;
  fs::path dir_;
  std::map<std::string, acked> acked_;
  std::size_t dups_checked_ = 0;
  std::size_t stored_total_ = 0;
};

// 20 rounds in `make test`; the soak run (`make soak`) sets TXMQ_CRASH_ROUNDS higher.
int rounds_from_env(int fallback) {
  const char* env = std::getenv("TXMQ_CRASH_ROUNDS");
  return env ? std::max(1, std::atoi(env)) : fallback;
}

TEST_F(crash_test, acknowledged_appends_survive_sigkill_twenty_times) { kill_and_verify(rounds_from_env(20)); }

// The syncer waits out the interval while groups pile up behind it, then makes them all durable
// with one fsync: a kill during the wait must lose only what was never acknowledged.
TEST_F(crash_test, acknowledged_appends_survive_sigkill_with_fsyncs_spaced) {
  fsync_interval_us_ = 2000;
  kill_and_verify(rounds_from_env(10));
}

}  // namespace
