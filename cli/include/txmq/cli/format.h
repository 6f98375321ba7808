#pragma once

// Text helpers of the txmq CLI: aligned tables (buffered, or streamed with columns that only
// grow), UTF-8 validation, control-character escaping and time/duration text.
// Pure functions and small value types; not thread-safe beyond that.

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace txmq::cli {

// Columns separated by two spaces, each padded to its widest cell, the last one unpadded.
// Buffered: add rows, then print() once. Streaming: write_row() prints at once, padding to
// the widest cell seen so far (the header line is printed before the first row).
class table {
 public:
  explicit table(std::vector<std::string> header);

  void add(std::vector<std::string> row);
  void print(std::ostream& out) const;

  void write_row(std::ostream& out, const std::vector<std::string>& row);

  [[nodiscard]] std::size_t rows() const noexcept { return rows_.size(); }

 private:
  void widen(const std::vector<std::string>& row);
  void write_line(std::ostream& out, const std::vector<std::string>& row) const;

  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::size_t> widths_;
  bool header_written_ = false;
};

[[nodiscard]] bool is_valid_utf8(std::string_view bytes) noexcept;

// For one line of human output: \n, \r, \t as such, other control bytes as \xNN.
[[nodiscard]] std::string escape_control(std::string_view text);

// Unix milliseconds as "2024-05-01T12:00:00.123Z"; 0 as "-".
[[nodiscard]] std::string iso_time(std::int64_t unix_ms);
// 86400000 as "1d", 90000 as "90s", 1500 as "1500ms", 0 as "-".
[[nodiscard]] std::string duration_text(std::int64_t ms);

// "k1=v1,k2=v2"; "-" when empty. Header text is control-escaped.
[[nodiscard]] std::string headers_text(const std::map<std::string, std::string>& headers);

}  // namespace txmq::cli
