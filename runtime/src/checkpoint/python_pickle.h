#pragma once
// The files Python's torch.save writes and reads (a zip holding data.pkl and data/<key>
// storages), for checkpoints in Accelerate's layout. libtorch's own pair cannot be used as is:
// torch::pickle_load stops at the first integer wider than 8 bytes or of 5 bytes (Python's
// `random.getstate()` is full of them) and at any global it does not know (NumPy's arrays), and
// torch::pickle_save tags every dict with `torch.jit._pickle.restore_type_tag`, which
// `torch.load(weights_only=True)` (what Accelerate's load_state uses) refuses.
#include <ATen/core/ivalue.h>

#include <string>

namespace acc::detail {

/// Reads a torch.save file into IValues: dicts (any keys) become GenericDicts in file order,
/// lists GenericLists, tuples Tuples, str and bytes strings, tensors CPU tensors, NumPy arrays
/// tensors of their dtype. Any other Python object becomes the string "<python object
/// module.name>": the caller decides whether it needed it. CheckpointError naming the file when
/// it is not a torch.save zip or its pickle is malformed. The bytes are verified against the
/// checkpoint's checksums when it has them.
c10::IValue read_torch_save(const std::string& path);

/// Writes `value` as torch.save does, without type tags: dicts, lists, tuples, ints, floats,
/// bools, None, strings and CPU or device tensors (written from the CPU), readable by
/// torch.load(weights_only=True).
void write_torch_save(const c10::IValue& value, const std::string& path);

/// A GenericDict with Any keys and values, as Python's dicts are.
c10::impl::GenericDict python_dict();
/// A GenericList of Any, as Python's lists are (typed lists would be pickled as jit globals).
c10::impl::GenericList python_list();

/// The string read_torch_save gives an object of class `qualified_name`.
std::string python_object_marker(const std::string& qualified_name);

}  // namespace acc::detail
