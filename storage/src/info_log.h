#pragma once

// RocksDB's info LOG, written so that a full disk cannot end the process.
//
// RocksDB's own info logger (EnvLogger, 7.8) writes through a WritableFileWriter. Once one of
// its appends fails (ENOSPC on a full data disk), the writer remembers the error and the next
// append runs `assert(sync_without_flush_called_)`: Debian builds RocksDB with assertions on,
// so the broker aborted at the second log line after the disk filled (the first comes from the
// error handler reporting the failed WAL write) — the client saw its connection end with no
// answer instead of STORE_UNAVAILABLE. This logger appends to the same file (<dir>/LOG, the
// previous one kept as LOG.old.<micros> like RocksDB does, which purges beyond
// keep_log_file_num) with stdio and drops a line it cannot write: the LOG is for diagnosis,
// never worth a crash.

#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>

#include <rocksdb/env.h>

namespace txmq::storage::detail {

class info_log final : public rocksdb::Logger {
 public:
  // Opens <dir>/LOG for appending after moving an existing one aside. nullptr when it cannot be
  // opened (the caller then leaves RocksDB its default logger).
  static std::shared_ptr<info_log> open(const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    const fs::path log = dir / "LOG";
    std::error_code ec;
    if (fs::exists(log, ec)) {
      timeval tv{};
      ::gettimeofday(&tv, nullptr);
      const auto micros = static_cast<long long>(tv.tv_sec) * 1'000'000 + tv.tv_usec;
      fs::rename(log, dir / ("LOG.old." + std::to_string(micros)), ec);
    }
    std::FILE* f = std::fopen(log.c_str(), "ae");
    if (!f) return nullptr;
    return std::shared_ptr<info_log>(new info_log(f));
  }

  ~info_log() override {
    std::lock_guard lock(mutex_);
    if (file_) std::fclose(file_);
    file_ = nullptr;
  }

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char line[1024];
    timeval tv{};
    ::gettimeofday(&tv, nullptr);
    std::tm t{};
    ::localtime_r(&tv.tv_sec, &t);
    int n = std::snprintf(line, sizeof line, "%04d/%02d/%02d-%02d:%02d:%02d.%06ld ", t.tm_year + 1900, t.tm_mon + 1,
                          t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, static_cast<long>(tv.tv_usec));
    if (n < 0) return;
    va_list copy;
    va_copy(copy, ap);
    const int m = std::vsnprintf(line + n, sizeof line - static_cast<std::size_t>(n), format, copy);
    va_end(copy);
    if (m < 0) return;
    std::size_t len = std::min(sizeof line - 1, static_cast<std::size_t>(n) + static_cast<std::size_t>(m));
    std::lock_guard lock(mutex_);
    if (!file_) return;
    // Errors (a full disk) lose this line only; the stream's error flag is cleared for the next.
    std::fwrite(line, 1, len, file_);
    if (len == 0 || line[len - 1] != '\n') std::fputc('\n', file_);
    std::fflush(file_);
    std::clearerr(file_);
  }

 private:
  explicit info_log(std::FILE* f) : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL), file_(f) {}

  std::mutex mutex_;
  std::FILE* file_;
};

}  // namespace txmq::storage::detail
