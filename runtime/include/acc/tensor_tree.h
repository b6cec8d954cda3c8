#pragma once
// Applies a function to every tensor in a nested structure (Accelerate's recursively_apply):
// tensors, std::vector, std::pair, std::tuple, string-keyed std::map/std::unordered_map and
// std::optional, nested arbitrarily. The structure is rebuilt with the results.
#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace acc {

template <typename F>
at::Tensor map_tensors(const at::Tensor& tensor, F&& fn) {
  return fn(tensor);
}
template <typename T, typename F>
std::vector<T> map_tensors(const std::vector<T>& items, F&& fn);
template <typename A, typename B, typename F>
std::pair<A, B> map_tensors(const std::pair<A, B>& items, F&& fn);
template <typename... Ts, typename F>
std::tuple<Ts...> map_tensors(const std::tuple<Ts...>& items, F&& fn);
template <typename T, typename F>
std::map<std::string, T> map_tensors(const std::map<std::string, T>& items, F&& fn);
template <typename T, typename F>
std::unordered_map<std::string, T> map_tensors(const std::unordered_map<std::string, T>& items,
                                               F&& fn);
template <typename T, typename F>
std::optional<T> map_tensors(const std::optional<T>& item, F&& fn);

template <typename T, typename F>
std::vector<T> map_tensors(const std::vector<T>& items, F&& fn) {
  std::vector<T> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(map_tensors(item, fn));
  return out;
}
template <typename A, typename B, typename F>
std::pair<A, B> map_tensors(const std::pair<A, B>& items, F&& fn) {
  return {map_tensors(items.first, fn), map_tensors(items.second, fn)};
}
template <typename... Ts, typename F>
std::tuple<Ts...> map_tensors(const std::tuple<Ts...>& items, F&& fn) {
  return std::apply([&](const auto&... item) { return std::tuple<Ts...>(map_tensors(item, fn)...); },
                    items);
}
template <typename T, typename F>
std::map<std::string, T> map_tensors(const std::map<std::string, T>& items, F&& fn) {
  std::map<std::string, T> out;
  for (const auto& [key, item] : items) out.emplace(key, map_tensors(item, fn));
  return out;
}
template <typename T, typename F>
std::unordered_map<std::string, T> map_tensors(const std::unordered_map<std::string, T>& items,
                                               F&& fn) {
  std::unordered_map<std::string, T> out;
  for (const auto& [key, item] : items) out.emplace(key, map_tensors(item, fn));
  return out;
}
template <typename T, typename F>
std::optional<T> map_tensors(const std::optional<T>& item, F&& fn) {
  if (!item) return std::nullopt;
  return map_tensors(*item, fn);
}

}  // namespace acc
