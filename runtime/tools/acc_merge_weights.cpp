// acc-merge-weights: merges the model shards of an FSDP SHARDED_STATE_DICT checkpoint into whole
// safetensors files (Accelerate's `accelerate merge-weights`). Exit codes: 0 merged, 1 the
// checkpoint could not be merged (the message says why), 2 usage error (including a CHECKPOINT_DIR that
// is missing or no directory, and an OUTPUT_DIR that is a file, FIFO or device).
#include <sys/stat.h>

#include <iostream>
#include <string>
#include <vector>

#include <acc/checkpointing.h>

namespace {

const char* kUsage =
    "usage: acc-merge-weights [-h] CHECKPOINT_DIR OUTPUT_DIR\n";
const char* kHelp =
    "\n"
    "Merge the model shards of a checkpoint saved by save_state under FSDP with\n"
    "FSDP_STATE_DICT_TYPE=SHARDED_STATE_DICT (model.shard-R-of-N.safetensors, one per\n"
    "rank) into whole files: OUTPUT_DIR/model.safetensors (model_1.safetensors, ... for\n"
    "further models). They load into an unsharded model (acc::load_checkpoint_in_model)\n"
    "or into Python (safetensors.torch.load_file), as `accelerate merge-weights`'s output does.\n"
    "acc's shards are not torch.distributed.checkpoint's (no .metadata): Python's\n"
    "dcp_to_torch_save and `accelerate merge-weights` cannot read them; each such\n"
    "checkpoint holds a README.txt pointing here.\n"
    "\n"
    "positional arguments:\n"
    "  CHECKPOINT_DIR  the directory save_state wrote (e.g. runs/x/checkpoints/checkpoint_3)\n"
    "  OUTPUT_DIR      where to write the merged files (created if missing)\n"
    "\n"
    "options:\n"
    "  -h, --help      show this help message and exit\n";

// The usage error for a CHECKPOINT_DIR or OUTPUT_DIR that cannot be one: a missing checkpoint, or
// a file, FIFO, device or socket at either name (told apart with stat, which opens nothing: a FIFO
// is named, never waited on). Empty when the argument can be used.
std::string bad_directory(const std::string& path, bool must_exist, const char* what) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return must_exist ? "'" + path + "' does not exist; name the " + std::string(what) : "";
  }
  if (S_ISDIR(info.st_mode)) return "";
  const char* kind = S_ISFIFO(info.st_mode)                         ? "a FIFO"
                     : S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode) ? "a device"
                     : S_ISSOCK(info.st_mode)                       ? "a socket"
                     : S_ISREG(info.st_mode)                        ? "a file"
                                                                    : "not a directory";
  return "'" + path + "' is " + kind + ", not " + (must_exist ? "a checkpoint directory" : "a directory") +
         "; name the " + what;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage << kHelp;
      return 0;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      std::cerr << kUsage << "acc-merge-weights: error: unrecognized argument: " << arg << "\n";
      return 2;
    }
    positional.push_back(arg);
  }
  if (positional.size() != 2) {
    std::cerr << kUsage << "acc-merge-weights: error: expected CHECKPOINT_DIR and OUTPUT_DIR, got "
              << positional.size() << " argument" << (positional.size() == 1 ? "" : "s") << "\n";
    return 2;
  }
  for (const auto& problem : {bad_directory(positional[0], true, "directory save_state wrote"),
                              bad_directory(positional[1], false, "directory to write the merged files into")}) {
    if (!problem.empty()) {
      std::cerr << "acc-merge-weights: error: " << problem << "\n";
      return 2;
    }
  }
  try {
    for (const auto& path : acc::merge_sharded_weights(positional[0], positional[1])) {
      std::cout << "wrote " << path << "\n";
    }
  } catch (const std::exception& error) {
    std::cerr << "acc-merge-weights: error: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
