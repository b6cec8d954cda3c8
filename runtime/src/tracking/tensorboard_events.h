#pragma once
// TensorBoard event records, hand-encoded: the few protobuf messages acc writes (Event, Summary,
// TensorProto, hparams' SessionStartInfo, google.protobuf.Value) and TFRecord framing. No
// protobuf dependency; field numbers are those of tensorboard/compat/proto and plugins/hparams.
#include <cstdint>
#include <string>
#include <string_view>

#include <acc/tracker.h>

namespace acc::detail::tensorboard {

/// The first record of every event file: Event{file_version: "brain.Event:2"}.
std::string file_version_event(double wall_time);
/// Event{summary{value{tag, simple_value}}}: what TensorBoard's scalar dashboard reads.
std::string scalar_event(std::string_view tag, float value, int64_t step, double wall_time);
/// A string for the text dashboard (plugin "text", DT_STRING tensor of shape [1]).
std::string text_event(std::string_view tag, std::string_view text, int64_t step,
                       double wall_time);
/// hparams' session_start_info: the run's hyperparameters for the HPARAMS dashboard.
std::string hparams_event(const TrackerValues& hparams, double wall_time);

/// TFRecord framing: length (u64 LE), masked CRC32C of the length, data, masked CRC32C of data.
std::string tfrecord(std::string_view data);

}  // namespace acc::detail::tensorboard
