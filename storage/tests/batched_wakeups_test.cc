// txmq/storage/batched_wakeups.h: requests submitted while a thread holds the writer's wake-up
// are written, in their order, once the scope ends; nested scopes wake at the outermost end.

#include "txmq/storage/batched_wakeups.h"

#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

using ::testing::ElementsAre;

class batched_wakeups_test : public store_test {
 protected:
  void SetUp() override {
    // The writer's periodic wake-up (free-space check) must not be what finishes the requests.
    tweak_options = [](store_options& o) { o.disk_check_interval = std::chrono::hours(1); };
    store_test::SetUp();
  }

  // Appends `body` to t without waiting; the offset lands in `offsets` in completion order.
  void append_async(const std::string& body, countdown& done, std::vector<std::uint64_t>& offsets, std::mutex& mu) {
    append_request req;
    req.topic = "t";
    req.messages.push_back(make_message(body));
    store_->append(std::move(req), [&](result<append_result> r) {
      {
        std::lock_guard lk(mu);
        offsets.push_back(r ? r.value().positions.at(0).offset : ~0ull);
      }
      done.done();
    });
  }
};

TEST_F(batched_wakeups_test, requests_held_in_a_scope_are_written_in_order_when_it_ends) {
  create_topic("t", 1);
  countdown done(3);
  std::vector<std::uint64_t> offsets;
  std::mutex mu;
  {
    batched_wakeups held;
    append_async("0", done, offsets, mu);
    append_async("1", done, offsets, mu);
    append_async("2", done, offsets, mu);
  }
  ASSERT_TRUE(done.wait_for(std::chrono::seconds(20))) << "the writer was not woken when the scope ended";
  EXPECT_THAT(offsets, ElementsAre(0u, 1u, 2u));
  auto r = read("t", 0);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[2].body(), "2");
}

TEST_F(batched_wakeups_test, nested_scopes_wake_the_writer_at_the_outermost_end) {
  create_topic("t", 1);
  countdown done(2);
  std::vector<std::uint64_t> offsets;
  std::mutex mu;
  {
    batched_wakeups outer;
    {
      batched_wakeups inner;
      append_async("0", done, offsets, mu);
    }
    append_async("1", done, offsets, mu);
  }
  ASSERT_TRUE(done.wait_for(std::chrono::seconds(20))) << "the writer was not woken when the outer scope ended";
  EXPECT_THAT(offsets, ElementsAre(0u, 1u));
  // Without a scope every request wakes the writer itself, as before.
  countdown one(1);
  append_async("2", one, offsets, mu);
  EXPECT_TRUE(one.wait_for(std::chrono::seconds(20)));
}

}  // namespace
}  // namespace txmq::storage::test
