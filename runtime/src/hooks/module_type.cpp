#include "hooks/module_type.h"

namespace acc::detail {

namespace {
// The bare class name: no namespace, no "Impl" suffix.
std::string strip(std::string name) {
  const auto colon = name.rfind("::");
  if (colon != std::string::npos) name = name.substr(colon + 2);
  if (name.size() > 4 && name.compare(name.size() - 4, 4, "Impl") == 0) name.resize(name.size() - 4);
  return name;
}
}  // namespace

bool module_type_matches(const std::string& name, const std::string& wanted) {
  return name == wanted || strip(name) == strip(wanted);
}

}  // namespace acc::detail
