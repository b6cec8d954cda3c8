// acc's trackers read back by independent readers: TensorBoard's own event-file loader, strict
// JSON, Python's csv module (read_back.py), in the same test run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include <acc/tracking.h>

#include "base/crc32c.h"
#include "tracking_util.h"

namespace {

using acc::testing::read_back;
using acc::testing::ScratchDir;

// The bits TensorBoard stores for a value logged as a scalar (float32).
std::string scalar_line(const std::string& tag, int64_t step, double value) {
  const float f = static_cast<float>(value);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  char hex[16];
  std::snprintf(hex, sizeof(hex), "%08x", bits);
  return "scalar " + tag + " step=" + std::to_string(step) + " bits=" + hex + "\n";
}

TEST(Crc32c, MatchesTheCastagnoliCheckValue) {
  EXPECT_EQ(acc::detail::crc32c("123456789"), 0xE3069283U);
  EXPECT_EQ(acc::detail::crc32c(""), 0U);
  // TFRecord's mask of CRC 0: rotate right by 15, add 0xa282ead8.
  EXPECT_EQ(acc::detail::masked_crc32c(""), 0xA282EAD8U);
}

TEST(TensorBoardTracker, TensorBoardReadsBackTagsValuesStepsHparamsAndConfigText) {
  ScratchDir dir;
  acc::TensorBoardTracker tracker("my_project", dir.path());
  tracker.start();
  tracker.store_init_configuration(
      {{"learning_rate", 1e-3}, {"batch_size", 64}, {"optimizer", "adam"}, {"amp", false}});
  std::string expected = "file_version brain.Event:2\n";
  expected +=
      "hparam amp bool_value false\n"
      "hparam batch_size number_value 64.0\n"
      "hparam learning_rate number_value 0.001\n"
      "hparam optimizer string_value \"adam\"\n"
      "text config step=0 \"| name | value |\\n|---|---|\\n| amp | false |\\n"
      "| batch_size | 64 |\\n| learning_rate | 0.001 |\\n| optimizer | adam |\\n\"\n";
  for (int64_t step = 0; step < 5; ++step) {
    const double loss = 2.0 / (step + 1) + 0.1;
    tracker.log({{"train_loss", loss}, {"epoch", step / 2}}, step * 10);
    expected += scalar_line("epoch", step * 10, static_cast<double>(step / 2));
    expected += scalar_line("train_loss", step * 10, loss);
  }
  tracker.log({{"note", "lr \"warmup\" done"}}, 40);
  expected += "text note step=40 \"lr \\\"warmup\\\" done\"\n";
  tracker.log({{"no_step", 7.5}}, std::nullopt);  // Accelerate: no step is step 0
  expected += scalar_line("no_step", 0, 7.5);
  tracker.finish();

  const auto file = tracker.event_file();
  EXPECT_EQ(std::filesystem::path(file).parent_path(),
            std::filesystem::path(dir.path()) / "my_project");
  EXPECT_NE(std::filesystem::path(file).filename().string().find("events.out.tfevents."),
            std::string::npos);
  EXPECT_EQ(read_back("events", file), expected);
}

TEST(TensorBoardTracker, FileCutShortMidRecordStillYieldsEveryCompleteRecord) {
  ScratchDir dir;
  acc::TensorBoardTracker tracker("run", dir.path());
  tracker.start();
  std::string expected = "file_version brain.Event:2\n";
  for (int64_t step = 0; step < 4; ++step) {
    tracker.log({{"loss", 1.0 + static_cast<double>(step)}}, step);
    expected += scalar_line("loss", step, 1.0 + static_cast<double>(step));
  }
  tracker.flush();
  const auto complete = std::filesystem::file_size(tracker.event_file());
  tracker.log({{"loss", 99.0}}, 4);
  tracker.finish();
  const auto full = std::filesystem::file_size(tracker.event_file());
  ASSERT_GT(full, complete + 8);
  // A crash in the middle of writing the last record: its length and part of its data survive.
  std::filesystem::resize_file(tracker.event_file(), complete + (full - complete) / 2);
  EXPECT_EQ(read_back("events", tracker.event_file()), expected);
}

TEST(TensorBoardTracker, FlushesPeriodicallyWithoutFinish) {
  ScratchDir dir;
  acc::TensorBoardTracker tracker("run", dir.path(), /*flush_secs=*/0.05);
  tracker.start();
  const auto before = std::filesystem::file_size(tracker.event_file());
  tracker.log({{"loss", 1.0}}, 1);
  // Buffered at first; the background flush writes it within the interval.
  for (int i = 0; i < 100 && std::filesystem::file_size(tracker.event_file()) == before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(std::filesystem::file_size(tracker.event_file()), before);
  EXPECT_EQ(read_back("events", tracker.event_file()),
            "file_version brain.Event:2\n" + scalar_line("loss", 1, 1.0));
}

TEST(JsonlTracker, EveryLineIsStrictJsonWithStepWallTimeAndValues) {
  ScratchDir dir;
  acc::JsonlTracker tracker("proj", dir.path());
  tracker.start();
  tracker.store_init_configuration({{"lr", 0.1}, {"name", "a\"b"}});
  tracker.log({{"loss", 0.25}, {"ok", true}, {"count", int64_t{3}}}, 1);
  tracker.log({{"loss", std::nan("")}, {"msg", "line\nbreak\t\x01"}}, 2);
  tracker.log({{"big", 1e300}}, std::nullopt);
  tracker.finish();
  EXPECT_EQ(read_back("jsonl", dir.path() + "/proj/metrics.jsonl"),
            "{\"count\": 3, \"loss\": 0.25, \"ok\": true, \"step\": 1}\n"
            "{\"loss\": null, \"msg\": \"line\\nbreak\\t\\u0001\", \"step\": 2}\n"
            "{\"big\": 1e+300, \"step\": null}\n");
  EXPECT_EQ(acc::testing::read_file(dir.path() + "/proj/config.json"),
            "{\"lr\": 0.1, \"name\": \"a\\\"b\"}\n");
}

TEST(JsonlTracker, ResumedRunAppendsToTheSameFile) {
  ScratchDir dir;
  for (int64_t step : {1, 2}) {
    acc::JsonlTracker tracker("proj", dir.path());
    tracker.start();
    tracker.log({{"loss", 0.5}}, step);
  }  // destruction flushes and closes
  EXPECT_EQ(read_back("jsonl", dir.path() + "/proj/metrics.jsonl"),
            "{\"loss\": 0.5, \"step\": 1}\n{\"loss\": 0.5, \"step\": 2}\n");
}

TEST(CsvTracker, HeaderGrowsWhenNewNamesAppearAndEarlierRowsReadAsMissing) {
  ScratchDir dir;
  {
    acc::CsvTracker tracker("proj", dir.path());
    tracker.start();
    tracker.store_init_configuration({{"lr", 0.1}, {"tag", "x,y"}});
    tracker.log({{"loss", 0.5}}, 1);
    tracker.log({{"loss", 0.25}}, 2);
    tracker.log({{"loss", 0.125}, {"eval_acc", 0.75}, {"note", "a,\"b\""}}, 3);
    EXPECT_EQ(tracker.columns(), (std::vector<std::string>{"loss", "eval_acc", "note"}));
  }
  {  // a resumed run continues the columns of the existing file
    acc::CsvTracker tracker("proj", dir.path());
    tracker.start();
    tracker.log({{"eval_acc", 0.8}}, std::nullopt);
  }
  EXPECT_EQ(read_back("csv", dir.path() + "/proj/metrics.csv"),
            "header step,wall_time,loss,eval_acc,note\n"
            "step=1 loss=0.5\n"
            "step=2 loss=0.25\n"
            "step=3 loss=0.125 eval_acc=0.75 note=a,\"b\"\n"
            "eval_acc=0.8\n");
  EXPECT_EQ(acc::testing::read_file(dir.path() + "/proj/config.csv"),
            "name,value\nlr,0.1\ntag,\"x,y\"\n");
}

TEST(CsvTracker, RefusesToContinueAFileThatIsNotItsOwn) {
  ScratchDir dir;
  std::filesystem::create_directories(dir.path() + "/proj");
  std::ofstream(dir.path() + "/proj/metrics.csv") << "a,b\n1,2\n";
  acc::CsvTracker tracker("proj", dir.path());
  try {
    tracker.start();
    FAIL() << "expected acc::Error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("is not a metrics file of acc"), std::string::npos)
        << e.what();
  }
}

}  // namespace
