#pragma once
// Fake environments for tests: acc reads launch and ACCELERATE_* variables through an EnvLookup.
#include <map>
#include <string>

#include <acc/launch_info.h>

namespace acc::testing {

inline EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace acc::testing
