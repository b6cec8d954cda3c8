// What load_state and the writers do with files that are not what they should be: damaged
// checkpoint files are named (libtorch's own errors name none), bit flips are caught by the
// checksums save_state records, FIFOs and directories are refused without blocking, links planted at
// the names a writer uses are never written through, and what killed saves and prunings leave is
// removed by the next save.
#include <torch/torch.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include <acc/acc.h>
#include <gtest/gtest.h>

#include "checkpointed_program.h"
#include "env_fixture.h"
#include "test_util.h"

namespace fs = std::filesystem;
using acc::testing::ScratchDir;

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

using Program = acc::testing::CheckpointedProgram;

std::string load_error(const std::string& checkpoint, bool verify) {
  Program program(acc::ProjectConfiguration().verify_checksums(verify));
  try {
    program.accelerator.load_state(checkpoint);
  } catch (const acc::Error& error) {
    return error.what();
  } catch (const std::exception& error) {
    return std::string("not an acc error: ") + error.what();
  }
  return "no error";
}

const std::vector<std::string> kArchives = {"sampler.bin", "scheduler.bin", "custom_checkpoint_0.bin",
                                            "optimizer.libtorch.bin", "random_states_0.bin"};

}  // namespace

TEST(DamagedCheckpoint, AFileThatIsNotAnArchiveIsNamedNotARawLibtorchError) {
  ScratchDir dir;
  Program(acc::ProjectConfiguration()).accelerator.save_state(dir / "ckpt");
  const std::string original = dir / "ckpt";
  for (const auto& name : kArchives) {
    const std::string copy = dir / ("damaged_" + name);
    fs::copy(original, copy, fs::copy_options::recursive);
    write(copy + "/" + name, "these bytes are not a zip archive");
    const std::string unverified = load_error(copy, /*verify=*/false);
    EXPECT_NE(unverified.find("checkpoint file '" + copy + "/" + name + "' is not a libtorch archive"), std::string::npos)
        << unverified;
    const std::string verified = load_error(copy, /*verify=*/true);
    EXPECT_NE(verified.find("'" + copy + "/" + name + "' is 33 bytes but save_state wrote"), std::string::npos) << verified;
  }
}

TEST(DamagedCheckpoint, AFlippedBitInAnyFileIsCaughtByItsChecksum) {
  ScratchDir dir;
  Program().accelerator.save_state(dir / "ckpt");
  EXPECT_EQ(load_error(dir / "ckpt", true), "no error");
  std::vector<std::string> names = kArchives;
  names.insert(names.end(), {"model.safetensors", "optimizer.safetensors"});
  for (const auto& name : names) {
    const std::string copy = dir / ("flipped_" + name);
    fs::copy(dir / "ckpt", copy, fs::copy_options::recursive);
    std::string bytes = read(copy + "/" + name);
    bytes[bytes.size() / 2] ^= 0x10;
    write(copy + "/" + name, bytes);
    const std::string message = load_error(copy, true);
    EXPECT_NE(message.find("checkpoint file '" + copy + "/" + name + "' is damaged: its CRC-32C is"), std::string::npos)
        << message;
    EXPECT_NE(message.find("verify_checksums(false)"), std::string::npos) << message;
  }
}

TEST(DamagedCheckpoint, FifosAndDirectoriesAreRefusedWithoutBlocking) {
  ScratchDir dir;
  Program().accelerator.save_state(dir / "ckpt");
  const std::string fifo = dir / "ckpt/scheduler.bin";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto message = std::async(std::launch::async, [&] { return load_error(dir / "ckpt", true); });
  if (message.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    const int unblock = ::open(fifo.c_str(), O_RDWR);  // let the blocked reader go before failing
    message.wait();
    ::close(unblock);
    FAIL() << "load_state blocked on a FIFO";
  }
  EXPECT_NE(message.get().find("'" + fifo + "' is a FIFO, not a file acc can read"), std::string::npos);

  fs::create_directory(dir / "not_a_file.safetensors");
  try {
    acc::safetensors::MappedFile mapped(dir / "not_a_file.safetensors");
    FAIL() << "a directory was mapped";
  } catch (const acc::Error& error) {
    EXPECT_NE(std::string(error.what()).find("not_a_file.safetensors' is a directory, not a file acc can read"),
              std::string::npos)
        << error.what();
  }
}

TEST(PlantedLinks, WritersReplaceLinksAtTheirNamesAndNeverWriteThroughThem) {
  ScratchDir dir;
  write(dir / "victim", "precious");
  fs::create_directories(dir / "victim_dir");
  write(dir / "victim_dir/keep", "precious");
  fs::create_directories(dir / "out");
  // Every name the writers used before (strace): the final file and its fixed-name temporaries.
  for (const char* name : {"model.safetensors", "model.safetensors.tmp", ".model.safetensors.tmp"}) {
    fs::create_symlink(dir / "victim", dir / "out/" + name);
  }
  fs::create_directory_symlink(dir / "victim_dir", dir / ".ckpt.tmp");
  fs::create_directory_symlink(dir / "victim_dir", dir / ".ckpt.tmp.old");

  Program program;
  program.accelerator.save_model(program.model, dir / "out");
  program.accelerator.save_state(dir / "ckpt");

  EXPECT_EQ(read(dir / "victim"), "precious");
  EXPECT_EQ(read(dir / "victim_dir/keep"), "precious");
  EXPECT_EQ(std::vector<std::string>{"keep"}.size(),
            static_cast<size_t>(std::distance(fs::directory_iterator(dir / "victim_dir"), fs::directory_iterator())));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir / "out/model.safetensors")));
  EXPECT_TRUE(acc::is_complete_checkpoint(dir / "ckpt"));
  EXPECT_EQ(load_error(dir / "ckpt", true), "no error");
}

TEST(Pruning, WhatKilledSavesAndRemovalsLeftGoesAtTheNextSave) {
  ScratchDir dir;
  const auto project =
      acc::ProjectConfiguration().project_dir(dir.path()).automatic_checkpoint_naming(true).total_limit(2);
  Program program(project);
  for (int i = 0; i < 3; ++i) program.accelerator.save_state();
  const std::string root = dir / "checkpoints";
  // A removal killed after its rename, a save killed before its commit, a checkpoint that acc
  // before the trash left half-removed (marker gone), and a save of another process running now.
  fs::create_directories(root + "/.checkpoint_0.trash-0123456789abcdef/x");
  fs::create_directories(root + "/.checkpoint_7.tmp-fedcba9876543210");
  fs::create_directories(root + "/checkpoint_0");
  write(root + "/checkpoint_0/model.safetensors", "half removed");
  const std::string live = root + "/.checkpoint_8.tmp-aaaaaaaaaaaaaaaa";
  fs::create_directories(live);
  const int lock = ::open(live.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_EQ(::flock(lock, LOCK_EX), 0);

  EXPECT_EQ(program.accelerator.load_state(), root + "/checkpoint_2");  // incomplete ones are skipped
  program.accelerator.save_state();
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(root)) left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{".checkpoint_8.tmp-aaaaaaaaaaaaaaaa", "checkpoint_2", "checkpoint_3"}));

  ::close(lock);  // its writer is gone now
  program.accelerator.save_state();
  EXPECT_FALSE(fs::exists(live));
}
