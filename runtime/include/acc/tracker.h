#pragma once
// The tracker interface of acc (Accelerate's GeneralTracker) and the values it receives.
// Torch-free: AcceleratorOptions::log_with names trackers with LogWith.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace acc {

/// One hyperparameter or logged value: a boolean, an integer, a floating-point number or a
/// string. Implicit from any of them, so that `{{"lr", 1e-3}, {"batch", 64}}` builds a map.
class TrackerValue {
 public:
  using Variant = std::variant<bool, int64_t, double, std::string>;

  TrackerValue(bool value) : value_(value) {}  // NOLINT: implicit by design
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  TrackerValue(T value) : value_(static_cast<int64_t>(value)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  TrackerValue(T value) : value_(static_cast<double>(value)) {}  // NOLINT
  TrackerValue(const char* value) : value_(std::string(value)) {}  // NOLINT
  TrackerValue(std::string value) : value_(std::move(value)) {}    // NOLINT

  const Variant& variant() const { return value_; }
  bool is_string() const { return std::holds_alternative<std::string>(value_); }
  /// Booleans as 0/1, integers and floats as double. Throws for strings.
  double number() const;
  const std::string& string() const { return std::get<std::string>(value_); }

 private:
  Variant value_;
};

/// Name -> value, as Accelerate's `dict`s passed to init_trackers(config) and log(values).
using TrackerValues = std::map<std::string, TrackerValue>;

/// Accelerate's GeneralTracker: implement it to send logs anywhere, and pass an instance in
/// AcceleratorOptions::log_with. Methods run on the main process only, unless
/// main_process_only() is false (then on every process).
class GeneralTracker {
 public:
  virtual ~GeneralTracker() = default;
  /// The name get_tracker() finds it by ("tensorboard", "jsonl", "csv" for acc's own).
  virtual std::string name() const = 0;
  virtual bool main_process_only() const { return true; }
  /// Called by init_trackers before anything is stored or logged.
  virtual void start() {}
  /// The run's hyperparameters (init_trackers' config).
  virtual void store_init_configuration(const TrackerValues& /*config*/) {}
  /// One log call; `step` is absent when the caller gave none.
  virtual void log(const TrackerValues& values, std::optional<int64_t> step) = 0;
  /// Flush and close (end_training).
  virtual void finish() {}
};

/// What AcceleratorOptions::log_with accepts: "tensorboard", "jsonl", "csv", "all" (the three),
/// a user tracker (std::shared_ptr to a GeneralTracker), or a braced list of them.
class LogWith {
 public:
  LogWith() = default;
  LogWith(const char* name) : names_{name} {}   // NOLINT: implicit by design
  LogWith(std::string name) : names_{std::move(name)} {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_base_of_v<GeneralTracker, T>, int> = 0>
  LogWith(std::shared_ptr<T> tracker) : trackers_{std::move(tracker)} {}  // NOLINT
  LogWith(std::initializer_list<LogWith> items);

  const std::vector<std::string>& names() const { return names_; }
  const std::vector<std::shared_ptr<GeneralTracker>>& trackers() const { return trackers_; }
  bool empty() const { return names_.empty() && trackers_.empty(); }

 private:
  std::vector<std::string> names_;
  std::vector<std::shared_ptr<GeneralTracker>> trackers_;
};

}  // namespace acc
