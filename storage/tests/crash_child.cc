// Child process of crash_test: appends batches through the group committer as fast as it can
// and writes one line per acknowledged message to stdout ("ack <id-hex> <partition> <offset>").
// Before that it re-appends the ids listed in argv[2] (acknowledged by earlier runs) and writes
// "dup <id-hex> <partition> <offset> <0|1>" for each, so the parent can check the dedupe index.
// argv[3], optional: store_options::min_fsync_interval in microseconds (fsyncs spaced, many
// groups waiting for one). It never exits by itself: the parent kills it with SIGKILL.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "txmq/storage/store.h"

namespace {

std::string hex(std::string_view raw) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

// One write(2) per line: lines up to PIPE_BUF never interleave, and nothing sits in a buffer
// that SIGKILL would throw away after the ack was counted.
void emit(const std::string& line) {
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    auto n = ::write(1, p, left);
    if (n <= 0) std::_Exit(3);
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace txmq;
  if (argc < 3) return 2;
  storage::store_options options;
  options.dir = argv[1];
  if (argc > 3) options.min_fsync_interval = std::chrono::microseconds(std::stoll(argv[3]));
  auto opened = storage::open_store(options);
  if (!opened) {
    std::cerr << "open failed: " << opened.error() << "\n";
    return 4;
  }
  auto store = std::move(opened.value());

  std::ifstream prior(argv[2]);
  std::string hexid;
  while (prior >> hexid) {
    std::string raw;
    for (std::size_t i = 0; i + 1 < hexid.size(); i += 2) raw.push_back(static_cast<char>(std::stoi(hexid.substr(i, 2), nullptr, 16)));
    storage::append_request req;
    req.topic = "crash";
    req.auto_create_partitions = 4;
    v1::Message m;
    m.set_id(raw);
    m.set_body("retry");
    req.messages.push_back(m);
    auto r = storage::call_sync<storage::append_result>([&](auto done) { store->append(req, done); });
    if (!r) return 5;
    auto& pos = r.value().positions[0];
    emit("dup " + hexid + " " + std::to_string(pos.partition) + " " + std::to_string(pos.offset) + " " +
         (pos.duplicate ? "1" : "0") + "\n");
  }

  // Four writer threads, each with a few appends in flight, so commit groups hold many requests.
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937 rng(static_cast<unsigned>(w * 7919 + ::getpid()));
      std::atomic<int> in_flight{0};
      for (;;) {
        while (in_flight.load() >= 8) std::this_thread::yield();
        storage::append_request req;
        req.topic = "crash";
        req.auto_create_partitions = 4;
        const int n = 1 + static_cast<int>(rng() % 20);
        for (int i = 0; i < n; ++i) {
          v1::Message m;
          m.set_id(std::string(protocol::uuid::make_v7().raw()));
          if (rng() % 2) m.set_key("k" + std::to_string(rng() % 16));
          m.set_body(std::string(64 + rng() % 200, static_cast<char>('a' + i % 26)));
          req.messages.push_back(std::move(m));
        }
        std::vector<std::string> ids;
        for (auto& m : req.messages) ids.push_back(hex(m.id()));
        ++in_flight;
        store->append(std::move(req), [ids = std::move(ids), &in_flight](result<storage::append_result> r) {
          if (!r) std::_Exit(6);
          std::string lines;
          for (std::size_t i = 0; i < ids.size(); ++i) {
            auto& pos = r.value().positions[i];
            lines += "ack " + ids[i] + " " + std::to_string(pos.partition) + " " + std::to_string(pos.offset) + "\n";
          }
          emit(lines);
          --in_flight;
        });
      }
    });
  }
  for (auto& t : writers) t.join();
}
