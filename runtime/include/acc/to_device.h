#pragma once
// acc::to_device: the one customization point that moves a batch to a device (Accelerate's
// send_to_device). Overloads cover tensors, torch::data::Example, std::vector, std::pair,
// std::tuple, string-keyed std::map/std::unordered_map and std::optional, nested arbitrarily;
// strings and arithmetic values pass through unchanged.
//
// A batch type of your own gets an overload found by argument-dependent lookup, declared in the
// namespace of the type:
//
//   namespace my {
//   struct Batch { torch::Tensor tokens, mask; std::vector<std::string> ids; };
//   inline Batch to_device(const Batch& b, const torch::Device& device, bool non_blocking) {
//     return {acc::to_device(b.tokens, device, non_blocking),
//             acc::to_device(b.mask, device, non_blocking), b.ids};
//   }
//   }  // namespace my
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/data/example.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace acc {

inline at::Tensor to_device(const at::Tensor& tensor, const c10::Device& device,
                            bool non_blocking = false) {
  // Checked first: a no-op .to() still costs a dispatcher round trip per tensor and batch.
  if (!tensor.defined() || tensor.device() == device) return tensor;
  // A non-blocking copy from pageable memory is synchronous; stage it in pinned memory (the host
  // allocator keeps the staging buffer alive until the copy has finished).
  if (non_blocking && device.is_cuda() && tensor.is_cpu() && !tensor.is_pinned()) {
    return tensor.pin_memory().to(device, non_blocking);
  }
  return tensor.to(device, non_blocking);
}
/// Example<Tensor, NoTarget> (torch::data::TensorExample) has no target member.
inline torch::data::TensorExample to_device(const torch::data::TensorExample& example,
                                            const c10::Device& device, bool non_blocking = false) {
  return torch::data::TensorExample(to_device(example.data, device, non_blocking));
}
inline std::string to_device(const std::string& text, const c10::Device&, bool = false) {
  return text;
}
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
T to_device(T value, const c10::Device&, bool = false) {
  return value;
}
// Declared before any is defined so that nested containers find each other.
template <typename Data, typename Target>
torch::data::Example<Data, Target> to_device(const torch::data::Example<Data, Target>& example,
                                             const c10::Device& device, bool non_blocking = false);
template <typename T>
std::vector<T> to_device(const std::vector<T>& items, const c10::Device& device,
                         bool non_blocking = false);
template <typename A, typename B>
std::pair<A, B> to_device(const std::pair<A, B>& items, const c10::Device& device,
                          bool non_blocking = false);
template <typename... Ts>
std::tuple<Ts...> to_device(const std::tuple<Ts...>& items, const c10::Device& device,
                            bool non_blocking = false);
template <typename T>
std::map<std::string, T> to_device(const std::map<std::string, T>& items,
                                   const c10::Device& device, bool non_blocking = false);
template <typename T>
std::unordered_map<std::string, T> to_device(const std::unordered_map<std::string, T>& items,
                                             const c10::Device& device, bool non_blocking = false);
template <typename T>
std::optional<T> to_device(const std::optional<T>& item, const c10::Device& device,
                           bool non_blocking = false);

namespace detail {
template <typename T, typename = void>
struct has_to_device : std::false_type {};
template <typename T>
struct has_to_device<T, std::void_t<decltype(to_device(std::declval<const T&>(),
                                                       std::declval<const c10::Device&>(), false))>>
    : std::true_type {};

/// to_device with a readable compile-time error when no overload exists.
template <typename T>
auto place(const T& value, const c10::Device& device, bool non_blocking) {
  static_assert(has_to_device<T>::value,
                "acc::to_device has no overload for this batch type. Declare one in the "
                "namespace of your type: `YourBatch to_device(const YourBatch&, const "
                "torch::Device&, bool non_blocking)` that moves each tensor member with "
                "acc::to_device (see acc/to_device.h), or pass device_placement(false).");
  if constexpr (has_to_device<T>::value) {
    return to_device(value, device, non_blocking);
  } else {
    return value;
  }
}
}  // namespace detail

template <typename Data, typename Target>
torch::data::Example<Data, Target> to_device(const torch::data::Example<Data, Target>& example,
                                             const c10::Device& device, bool non_blocking) {
  return {detail::place(example.data, device, non_blocking),
          detail::place(example.target, device, non_blocking)};
}
template <typename T>
std::vector<T> to_device(const std::vector<T>& items, const c10::Device& device,
                         bool non_blocking) {
  std::vector<T> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(detail::place(item, device, non_blocking));
  return out;
}
template <typename A, typename B>
std::pair<A, B> to_device(const std::pair<A, B>& items, const c10::Device& device,
                          bool non_blocking) {
  return {detail::place(items.first, device, non_blocking),
          detail::place(items.second, device, non_blocking)};
}
template <typename... Ts>
std::tuple<Ts...> to_device(const std::tuple<Ts...>& items, const c10::Device& device,
                            bool non_blocking) {
  return std::apply(
      [&](const auto&... item) {
        return std::tuple<Ts...>(detail::place(item, device, non_blocking)...);
      },
      items);
}
template <typename T>
std::map<std::string, T> to_device(const std::map<std::string, T>& items,
                                   const c10::Device& device, bool non_blocking) {
  std::map<std::string, T> out;
  for (const auto& [key, item] : items) out.emplace(key, detail::place(item, device, non_blocking));
  return out;
}
template <typename T>
std::unordered_map<std::string, T> to_device(const std::unordered_map<std::string, T>& items,
                                             const c10::Device& device, bool non_blocking) {
  std::unordered_map<std::string, T> out;
  for (const auto& [key, item] : items) out.emplace(key, detail::place(item, device, non_blocking));
  return out;
}
template <typename T>
std::optional<T> to_device(const std::optional<T>& item, const c10::Device& device,
                           bool non_blocking) {
  if (!item) return std::nullopt;
  return detail::place(*item, device, non_blocking);
}

namespace detail {
/// What the prepared loader does to each batch: moves it to `device` in place. A tensor, or an
/// Example of tensors, already there (every batch of a CPU run) is left as it is rather than
/// replaced by a copy of its handles, which costs reference-count traffic per batch.
template <typename T>
void place_in(T& batch, const c10::Device& device, bool non_blocking) {
  if constexpr (std::is_same_v<T, at::Tensor>) {
    if (batch.defined() && batch.device() != device) batch = to_device(batch, device, non_blocking);
  } else if constexpr (std::is_same_v<T, torch::data::Example<>>) {
    place_in(batch.data, device, non_blocking);
    place_in(batch.target, device, non_blocking);
  } else {
    batch = place(batch, device, non_blocking);
  }
}
}  // namespace detail

}  // namespace acc
