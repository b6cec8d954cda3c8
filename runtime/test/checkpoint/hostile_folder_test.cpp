// Checkpoint folders prepared by someone else (issue 35, item 6): a FIFO at any name load_state,
// automatic discovery, pruning or acc-merge-weights opens is named, never waited on; a symbolic link
// leading out of the checkpoint directory is refused, naming the link; and no error quotes the bytes
// of the file it could not read (not as text, not as a number). Every load runs in a forked child
// with a deadline, so a blocking read fails the test instead of hanging it.
#include <torch/torch.h>

#include <caffe2/serialize/inline_container.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
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

constexpr int kDeadlineSeconds = 20;
const std::string kBlocked = "<blocked: killed after the deadline>";

// Runs `body` in a forked child and returns what it returned, or kBlocked when it did not finish
// within kDeadlineSeconds (the child is killed then). One intra-op thread in the child: an OpenMP
// pool inherited through fork() has no threads behind it.
std::string in_child(const std::function<std::string()>& body) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "<pipe failed>";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ::alarm(kDeadlineSeconds + 10);  // a backstop should the parent be gone
    at::set_num_threads(1);
    std::string result;
    try {
      result = body();
    } catch (const std::exception& error) {
      result = std::string("<exception> ") + error.what();
    }
    for (size_t done = 0; done < result.size();) {
      const ssize_t wrote = ::write(pipe_fds[1], result.data() + done, result.size() - done);
      if (wrote <= 0) break;
      done += static_cast<size_t>(wrote);
    }
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kDeadlineSeconds);
  bool finished = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd poll_fd{pipe_fds[0], POLLIN, 0};
    if (::poll(&poll_fd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t got = ::read(pipe_fds[0], buffer, sizeof(buffer));
    if (got <= 0) {
      finished = true;
      break;
    }
    result.append(buffer, static_cast<size_t>(got));
  }
  ::close(pipe_fds[0]);
  if (!finished) ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return finished ? result : kBlocked;
}

using Program = acc::testing::CheckpointedProgram;

acc::ProjectConfiguration layout(acc::CheckpointFormat format, bool verify = true) {
  return acc::ProjectConfiguration().checkpoint_format(format).verify_checksums(verify);
}

// load_state's error (or "no error") in a child with a deadline.
std::string load_error(const std::string& checkpoint, acc::ProjectConfiguration project) {
  return in_child([&] {
    Program program(project);
    try {
      program.accelerator.load_state(checkpoint);
    } catch (const acc::Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  });
}

// What a link out of the checkpoint would reach: a file of the machine's, by its first line.
const std::string kSecret = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n";

// The first 8 bytes as the little-endian length a safetensors header starts with, in decimal:
// how the header-length error used to print a file it was pointed at.
std::string first_eight_as_number(const std::string& bytes) {
  uint64_t value = 0;
  std::memcpy(&value, bytes.data(), 8);
  return std::to_string(value);
}

void expect_no_content(const std::string& message, const std::string& content, const std::string& what) {
  EXPECT_EQ(message.find(content.substr(0, 6)), std::string::npos) << what << ": " << message;
  EXPECT_EQ(message.find(first_eight_as_number(content)), std::string::npos) << what << ": " << message;
}

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// The names in a saved checkpoint (the completion marker and checksum manifests included).
std::vector<std::string> names_in(const std::string& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string copy_of(const ScratchDir& dir, const std::string& original, const std::string& name) {
  const std::string copy = dir / name;
  fs::copy(original, copy, fs::copy_options::recursive);
  return copy;
}

void expect_every_fifo_refused(acc::CheckpointFormat format) {
  ScratchDir dir;
  Program(layout(format)).accelerator.save_state(dir / "ckpt");
  const auto names = names_in(dir / "ckpt");
  ASSERT_GE(names.size(), 8u);
  for (const auto& name : names) {
    const std::string copy = copy_of(dir, dir / "ckpt", "fifo_" + name);
    const std::string fifo = copy + "/" + name;
    fs::remove(fifo);
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const std::string message = load_error(copy, layout(format));
    EXPECT_NE(message, kBlocked) << "load_state blocked on a FIFO at " << name;
    EXPECT_NE(message.find("'" + fifo + "' is a FIFO"), std::string::npos) << name << ": " << message;
  }
}

void expect_every_link_out_refused(acc::CheckpointFormat format) {
  ScratchDir dir;
  Program(layout(format)).accelerator.save_state(dir / "ckpt");
  const std::string outside = dir / "outside.txt";
  write(outside, kSecret);
  for (const auto& name : names_in(dir / "ckpt")) {
    const std::string copy = copy_of(dir, dir / "ckpt", "link_" + name);
    const std::string link = copy + "/" + name;
    fs::remove(link);
    fs::create_symlink(outside, link);
    // Unverified, so that the parsers meet the file (the checksums would stop most first); the
    // manifests themselves are read only when verifying.
    const bool manifest = name.rfind("checksums_", 0) == 0;
    const std::string message = load_error(copy, layout(format, /*verify=*/manifest));
    EXPECT_NE(message.find("'" + link + "' is a symbolic link to '" + outside + "', outside the checkpoint"),
              std::string::npos)
        << name << ": " << message;
    expect_no_content(message, kSecret, name);
  }
}

}  // namespace

TEST(HostileCheckpoint, AFifoAtAnyNameOfAnAccCheckpointIsNamedWithoutBlocking) {
  expect_every_fifo_refused(acc::CheckpointFormat::Acc);
}

TEST(HostileCheckpoint, AFifoAtAnyNameOfAnAccelerateLayoutCheckpointIsNamedWithoutBlocking) {
  expect_every_fifo_refused(acc::CheckpointFormat::Accelerate);
}

TEST(HostileCheckpoint, ALinkOutOfAnAccCheckpointIsRefusedAndItsTargetNeverQuoted) {
  expect_every_link_out_refused(acc::CheckpointFormat::Acc);
}

TEST(HostileCheckpoint, ALinkOutOfAnAccelerateLayoutCheckpointIsRefusedAndItsTargetNeverQuoted) {
  expect_every_link_out_refused(acc::CheckpointFormat::Accelerate);
}

// The decision's other half: a link that stays inside the checkpoint reads what the checkpoint
// holds anyway, so it is followed (and its bytes still verified against the manifest).
TEST(HostileCheckpoint, ALinkThatStaysInsideTheCheckpointIsFollowed) {
  ScratchDir dir;
  Program(layout(acc::CheckpointFormat::Acc)).accelerator.save_state(dir / "ckpt");
  fs::create_directory(dir / "ckpt/blobs");
  fs::rename(dir / "ckpt/scheduler.bin", dir / "ckpt/blobs/scheduler.bin");
  fs::create_symlink("blobs/scheduler.bin", dir / "ckpt/scheduler.bin");
  EXPECT_EQ(load_error(dir / "ckpt", layout(acc::CheckpointFormat::Acc)), "no error");
}

// A regular file holding something else: the error says what is wrong with it, never what it holds.
TEST(HostileCheckpoint, ErrorsAboutAFileThatIsNotACheckpointFileNeverQuoteIt) {
  for (const auto format : {acc::CheckpointFormat::Acc, acc::CheckpointFormat::Accelerate}) {
    ScratchDir dir;
    Program(layout(format)).accelerator.save_state(dir / "ckpt");
    for (const auto& name : names_in(dir / "ckpt")) {
      if (name.rfind("checksums_", 0) == 0 || name == acc::kCheckpointCompleteMarker) continue;
      const std::string copy = copy_of(dir, dir / "ckpt", "text_" + name);
      write(copy + "/" + name, kSecret);
      const std::string message = load_error(copy, layout(format, /*verify=*/false));
      EXPECT_NE(message.find("'" + copy + "/" + name + "'"), std::string::npos) << name << ": " << message;
      expect_no_content(message, kSecret, name);
    }
  }
}

// The parse stages past the length: a JSON header whose string runs to its end (nlohmann quotes
// what it last read), and a torch.save zip whose pickle holds opcodes acc does not read.
TEST(HostileCheckpoint, ParserErrorsPastTheFramingNeverQuoteTheFile) {
  ScratchDir dir;
  const std::string json = "{\"" + kSecret.substr(0, 31);  // an unterminated string
  std::string header(8, '\0');
  const uint64_t length = json.size();
  std::memcpy(header.data(), &length, 8);
  write(dir / "model.safetensors", header + json);
  std::string message;
  try {
    acc::safetensors::MappedFile mapped(dir / "model.safetensors");
    message = "no error";
  } catch (const acc::Error& error) {
    message = error.what();
  }
  EXPECT_NE(message.find("is not valid JSON"), std::string::npos) << message;
  EXPECT_EQ(message.find("root:x"), std::string::npos) << message;

  Program(layout(acc::CheckpointFormat::Accelerate)).accelerator.save_state(dir / "ckpt");
  const std::string states = dir / "ckpt/random_states_0.pkl";
  fs::remove(states);
  {
    caffe2::serialize::PyTorchStreamWriter zip(states);
    const std::string pickle = std::string("\x80\x02", 2) + "x" + kSecret;  // 'x': no opcode acc reads
    zip.writeRecord("data.pkl", pickle.data(), pickle.size());
    zip.writeEndOfFile();
  }
  message = load_error(dir / "ckpt", layout(acc::CheckpointFormat::Accelerate, /*verify=*/false));
  EXPECT_NE(message.find("'" + states + "' is not a torch.save file acc can read"), std::string::npos) << message;
  EXPECT_EQ(message.find("0x78"), std::string::npos) << message;
  EXPECT_EQ(message.find("root:x"), std::string::npos) << message;
}

// Discovery and pruning: only real directories named checkpoint_N are checkpoints; a FIFO or a
// link under that name is neither loaded, followed, waited on nor removed.
TEST(HostileCheckpoint, AutomaticDiscoveryAndPruningSkipFifosAndLinksNamedLikeCheckpoints) {
  ScratchDir dir;
  const auto project = acc::ProjectConfiguration()
                           .project_dir(dir.path())
                           .automatic_checkpoint_naming(true)
                           .total_limit(1);
  Program(project).accelerator.save_state();  // checkpoints/checkpoint_0
  const std::string root = dir / "checkpoints";
  Program(acc::ProjectConfiguration()).accelerator.save_state(dir / "elsewhere");  // complete, outside
  fs::create_directory_symlink(dir / "elsewhere", root + "/checkpoint_5");
  ASSERT_EQ(::mkfifo((root + "/checkpoint_7").c_str(), 0600), 0);
  // A number no int64 holds (std::stoll threw std::out_of_range out of load_state).
  const std::string huge = root + "/checkpoint_99999999999999999999";
  fs::create_directory(huge);
  write(huge + "/" + acc::kCheckpointCompleteMarker, "complete\n");

  const std::string result = in_child([&] {
    Program program(project);
    const std::string loaded = program.accelerator.load_state();
    program.accelerator.save_state();  // checkpoint_1; total_limit 1 prunes checkpoint_0
    return loaded;
  });
  EXPECT_EQ(result, root + "/checkpoint_0");
  EXPECT_TRUE(fs::is_symlink(root + "/checkpoint_5"));
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(root + "/checkpoint_7")));
  EXPECT_TRUE(acc::is_complete_checkpoint(dir / "elsewhere"));
  EXPECT_TRUE(acc::is_complete_checkpoint(root + "/checkpoint_1"));
  EXPECT_FALSE(fs::exists(root + "/checkpoint_0"));
  EXPECT_TRUE(fs::exists(huge));
}

namespace {
struct ToolRun {
  int exit_code = -1;
  std::string output;
};
// acc-merge-weights under `timeout` (exit 124 when it blocks).
ToolRun merge_weights(const ScratchDir& dir, const std::string& checkpoint, const std::string& output) {
  const std::string log = dir / "merge.log";
  const std::string command = "timeout " + std::to_string(kDeadlineSeconds) + " '" + ACC_MERGE_WEIGHTS + "' '" +
                              checkpoint + "' '" + output + "' > '" + log + "' 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  std::ostringstream text;
  text << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str()};
}
}  // namespace

TEST(HostileCheckpoint, AccMergeWeightsNamesAFifoAndRefusesShardsThatAreFifosOrLinksOut) {
  ScratchDir dir;
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto run = merge_weights(dir, fifo, dir / "out");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("'" + fifo + "' is a FIFO, not a checkpoint directory"), std::string::npos) << run.output;
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;

  fs::create_directory(dir / "fifo_shard");
  const std::string shard = dir / "fifo_shard/model.shard-0-of-1.safetensors";
  ASSERT_EQ(::mkfifo(shard.c_str(), 0600), 0);
  run = merge_weights(dir, dir / "fifo_shard", dir / "out");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("'" + shard + "' is a FIFO"), std::string::npos) << run.output;

  write(dir / "outside.txt", kSecret);
  fs::create_directory(dir / "link_shard");
  const std::string link = dir / "link_shard/model.shard-0-of-1.safetensors";
  fs::create_symlink(dir / "outside.txt", link);
  run = merge_weights(dir, dir / "link_shard", dir / "out");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("'" + link + "' is a symbolic link to '" + (dir / "outside.txt") + "', outside the checkpoint"),
            std::string::npos)
      << run.output;
  expect_no_content(run.output, kSecret, "acc-merge-weights");

  // A shard whose acc metadata is not numbers: named, not quoted (std::stoll threw before).
  fs::create_directory(dir / "bad_metadata");
  acc::safetensors::save_file({{"w", torch::zeros({2})}}, dir / "bad_metadata/model.shard-0-of-1.safetensors",
                              {{"format", "pt"}, {"acc.range.w", kSecret.substr(0, 10)}, {"acc.shape.w", "2"}});
  run = merge_weights(dir, dir / "bad_metadata", dir / "out");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("the acc.range/acc.shape metadata of 'w' is not two offsets and a shape"),
            std::string::npos)
      << run.output;
  expect_no_content(run.output, kSecret, "shard metadata");
}

// The decision's boundary: load_checkpoint_in_model reads weights a user names, often a Hub cache
// snapshot whose files are links into ../../blobs, so links are followed there (no checkpoint
// directory to stay inside); a FIFO is still named, never waited on, and an index's JSON error does
// not quote it.
TEST(HostileCheckpoint, LoadCheckpointInModelFollowsHubCacheLinksButNamesFifos) {
  ScratchDir dir;
  torch::nn::Linear saved(4, 2);
  acc::save_model(saved, dir / "saved");
  fs::create_directories(dir / "hub/blobs");
  fs::create_directories(dir / "hub/snapshots/abc");
  fs::rename(dir / "saved/model.safetensors", dir / "hub/blobs/0123abcd");
  fs::create_symlink("../../blobs/0123abcd", dir / "hub/snapshots/abc/model.safetensors");
  const std::string loaded = in_child([&] {
    torch::nn::Linear model(4, 2);
    acc::load_checkpoint_in_model(model, dir / "hub/snapshots/abc");
    return std::string(torch::equal(model->weight, saved->weight) ? "same weights" : "other weights");
  });
  EXPECT_EQ(loaded, "same weights");

  fs::create_directories(dir / "fifo");
  const std::string fifo = dir / "fifo/model.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto error_of = [&](const std::string& path) {
    return in_child([&] {
      torch::nn::Linear model(4, 2);
      try {
        acc::load_checkpoint_in_model(model, path);
      } catch (const acc::Error& error) {
        return std::string(error.what());
      }
      return std::string("no error");
    });
  };
  const std::string message = error_of(dir / "fifo");
  EXPECT_NE(message.find("'" + fifo + "' is a FIFO"), std::string::npos) << message;

  fs::create_directories(dir / "index");
  write(dir / "index/model.safetensors.index.json", "{\"weight_map\": {\"w\": \"" + kSecret.substr(0, 20));
  const std::string index_error = error_of(dir / "index");
  EXPECT_NE(index_error.find("is not a valid shard index: not valid JSON"), std::string::npos) << index_error;
  expect_no_content(index_error, kSecret, "index");
}
