#include "ddp/bucket_plan.h"

#include <map>

namespace acc::detail {

std::vector<std::vector<size_t>> plan_buckets(const std::vector<BucketInput>& params, size_t cap_bytes,
                                              size_t first_cap_bytes) {
  struct Key {
    bool first_open = true;  // the key's first bucket has not closed yet
    std::vector<size_t> members;
    size_t bytes = 0;
  };
  std::map<std::string, Key> keys;

  std::vector<std::vector<size_t>> layout;
  for (size_t k = params.size(); k-- > 0;) {
    if (params[k].alone) {
      layout.push_back({k});
      continue;
    }
    auto& key = keys[params[k].key];
    key.members.push_back(k);
    key.bytes += params[k].bytes;
    if (key.bytes >= (key.first_open ? first_cap_bytes : cap_bytes)) {
      layout.push_back(std::move(key.members));
      key.members.clear();
      key.bytes = 0;
      key.first_open = false;
    }
  }
  for (auto& [name, key] : keys) {
    if (!key.members.empty()) layout.push_back(std::move(key.members));
  }
  return layout;
}

}  // namespace acc::detail
