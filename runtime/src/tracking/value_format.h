#pragma once
// Text encodings shared by the JSONL and CSV trackers.
#include <string>
#include <string_view>
#include <vector>

#include <acc/tracker.h>

namespace acc::detail {

/// Shortest text that reads back as the same double ("0.1", "1e-05", "3.0").
std::string format_double(double value);
/// A JSON string literal, quotes included (UTF-8 passes through; control characters escaped).
std::string json_string(std::string_view text);
/// A JSON value: numbers, true/false, strings; non-finite doubles become null.
std::string json_value(const TrackerValue& value);
/// A CSV field (RFC 4180): quoted when it holds a comma, quote, CR or LF.
std::string csv_field(std::string_view text);
std::string csv_value(const TrackerValue& value);
/// Splits the first CSV record of `text` into fields; sets `consumed` to its length with the
/// line break. Used to continue an existing metrics.csv.
std::vector<std::string> parse_csv_record(std::string_view text, size_t& consumed);
/// Seconds since the Unix epoch, as TensorBoard's and JSONL's wall_time.
double unix_time();

}  // namespace acc::detail
