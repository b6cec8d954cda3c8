#include <acc/progress_bar.h>

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

namespace acc {

namespace {
bool utf8_locale() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    std::string text(value);
    std::transform(text.begin(), text.end(), text.begin(), ::tolower);
    return text.find("utf-8") != std::string::npos || text.find("utf8") != std::string::npos;
  }
  return false;
}

// Display width of UTF-8 text: one column per code point (no wide characters in bars).
int display_width(std::string_view text) {
  return static_cast<int>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

// Keeps the first `columns` code points, so that a redraw never wraps onto a second line.
std::string clip(std::string text, int columns) {
  int seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && seen++ == columns) {
      text.resize(i);
      break;
    }
  }
  return text;
}

std::string format_number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.4g", value);
  return buffer;
}

std::string bar_glyphs(double fraction, int width, bool ascii) {
  static const char* const kPartial[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int eighths = static_cast<int>(std::floor(fraction * width * 8));
  const int full = eighths / 8;
  std::string bar;
  for (int i = 0; i < full; ++i) bar += ascii ? "#" : "█";
  int used = full;
  if (full < width && eighths % 8 != 0 && !ascii) {
    bar += kPartial[eighths % 8];
    ++used;
  }
  bar.append(static_cast<size_t>(width - used), ' ');
  return bar;
}
}  // namespace

namespace detail {
std::string format_interval(double seconds) {
  const auto total = static_cast<int64_t>(seconds);
  const int64_t hours = total / 3600, minutes = total / 60 % 60, secs = total % 60;
  char buffer[32];
  if (hours > 0) {
    std::snprintf(buffer, sizeof(buffer), "%lld:%02lld:%02lld", static_cast<long long>(hours),
                  static_cast<long long>(minutes), static_cast<long long>(secs));
  } else {
    std::snprintf(buffer, sizeof(buffer), "%02lld:%02lld", static_cast<long long>(minutes),
                  static_cast<long long>(secs));
  }
  return buffer;
}
}  // namespace detail

ProgressBar::ProgressBar(ProgressBarOptions options)
    : options_(std::move(options)), active_(!options_.disable()), start_(Clock::now()) {
  if (!active_.on) return;
  terminal_ = options_.terminal().value_or(isatty(fileno(options_.stream())) == 1);
  ascii_ = options_.ascii().value_or(!utf8_locale());
  next_draw_ = start_;
  if (terminal_) {
    draw(false);  // 0% at once, as tqdm
  } else {
    next_draw_ = start_ + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(options_.plain_secs()));
  }
}

ProgressBar::ProgressBar(int64_t total, std::string description)
    : ProgressBar(ProgressBarOptions().total(total).description(std::move(description))) {}

ProgressBar::~ProgressBar() { close(); }

void ProgressBar::set_postfix(std::initializer_list<std::pair<std::string_view, double>> values) {
  if (!active_.on) return;
  postfix_.resize(values.size());
  size_t i = 0;
  for (const auto& [name, value] : values) {
    postfix_[i].first.assign(name);  // reuses the string's storage from the last call
    postfix_[i].second = value;
    ++i;
  }
  postfix_text_.clear();
}

void ProgressBar::set_postfix(std::string text) {
  if (!active_.on) return;
  postfix_.clear();
  postfix_text_ = std::move(text);
}

void ProgressBar::set_description(std::string description) { options_.description(std::move(description)); }

void ProgressBar::set_total(int64_t total) { options_.total(total); }

int ProgressBar::width() const {
  if (options_.columns() > 0) return options_.columns();
  winsize size{};
  if (ioctl(fileno(options_.stream()), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  if (const char* columns = std::getenv("COLUMNS")) {
    const int value = std::atoi(columns);
    if (value > 0) return value;
  }
  return 80;
}

std::string ProgressBar::line(double elapsed_secs, int columns, bool with_bar) const {
  const int64_t total = options_.total();
  const std::string& unit = options_.unit();
  std::string rate = "?" + unit + "/s";
  double per_second = 0;
  if (elapsed_secs > 0 && count_ > 0) {
    per_second = static_cast<double>(count_) / elapsed_secs;
    char buffer[64];
    if (per_second >= 1) {
      std::snprintf(buffer, sizeof(buffer), "%.2f%s/s", per_second, unit.c_str());
    } else {
      std::snprintf(buffer, sizeof(buffer), "%.2fs/%s", 1 / per_second, unit.c_str());
    }
    rate = buffer;
  }
  std::string postfix = postfix_text_.empty() ? "" : ", " + postfix_text_;
  for (const auto& [name, value] : postfix_) postfix += ", " + name + "=" + format_number(value);

  const std::string prefix =
      options_.description().empty() ? "" : options_.description() + ": ";
  const std::string elapsed = detail::format_interval(elapsed_secs);
  if (total <= 0) {
    return clip(prefix + std::to_string(count_) + unit + " [" + elapsed + ", " + rate + postfix +
                    "]",
                columns);
  }
  const double fraction = std::clamp(static_cast<double>(count_) / total, 0.0, 1.0);
  const std::string remaining =
      per_second > 0 ? detail::format_interval(std::max<double>(0, total - count_) / per_second)
                     : "?";
  char percent[8];
  std::snprintf(percent, sizeof(percent), "%3d%%", static_cast<int>(fraction * 100));
  const std::string counts = std::to_string(count_) + "/" + std::to_string(total);
  const std::string tail = " [" + elapsed + "<" + remaining + ", " + rate + postfix + "]";
  if (!with_bar) return prefix + percent + " " + counts + tail;
  const int bar_width = columns - display_width(prefix) - 4 - 2 - 1 - display_width(counts) -
                        display_width(tail);
  if (bar_width < 3) return clip(prefix + percent + " " + counts + tail, columns);
  return prefix + percent + "|" + bar_glyphs(fraction, bar_width, ascii_) + "| " + counts + tail;
}

void ProgressBar::draw(bool final) {
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string out;
  if (terminal_) {
    // \r and erase-to-end-of-line: redraw in place, whatever the last line's length was.
    out = "\r" + line(elapsed, width() - 1, true) + "\x1b[K" + (final ? "\n" : "");
    next_draw_ = now + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options_.refresh_secs()));
  } else {
    if (count_ != drawn_count_) out = line(elapsed, 1 << 20, false) + "\n";
    drawn_count_ = count_;
    next_draw_ = now + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options_.plain_secs()));
  }
  std::fwrite(out.data(), 1, out.size(), options_.stream());
  std::fflush(options_.stream());
}

void ProgressBar::write(std::string_view text) {
  if (!active_.on) return;
  std::string out = terminal_ ? "\r\x1b[K" : "";
  out.append(text);
  out += "\n";
  std::fwrite(out.data(), 1, out.size(), options_.stream());
  if (terminal_) draw(false);
  std::fflush(options_.stream());
}

void ProgressBar::refresh() {
  if (active_.on) draw(false);
}

void ProgressBar::close() {
  if (!active_.on) return;
  draw(true);
  active_.on = false;
}

}  // namespace acc
