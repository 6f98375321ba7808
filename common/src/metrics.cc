#include "txmq/common/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <variant>

namespace txmq::common {

using callback = std::function<double()>;
// shared_ptr so that render() can work on a snapshot outside the lock while a series is
// removed concurrently.
using series_value = std::variant<std::shared_ptr<counter>, std::shared_ptr<gauge>,
                                  std::shared_ptr<histogram>, std::shared_ptr<const callback>>;

namespace detail {
struct metric_family {
  std::string name;
  std::string help;
  metric_type type = metric_type::counter;
  std::vector<double> bounds;  // histograms only
  std::map<label_set, series_value> series;
  // Set instead of `series` for a family computed by one function (add_gauge_collector).
  std::shared_ptr<const std::function<metrics_registry::collected_series()>> collector;
};
}  // namespace detail

namespace {

bool is_metric_name(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool is_label_name(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

label_set canonical_labels(std::string_view metric, label_set labels, metric_type type) {
  std::sort(labels.begin(), labels.end());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const auto& name = labels[i].first;
    if (!is_label_name(name)) {
      throw std::invalid_argument("metric " + std::string(metric) + ": invalid label name '" +
                                  name + "'");
    }
    if (type == metric_type::histogram && name == "le") {
      throw std::invalid_argument("metric " + std::string(metric) +
                                  ": label 'le' is reserved for histogram buckets");
    }
    if (i > 0 && labels[i - 1].first == name) {
      throw std::invalid_argument("metric " + std::string(metric) + ": label '" + name +
                                  "' given twice");
    }
  }
  return labels;
}

std::string_view type_name(metric_type type) {
  switch (type) {
    case metric_type::counter:
      return "counter";
    case metric_type::gauge:
      return "gauge";
    case metric_type::histogram:
      return "histogram";
  }
  return "untyped";
}

void append_escaped_help(std::string& out, std::string_view text) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void append_escaped_label_value(std::string& out, std::string_view text) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[64];
  // Integral values print without exponent or fraction, as other Prometheus clients do.
  if (v == std::trunc(v) && std::fabs(v) < 1e15) {
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(v));
    out.append(buf, end);
    return;
  }
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  out.append(buf, end);
}

void append_number(std::string& out, std::uint64_t v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

// name{a="1",b="2"} or name{a="1",le="0.5"}: `extra` is appended after the series' labels.
void append_series_name(std::string& out, std::string_view name, std::string_view suffix,
                        const label_set& labels, const std::pair<std::string, std::string>* extra) {
  out += name;
  out += suffix;
  if (labels.empty() && extra == nullptr) return;
  out += '{';
  bool first = true;
  const auto add = [&](const std::string& key, const std::string& value) {
    if (!first) out += ',';
    first = false;
    out += key;
    out += "=\"";
    append_escaped_label_value(out, value);
    out += '"';
  };
  for (const auto& [key, value] : labels) add(key, value);
  if (extra != nullptr) add(extra->first, extra->second);
  out += '}';
}

std::string bound_text(double bound) {
  std::string out;
  append_number(out, bound);
  return out;
}

}  // namespace

histogram::histogram(std::span<const double> upper_bounds)
    : bounds_(upper_bounds.begin(), upper_bounds.end()),
      buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(upper_bounds.size() + 1)) {
  if (bounds_.empty()) throw std::invalid_argument("histogram: no buckets");
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1])) {
      throw std::invalid_argument("histogram: bucket bounds must be finite and ascending");
    }
  }
}

void histogram::observe(double value) noexcept {
  // Buckets are inclusive upper bounds (value <= le); NaN lands in the overflow bucket.
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  buckets_[static_cast<std::size_t>(it - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

histogram::snapshot histogram::collect() const {
  snapshot s;
  s.cumulative.reserve(bounds_.size() + 1);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(total);
  }
  s.count = total;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

metrics_registry::metrics_registry() = default;
metrics_registry::~metrics_registry() = default;

namespace {

// Finds or creates family `name` of `type` (mutex held by the caller).
detail::metric_family& family_for(
    std::map<std::string, std::unique_ptr<detail::metric_family>, std::less<>>& families,
    std::string_view name, std::string_view help, metric_type type,
    std::span<const double> bounds) {
  if (!name.starts_with("txmq_") || !is_metric_name(name)) {
    throw std::invalid_argument("metric name '" + std::string(name) +
                                "': must match [a-zA-Z_:][a-zA-Z0-9_:]* and start with txmq_");
  }
  auto it = families.find(name);
  if (it == families.end()) {
    auto f = std::make_unique<detail::metric_family>();
    f->name = std::string(name);
    f->help = std::string(help);
    f->type = type;
    f->bounds.assign(bounds.begin(), bounds.end());
    it = families.emplace(f->name, std::move(f)).first;
    return *it->second;
  }
  auto& f = *it->second;
  if (f.type != type) {
    throw std::invalid_argument("metric '" + std::string(name) + "' is already a " +
                                std::string(type_name(f.type)) + ", not a " +
                                std::string(type_name(type)));
  }
  if (type == metric_type::histogram && !std::equal(f.bounds.begin(), f.bounds.end(),
                                                    bounds.begin(), bounds.end())) {
    throw std::invalid_argument("histogram '" + std::string(name) +
                                "' is already registered with other buckets");
  }
  return f;
}

void refuse_if_collector(const detail::metric_family& f) {
  if (f.collector) {
    throw std::invalid_argument("metric '" + f.name + "': this family is computed by a collector");
  }
}

template <class T, class Make>
T& series_for(detail::metric_family& f, label_set labels, Make make) {
  refuse_if_collector(f);
  auto [it, inserted] = f.series.try_emplace(std::move(labels));
  if (inserted) {
    try {
      it->second = make();
    } catch (...) {
      f.series.erase(it);
      throw;
    }
  }
  auto* held = std::get_if<std::shared_ptr<T>>(&it->second);
  if (held == nullptr) {
    // The same family mixes objects and callbacks only if the caller asked for both.
    throw std::invalid_argument("metric '" + f.name +
                                "': this series is registered as a callback");
  }
  return **held;
}

}  // namespace

counter& metrics_registry::add_counter(std::string_view name, std::string_view help,
                                       label_set labels) {
  auto canonical = canonical_labels(name, std::move(labels), metric_type::counter);
  std::lock_guard lock(mutex_);
  auto& f = family_for(families_, name, help, metric_type::counter, {});
  return series_for<counter>(f, std::move(canonical),
                             [] { return series_value(std::make_shared<counter>()); });
}

gauge& metrics_registry::add_gauge(std::string_view name, std::string_view help,
                                   label_set labels) {
  auto canonical = canonical_labels(name, std::move(labels), metric_type::gauge);
  std::lock_guard lock(mutex_);
  auto& f = family_for(families_, name, help, metric_type::gauge, {});
  return series_for<gauge>(f, std::move(canonical),
                           [] { return series_value(std::make_shared<gauge>()); });
}

histogram& metrics_registry::add_histogram(std::string_view name, std::string_view help,
                                           std::span<const double> upper_bounds,
                                           label_set labels) {
  auto canonical = canonical_labels(name, std::move(labels), metric_type::histogram);
  // Checks the bounds before the family remembers them.
  auto fresh = std::make_shared<histogram>(upper_bounds);
  std::lock_guard lock(mutex_);
  auto& f = family_for(families_, name, help, metric_type::histogram, upper_bounds);
  return series_for<histogram>(f, std::move(canonical),
                               [&] { return series_value(std::move(fresh)); });
}

void metrics_registry::add_gauge_callback(std::string_view name, std::string_view help,
                                          label_set labels, std::function<double()> read) {
  add_callback(metric_type::gauge, name, help, std::move(labels), std::move(read));
}

void metrics_registry::add_counter_callback(std::string_view name, std::string_view help,
                                            label_set labels, std::function<double()> read) {
  add_callback(metric_type::counter, name, help, std::move(labels), std::move(read));
}

void metrics_registry::add_callback(metric_type type, std::string_view name,
                                    std::string_view help, label_set labels,
                                    std::function<double()> read) {
  auto canonical = canonical_labels(name, std::move(labels), type);
  auto value = std::make_shared<const callback>(std::move(read));
  series_value previous;  // an old callback's captures are destroyed outside the lock
  std::lock_guard lock(mutex_);
  auto& f = family_for(families_, name, help, type, {});
  refuse_if_collector(f);
  auto [it, inserted] = f.series.try_emplace(std::move(canonical));
  if (!inserted) {
    if (!std::holds_alternative<std::shared_ptr<const callback>>(it->second)) {
      throw std::invalid_argument("metric '" + f.name +
                                  "': this series is already registered as an object");
    }
    previous = std::move(it->second);
  }
  it->second = std::move(value);
}

void metrics_registry::add_gauge_collector(std::string_view name, std::string_view help,
                                           std::function<collected_series()> collect) {
  auto value = std::make_shared<const std::function<collected_series()>>(std::move(collect));
  std::shared_ptr<const std::function<collected_series()>> previous;  // destroyed outside the lock
  std::lock_guard lock(mutex_);
  auto& f = family_for(families_, name, help, metric_type::gauge, {});
  if (!f.series.empty()) {
    throw std::invalid_argument("metric '" + f.name + "': this family already has series");
  }
  previous = std::exchange(f.collector, std::move(value));
}

bool metrics_registry::remove_collector(std::string_view name) {
  std::unique_ptr<detail::metric_family> removed;  // its collector is destroyed outside the lock
  std::lock_guard lock(mutex_);
  const auto f = families_.find(name);
  if (f == families_.end() || !f->second->collector) return false;
  removed = std::move(f->second);
  families_.erase(f);
  return true;
}

bool metrics_registry::remove(std::string_view name, const label_set& labels) {
  label_set canonical = labels;
  std::sort(canonical.begin(), canonical.end());
  series_value removed;  // a callback's captures are destroyed outside the lock
  std::unique_ptr<detail::metric_family> removed_family;
  std::lock_guard lock(mutex_);
  const auto f = families_.find(name);
  if (f == families_.end()) return false;
  const auto s = f->second->series.find(canonical);
  if (s == f->second->series.end()) return false;
  removed = std::move(s->second);
  f->second->series.erase(s);
  if (f->second->series.empty()) {
    removed_family = std::move(f->second);
    families_.erase(f);
  }
  return true;
}

std::string metrics_registry::render() const {
  std::vector<detail::metric_family> families;
  {
    std::lock_guard lock(mutex_);
    families.reserve(families_.size());
    for (const auto& [name, f] : families_) families.push_back(*f);
  }

  std::string out;
  for (const auto& f : families) {
    std::string body;
    if (f.collector) {
      collected_series collected;
      try {
        collected = (*f.collector)();
      } catch (...) {
        continue;  // one failing source must not break the whole scrape
      }
      for (auto& [labels, v] : collected) std::sort(labels.begin(), labels.end());
      std::sort(collected.begin(), collected.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& [labels, v] : collected) {
        const bool valid = std::all_of(labels.begin(), labels.end(), [](const auto& l) { return is_label_name(l.first); }) &&
                           std::adjacent_find(labels.begin(), labels.end(), [](const auto& a, const auto& b) {
                             return a.first == b.first;
                           }) == labels.end();
        if (!valid) continue;
        append_series_name(body, f.name, "", labels, nullptr);
        body += ' ';
        append_number(body, v);
        body += '\n';
      }
    }
    for (const auto& [labels, value] : f.series) {
      if (const auto* c = std::get_if<std::shared_ptr<counter>>(&value)) {
        append_series_name(body, f.name, "", labels, nullptr);
        body += ' ';
        append_number(body, (*c)->value());
        body += '\n';
      } else if (const auto* g = std::get_if<std::shared_ptr<gauge>>(&value)) {
        append_series_name(body, f.name, "", labels, nullptr);
        body += ' ';
        append_number(body, (*g)->value());
        body += '\n';
      } else if (const auto* h = std::get_if<std::shared_ptr<histogram>>(&value)) {
        const auto snap = (*h)->collect();
        const auto& bounds = (*h)->upper_bounds();
        for (std::size_t i = 0; i <= bounds.size(); ++i) {
          const std::pair<std::string, std::string> le{
              "le", i < bounds.size() ? bound_text(bounds[i]) : std::string("+Inf")};
          append_series_name(body, f.name, "_bucket", labels, &le);
          body += ' ';
          append_number(body, snap.cumulative[i]);
          body += '\n';
        }
        append_series_name(body, f.name, "_sum", labels, nullptr);
        body += ' ';
        append_number(body, snap.sum);
        body += '\n';
        append_series_name(body, f.name, "_count", labels, nullptr);
        body += ' ';
        append_number(body, snap.count);
        body += '\n';
      } else if (const auto* cb = std::get_if<std::shared_ptr<const callback>>(&value)) {
        double v = 0;
        try {
          v = (**cb)();
        } catch (...) {
          continue;  // one failing source must not break the whole scrape
        }
        append_series_name(body, f.name, "", labels, nullptr);
        body += ' ';
        append_number(body, v);
        body += '\n';
      }
    }
    out += "# HELP ";
    out += f.name;
    out += ' ';
    append_escaped_help(out, f.help);
    out += "\n# TYPE ";
    out += f.name;
    out += ' ';
    out += type_name(f.type);
    out += '\n';
    out += body;
  }
  return out;
}

}  // namespace txmq::common
