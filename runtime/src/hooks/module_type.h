#pragma once
// Matching a module's type against a class name a user wrote: FSDP's TRANSFORMER_BASED_WRAP
// (transformer_cls_names_to_wrap) and device maps' no_split_module_classes. Python compares
// `type(module).__name__`; a C++ module's type is Module::name(), the demangled class, which carries
// the namespace and, for TORCH_MODULE types, the "Impl" suffix. Torch-free.
#include <string>

namespace acc::detail {

/// `name` (Module::name()) is `wanted`, with or without the namespace and the "Impl" suffix of
/// TORCH_MODULE types: "Block" matches "BlockImpl" and "ns::BlockImpl"; "Block" does not match
/// "BlockListImpl".
bool module_type_matches(const std::string& name, const std::string& wanted);

}  // namespace acc::detail
