#include "tracking/tensorboard_events.h"

#include <cstring>

#include "base/crc32c.h"

namespace acc::detail::tensorboard {

namespace {
// Protobuf wire format: the subset needed here.
class Proto {
 public:
  Proto& varint(int field, uint64_t value) {
    key(field, 0);
    put_varint(value);
    return *this;
  }
  Proto& float32(int field, float value) {
    key(field, 5);
    put_le(value);
    return *this;
  }
  Proto& float64(int field, double value) {
    key(field, 1);
    put_le(value);
    return *this;
  }
  Proto& bytes(int field, std::string_view value) {
    key(field, 2);
    put_varint(value.size());
    out_.append(value);
    return *this;
  }
  Proto& message(int field, const Proto& value) { return bytes(field, value.out_); }
  const std::string& str() const { return out_; }

 private:
  void key(int field, int wire_type) { put_varint((static_cast<uint64_t>(field) << 3) | wire_type); }
  void put_varint(uint64_t value) {
    while (value >= 0x80) {
      out_.push_back(static_cast<char>((value & 0x7F) | 0x80));
      value >>= 7;
    }
    out_.push_back(static_cast<char>(value));
  }
  template <typename T>
  void put_le(T value) {  // x86-64 and aarch64 are little-endian, as the wire format
    char raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    out_.append(raw, sizeof(T));
  }
  std::string out_;
};

constexpr int kDtypeFloat = 1;   // tensorboard.DataType.DT_FLOAT
constexpr int kDtypeString = 7;  // tensorboard.DataType.DT_STRING

std::string event_with_summary(const Proto& value, int64_t step, double wall_time) {
  Proto summary;
  summary.message(1, value);  // Summary.value
  Proto event;
  event.float64(1, wall_time).varint(2, static_cast<uint64_t>(step)).message(5, summary);
  return event.str();
}

Proto plugin_metadata(std::string_view plugin_name, std::string_view content) {
  Proto plugin_data;
  plugin_data.bytes(1, plugin_name);
  if (!content.empty()) plugin_data.bytes(2, content);
  Proto metadata;
  metadata.message(1, plugin_data);  // SummaryMetadata.plugin_data
  return metadata;
}

Proto protobuf_value(const TrackerValue& value) {  // google.protobuf.Value
  Proto out;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          out.varint(4, v ? 1 : 0);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out.bytes(3, v);
        } else {
          out.float64(2, static_cast<double>(v));
        }
      },
      value.variant());
  return out;
}
}  // namespace

std::string file_version_event(double wall_time) {
  Proto event;
  event.float64(1, wall_time).bytes(3, "brain.Event:2");
  return event.str();
}

std::string scalar_event(std::string_view tag, float value, int64_t step, double wall_time) {
  Proto summary_value;
  summary_value.bytes(1, tag).float32(2, value);
  return event_with_summary(summary_value, step, wall_time);
}

std::string text_event(std::string_view tag, std::string_view text, int64_t step,
                       double wall_time) {
  Proto dim;
  dim.varint(1, 1);
  Proto shape;
  shape.message(2, dim);
  Proto tensor;
  tensor.varint(1, kDtypeString).message(2, shape).bytes(8, text);
  Proto summary_value;
  summary_value.bytes(1, tag).message(9, plugin_metadata("text", {})).message(8, tensor);
  return event_with_summary(summary_value, step, wall_time);
}

std::string hparams_event(const TrackerValues& hparams, double wall_time) {
  Proto start_info;
  for (const auto& [name, value] : hparams) {
    Proto entry;  // map<string, Value> entry: key = 1, value = 2
    entry.bytes(1, name).message(2, protobuf_value(value));
    start_info.message(1, entry);
  }
  start_info.float64(5, wall_time);  // start_time_secs
  Proto plugin_data;                  // HParamsPluginData{version: 0, session_start_info}
  plugin_data.message(3, start_info);
  Proto tensor;
  tensor.varint(1, kDtypeFloat);
  Proto summary_value;
  summary_value.bytes(1, "_hparams_/session_start_info")
      .message(9, plugin_metadata("hparams", plugin_data.str()))
      .message(8, tensor);
  return event_with_summary(summary_value, 0, wall_time);
}

std::string tfrecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  const uint64_t length = data.size();
  char length_bytes[8];
  std::memcpy(length_bytes, &length, 8);
  const std::string_view length_view(length_bytes, 8);
  const auto append_u32 = [&](uint32_t value) {
    char raw[4];
    std::memcpy(raw, &value, 4);
    out.append(raw, 4);
  };
  out.append(length_view);
  append_u32(masked_crc32c(length_view));
  out.append(data);
  append_u32(masked_crc32c(data));
  return out;
}

}  // namespace acc::detail::tensorboard
