#include "txmq/cli/format.h"
#include "txmq/common/units.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <ctime>

namespace txmq::cli {

table::table(std::vector<std::string> header) : header_(std::move(header)) {
  for (const auto& h : header_) widths_.push_back(h.size());
}

void table::widen(const std::vector<std::string>& row) {
  for (std::size_t i = 0; i < row.size() && i < widths_.size(); ++i) widths_[i] = std::max(widths_[i], row[i].size());
}

void table::add(std::vector<std::string> row) {
  widen(row);
  rows_.push_back(std::move(row));
}

void table::write_line(std::ostream& out, const std::vector<std::string>& row) const {
  std::string line;
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (i > 0) line += "  ";
    line += row[i];
    if (i + 1 < row.size() && i < widths_.size() && row[i].size() < widths_[i]) {
      line.append(widths_[i] - row[i].size(), ' ');
    }
  }
  out << line << '\n';
}

void table::print(std::ostream& out) const {
  write_line(out, header_);
  for (const auto& r : rows_) write_line(out, r);
}

void table::write_row(std::ostream& out, const std::vector<std::string>& row) {
  widen(row);
  if (!header_written_) {
    write_line(out, header_);
    header_written_ = true;
  }
  write_line(out, row);
}

bool is_valid_utf8(std::string_view bytes) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points above U+10FFFF are not UTF-8.
    static constexpr std::array<std::uint32_t, 5> k_min{0, 0, 0x80, 0x800, 0x10000};
    if (cp < k_min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string escape_control(std::string_view text) {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += k_hex[c >> 4];
      out += k_hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

std::string iso_time(std::int64_t unix_ms) {
  if (unix_ms == 0) return "-";
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[40];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char ms[8];
  std::snprintf(ms, sizeof ms, ".%03dZ", static_cast<int>(unix_ms % 1000));
  return std::string(buf, n) + ms;
}

std::string duration_text(std::int64_t ms) {
  return ms == 0 ? "-" : common::format_duration(std::chrono::milliseconds(ms));
}

std::string headers_text(const std::map<std::string, std::string>& headers) {
  if (headers.empty()) return "-";
  std::string out;
  for (const auto& [k, v] : headers) {
    if (!out.empty()) out += ',';
    out += escape_control(k) + "=" + escape_control(v);
  }
  return out;
}

}  // namespace txmq::cli
