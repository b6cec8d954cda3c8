#pragma once
// acc's warnings and notes: a configuration that works, but probably not as the user meant. Each
// distinct message is reported once per process, and only on the local main process (the others
// would repeat it), to stderr unless the program installs a handler of its own.
#include <functional>
#include <string>

namespace acc {

/// Receives each warning: the whole line, such as "acc: warning: mixed_precision fp16 needs CUDA; ...".
using WarningHandler = std::function<void(const std::string& message)>;

/// Sends acc's warnings to `handler` instead of stderr; an empty handler silences them. Returns
/// the handler it replaces (the default one writes to stderr).
WarningHandler set_warning_handler(WarningHandler handler);

namespace detail {
/// Reports `message` (a whole line, "acc: warning: ..." or "acc: note: ...") through the handler:
/// once per process for each distinct message, and only on the local main process.
void warn(const std::string& message);
/// This process's local rank, set when the process joins its job (PartialState); until then
/// every process counts as a local main process.
void set_warning_local_rank(int local_rank);
}  // namespace detail

}  // namespace acc
