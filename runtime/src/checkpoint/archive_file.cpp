#include "checkpoint/archive_file.h"

#include <acc/errors.h>

#include "checkpoint/checksums.h"

namespace acc::detail {
namespace {
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }
}  // namespace

torch::serialize::InputArchive read_archive(const std::string& path, c10::Device device) {
  const std::string bytes = read_checkpoint_file(path);
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(bytes.data(), bytes.size(), device);
  } catch (const c10::Error&) {
    // libtorch's reasons can quote the file (record and type names from it): not repeated.
    throw CheckpointError("acc: checkpoint file '" + path + "' is not a libtorch archive acc can read: it is "
                          "damaged or was not written by save_state; load an earlier checkpoint");
  }
  return archive;
}

void throw_archive_error(const std::string& path, const c10::Error& error) {
  throw CheckpointError("acc: checkpoint file '" + path + "' does not hold what this program saves there (" +
                        first_line(error.what_without_backtrace()) +
                        "): it is damaged, or was saved by another program or version; load a checkpoint this "
                        "program saved");
}

}  // namespace acc::detail
