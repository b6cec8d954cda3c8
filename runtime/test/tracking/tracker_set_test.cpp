// The Accelerator's tracker set: log_with validation, main-process-only writing, user trackers,
// and the error messages of misuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include <acc/errors.h>
#include <acc/tracking.h>

#include "tracking/tracker_set.h"
#include "error_text.h"
#include "tracking_util.h"

namespace {

using acc::detail::TrackerSet;
using acc::testing::ScratchDir;

std::string error_of(const std::function<void()>& action) {
  return acc::testing::error_text<acc::ConfigError>(action, "(no acc::ConfigError)");
}

struct Recorder : acc::GeneralTracker {
  explicit Recorder(bool main_only) : main_only(main_only) {}
  std::string name() const override { return "recorder"; }
  bool main_process_only() const override { return main_only; }
  void start() override { calls.push_back("start"); }
  void store_init_configuration(const acc::TrackerValues& config) override {
    calls.push_back("config " + std::to_string(config.size()));
  }
  void log(const acc::TrackerValues& values, std::optional<int64_t> step) override {
    calls.push_back("log " + std::to_string(values.at("loss").number()) + " @" +
                    std::to_string(step.value_or(-1)));
  }
  void finish() override { calls.push_back("finish"); }
  bool main_only;
  std::vector<std::string> calls;
};

TEST(TrackerSet, AllStartsTheThreeFileTrackersOnTheMainProcess) {
  ScratchDir dir;
  TrackerSet set(acc::LogWith{"ALL"}, /*is_main_process=*/true, dir.path());
  set.init("proj", {{"lr", 0.1}});
  set.log({{"loss", 0.5}}, 1);
  EXPECT_EQ(set.get("tensorboard").name(), "tensorboard");
  EXPECT_EQ(set.get("jsonl").name(), "jsonl");
  EXPECT_EQ(set.get("csv").name(), "csv");
  set.finish();
  auto files = acc::testing::files_in(dir.path() + "/proj");
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 5U);
  EXPECT_EQ(files[0], "config.csv");
  EXPECT_EQ(files[1], "config.json");
  EXPECT_EQ(files[2].rfind("events.out.tfevents.", 0), 0U);
  EXPECT_EQ(files[3], "metrics.csv");
  EXPECT_EQ(files[4], "metrics.jsonl");
}

TEST(TrackerSet, OtherProcessesCreateNothingAndGetAnInertTracker) {
  ScratchDir dir;
  const std::string logging_dir = dir.path() + "/logs";
  TrackerSet set(acc::LogWith{"tensorboard", "jsonl", "csv"}, /*is_main_process=*/false,
                 logging_dir);
  set.init("proj", {{"lr", 0.1}});
  set.log({{"loss", 0.5}}, 1);
  set.get("tensorboard").log({{"loss", 1.0}}, 2);  // ignored
  set.finish();
  EXPECT_FALSE(std::filesystem::exists(logging_dir));
}

TEST(TrackerSet, UserTrackersRunWhereTheyAskTo) {
  auto main_only = std::make_shared<Recorder>(true);
  auto everywhere = std::make_shared<Recorder>(false);
  TrackerSet set(acc::LogWith{main_only, everywhere}, /*is_main_process=*/false, "");
  set.init("proj", {{"lr", 0.1}, {"wd", 0.0}});
  set.log({{"loss", 0.5}}, 3);
  set.finish();
  set.finish();  // once only
  EXPECT_TRUE(main_only->calls.empty());
  EXPECT_EQ(everywhere->calls,
            (std::vector<std::string>{"start", "config 2", "log 0.500000 @3", "finish"}));
}

TEST(TrackerSet, MisuseGivesMessagesThatNameTheFix) {
  EXPECT_NE(error_of([] { TrackerSet(acc::LogWith{"wandb"}, true, "/tmp"); })
                .find("unknown tracker 'wandb' in log_with; use \"tensorboard\", \"jsonl\", "
                      "\"csv\" or \"all\""),
            std::string::npos);
  EXPECT_NE(error_of([] { TrackerSet(acc::LogWith{"tensorboard"}, true, ""); })
                .find("needs a logging directory; pass AcceleratorOptions().project_config("),
            std::string::npos);
  ScratchDir dir;
  TrackerSet set(acc::LogWith{"jsonl"}, true, dir.path());
  EXPECT_NE(error_of([&] { set.log({{"loss", 1.0}}, 1); })
                .find("log() was called before init_trackers()"),
            std::string::npos);
  EXPECT_NE(error_of([&] { set.get("jsonl"); }).find("before init_trackers()"), std::string::npos);
  EXPECT_NE(error_of([&] { set.init("a/b", {}); }).find("usable as a directory name"),
            std::string::npos);
  set.init("proj", {});
  EXPECT_NE(error_of([&] { set.init("proj", {}); }).find("init_trackers was called twice"),
            std::string::npos);
  EXPECT_NE(error_of([&] { set.log({{"step", 1.0}}, 1); })
                .find("value named 'step', which the jsonl and csv trackers write themselves"),
            std::string::npos);
  EXPECT_NE(error_of([&] { set.get("tensorboard"); })
                .find("no tracker named 'tensorboard'; the trackers in use are jsonl"),
            std::string::npos);
}

TEST(TrackerSet, WithoutTrackersLogDoesNothing) {
  TrackerSet set(acc::LogWith{}, true, "");
  set.log({{"loss", 1.0}}, 1);  // as Accelerate: no log_with, no effect, no error
  EXPECT_FALSE(set.requested());
}

}  // namespace
