// save_state where nothing can be written: one CheckpointError naming save_state, the user's
// directory (never the hidden temporary), the system's reason and the fix.
#include <acc/acc.h>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <string>

#include "spawn.h"
#include "test_util.h"

namespace {

using acc::testing::ScratchDir;

void expect_names_the_fix(const std::string& message, const std::string& directory, const std::string& reason) {
  EXPECT_NE(message.find("save_state cannot write the checkpoint '" + directory + "'"), std::string::npos) << message;
  EXPECT_NE(message.find(reason), std::string::npos) << message;
  EXPECT_NE(message.find("Pass save_state a directory this process can write"), std::string::npos) << message;
  EXPECT_EQ(message.find(".tmp-"), std::string::npos) << "names the internal temporary: " << message;
}

std::string save_error(const std::string& directory) {
  acc::Accelerator accelerator(acc::AcceleratorOptions().cpu(true));
  auto model = torch::nn::Linear(2, 2);
  accelerator.prepare(model);
  try {
    accelerator.save_state(directory);
  } catch (const acc::CheckpointError& error) {
    return error.what();
  } catch (const std::exception& error) {
    ADD_FAILURE() << "not a CheckpointError: " << error.what();
    return "";
  }
  ADD_FAILURE() << "save_state into '" << directory << "' succeeded";
  return "";
}

// A read-only directory. root ignores a directory's mode bits (CAP_DAC_OVERRIDE), which is how
// these tests run in CI: there the directory is a read-only bind mount in a mount namespace of
// the worker's own (unshare -m), which refuses every write with EROFS, root's too, and vanishes
// with the worker. Elsewhere chmod 0555 refuses with EACCES.
TEST(SaveState, ReadOnlyDirectoryIsACheckpointErrorNamingTheFix) {
  ScratchDir dir;
  const std::string target = dir / "readonly";
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  if (::geteuid() != 0) {
    ASSERT_EQ(::chmod(target.c_str(), 0555), 0);
    expect_names_the_fix(save_error(target + "/checkpoint"), target + "/checkpoint", "permission denied");
    ::chmod(target.c_str(), 0755);
    return;
  }
  const std::string worker = acc::testing::executable_dir() + "/acc_checkpoint_worker";
  const std::string script = "mount --make-rprivate / && mount --bind '" + target + "' '" + target +
                             "' && mount -o remount,ro,bind '" + target + "' && echo MOUNTED_READ_ONLY && exec '" +
                             worker + "' save-error '" + target + "/checkpoint'";
  const auto result =
      acc::testing::spawn_ranks("/usr/bin/unshare", {"-m", "sh", "-c", script}, 1, std::chrono::seconds(120));
  ASSERT_FALSE(result.timed_out) << result.describe();
  const auto& output = result.ranks.at(0).output;
  if (output.find("MOUNTED_READ_ONLY") == std::string::npos) {
    GTEST_SKIP() << "root without CAP_SYS_ADMIN cannot make a read-only mount here: " << output;
  }
  ASSERT_EQ(result.ranks[0].exit_code, 0) << output;
  expect_names_the_fix(output, target + "/checkpoint", "read-only file system");
}

// A regular file where the checkpoint's parent directory should be: refused for root too.
TEST(SaveState, FileInPlaceOfTheParentDirectoryIsACheckpointError) {
  ScratchDir dir;
  std::ofstream(dir / "file") << "not a directory";
  const std::string target = dir / "file/run/checkpoint";
  expect_names_the_fix(save_error(target), target, "not a directory");
}

}  // namespace
