// acc::ProgressBar: the text of a bar, and what a user sees on a pseudo-terminal (`script`) and
// on a pipe.
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>

#include <acc/progress_bar.h>

#include "spawn.h"
#include "tracking_util.h"

namespace {

std::string demo() { return acc::testing::executable_dir() + "/acc_tracking_bar_demo"; }

acc::ProgressBarOptions quiet(int64_t total) {
  // A bar that draws to a scratch file as plain lines, only when asked (never on its own).
  static FILE* sink = std::tmpfile();
  return acc::ProgressBarOptions().total(total).stream(sink).terminal(false).plain_secs(1e9);
}

TEST(ProgressBar, LineShowsPercentBarCountsTimesRateAndPostfix) {
  acc::ProgressBar bar(quiet(1000).description("epoch 1").ascii(true));
  bar.update(420);
  bar.set_postfix({{"loss", 0.123456}, {"lr", 1e-4}});
  const std::string tail = "| 420/1000 [00:12<00:16, 35.00it/s, loss=0.1235, lr=0.0001]";
  const std::string line = bar.line(12.0, 100, true);
  ASSERT_EQ(line.size(), 100U) << line;
  EXPECT_EQ(line.rfind("epoch 1:  42%|", 0), 0U) << line;
  EXPECT_EQ(line.substr(line.size() - tail.size()), tail) << line;
  const std::string glyphs = line.substr(14, line.size() - 14 - tail.size());
  EXPECT_EQ(glyphs, std::string(glyphs.size() * 42 / 100, '#') +
                        std::string(glyphs.size() - glyphs.size() * 42 / 100, ' '));
  EXPECT_EQ(bar.line(12.0, 100, false),
            "epoch 1:  42% 420/1000 [00:12<00:16, 35.00it/s, loss=0.1235, lr=0.0001]");
}

TEST(ProgressBar, UnicodeBlocksWithEighths) {
  acc::ProgressBar bar(quiet(16).ascii(false).columns(0));
  bar.update(3);  // 3/16 of an 8-column bar: 1 full block and a half block
  const std::string line = bar.line(1.0, 4 + 2 + 8 + 1 + 4 + 24, true);
  EXPECT_NE(line.find("|█▌      | 3/16"), std::string::npos) << line;
}

TEST(ProgressBar, UnknownTotalSlowRatesAndLongRuns) {
  acc::ProgressBar bar(quiet(0).unit("batch"));
  bar.update(5);
  EXPECT_EQ(bar.line(2.0, 80, true), "5batch [00:02, 2.50batch/s]");
  EXPECT_EQ(bar.line(20.0, 80, true), "5batch [00:20, 4.00s/batch]");
  bar.set_postfix("epoch 3");
  EXPECT_EQ(bar.line(3723.0, 80, true), "5batch [1:02:03, 744.60s/batch, epoch 3]");
  EXPECT_EQ(bar.line(3723.0, 10, true), "5batch [1:");  // never wider than the terminal
  acc::ProgressBar fresh(quiet(10));
  EXPECT_EQ(fresh.line(0.0, 80, false), "  0% 0/10 [00:00<?, ?it/s]");
}

TEST(ProgressBar, DisabledBarWritesNothing) {
  FILE* file = std::tmpfile();
  {
    acc::ProgressBar bar(acc::ProgressBarOptions().total(3).stream(file).disable(true));
    bar.update();
    bar.write("hello");
    bar.close();
    EXPECT_TRUE(bar.disabled());
  }
  EXPECT_EQ(std::ftell(file), 0L);
  std::fclose(file);
}

TEST(ProgressBar, OnAPipeEachDrawIsAPlainLine) {
  const std::string out = acc::testing::run_command(demo() + " 4 0");
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  const std::regex expected(
      "train:  25% 1/4 \\[00:00<[0-9:?]+, [0-9.]+it/s, loss=1\\]\n"
      "train:  50% 2/4 \\[00:00<[0-9:?]+, [0-9.]+it/s, loss=0.5\\]\n"
      "halfway\n"
      "train:  75% 3/4 \\[00:00<[0-9:?]+, [0-9.]+it/s, loss=0.3333\\]\n"
      "train: 100% 4/4 \\[00:00<00:00, [0-9.]+it/s, loss=0.25\\]\n");
  EXPECT_TRUE(std::regex_match(out, expected)) << out;
}

TEST(ProgressBar, OnAPseudoTerminalTheBarIsRedrawnInPlace) {
  // `script` runs the demo on a pseudo-terminal; COLUMNS sets the width (script's pty has none).
  const std::string out = acc::testing::run_command(
      "COLUMNS=61 script -qfec '" + demo() + " 4 0' /dev/null < /dev/null");
  // Each redraw: carriage return, the bar, erase to end of line; the last ends the line.
  // (The glyphs are left out when the line leaves them fewer than 3 columns.)
  const std::string bar = "\\r(train: +[0-9]+%(\\|[# ]+\\| | )[0-4]/4 \\[[^\\]]*\\])\x1b\\[K";
  const std::regex expected("(" + bar + ")+" + "\\r\x1b\\[Khalfway\\r?\\n" + "(" + bar + ")+" +
                            "\\r?\\n");
  EXPECT_TRUE(std::regex_match(out, expected)) << out;
  const auto final_at = out.rfind("\rtrain: 100%|");
  ASSERT_NE(final_at, std::string::npos) << out;
  const std::string final_line = out.substr(final_at + 1, out.find('\x1b', final_at) - final_at - 1);
  EXPECT_EQ(final_line.size(), 60U) << final_line;  // one column short of the width: no wrap
  EXPECT_TRUE(std::regex_match(final_line, std::regex("train: 100%\\|#+\\| 4/4 \\[.*\\]")))
      << final_line;
}

}  // namespace
