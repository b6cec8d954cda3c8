#include "output/UnifiedDiff.h"

#include <algorithm>
#include <vector>

namespace accmigrate {
namespace {

std::vector<std::string> splitLines(const std::string &text) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size() - 1;
    lines.push_back(text.substr(pos, end - pos + 1));  // keeps the newline: a missing one is a change
    pos = end + 1;
  }
  return lines;
}

enum class Op { Keep, Remove, Add };

// Longest common subsequence over lines. Files are small; edits are few and local, so the common
// prefix and suffix are trimmed first and the table only covers the changed middle.
std::vector<std::pair<Op, size_t>> lineScript(const std::vector<std::string> &a, const std::vector<std::string> &b) {
  size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix])
    ++suffix;
  size_t n = a.size() - prefix - suffix, m = b.size() - prefix - suffix;
  std::vector<std::vector<unsigned>> lcs(n + 1, std::vector<unsigned>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = a[prefix + i] == b[prefix + j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::vector<std::pair<Op, size_t>> script;  // (op, index into a for Keep/Remove, into b for Add)
  for (size_t i = 0; i < prefix; ++i) script.push_back({Op::Keep, i});
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[prefix + i] == b[prefix + j]) script.push_back({Op::Keep, prefix + i++}), ++j;
    // Removals before additions, as diff -u shows a changed line.
    else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) script.push_back({Op::Remove, prefix + i++});
    else script.push_back({Op::Add, prefix + j++});
  }
  for (size_t k = 0; k < suffix; ++k) script.push_back({Op::Keep, a.size() - suffix + k});
  return script;
}

}  // namespace

std::string unifiedDiff(const std::string &label, const std::string &before, const std::string &after, bool color,
                        unsigned context) {
  if (before == after) return "";
  std::vector<std::string> a = splitLines(before), b = splitLines(after);
  std::vector<std::pair<Op, size_t>> script = lineScript(a, b);
  const char *red = color ? "\033[31m" : "", *green = color ? "\033[32m" : "", *cyan = color ? "\033[36m" : "",
             *bold = color ? "\033[1m" : "", *reset = color ? "\033[0m" : "";
  std::string out = std::string(bold) + "--- a/" + label + "\n+++ b/" + label + reset + "\n";

  // Line numbers (0-based) in a and b before each script entry.
  std::vector<size_t> lineA(script.size() + 1), lineB(script.size() + 1);
  for (size_t k = 0; k < script.size(); ++k) {
    lineA[k + 1] = lineA[k] + (script[k].first != Op::Add);
    lineB[k + 1] = lineB[k] + (script[k].first != Op::Remove);
  }
  for (size_t k = 0; k < script.size();) {
    if (script[k].first == Op::Keep) { ++k; continue; }
    // A hunk: this change, its context, and any change within 2*context lines of it.
    size_t start = k >= context ? k - context : 0;
    size_t last = k;  // the hunk's last change
    for (size_t x = k + 1; x < script.size();) {
      if (script[x].first != Op::Keep) { last = x++; continue; }
      size_t keeps = 0;
      while (x + keeps < script.size() && script[x + keeps].first == Op::Keep) ++keeps;
      if (x + keeps == script.size() || keeps > 2 * context) break;
      x += keeps;
    }
    size_t end = std::min(script.size(), last + 1 + context);
    size_t countA = lineA[end] - lineA[start], countB = lineB[end] - lineB[start];
    out += std::string(cyan) + "@@ -" + std::to_string(lineA[start] + (countA ? 1 : 0)) + "," + std::to_string(countA) +
           " +" + std::to_string(lineB[start] + (countB ? 1 : 0)) + "," + std::to_string(countB) + " @@" + reset + "\n";
    for (size_t x = start; x < end; ++x) {
      auto [op, index] = script[x];
      const std::string &line = op == Op::Add ? b[index] : a[index];
      const char *prefix = op == Op::Keep ? " " : op == Op::Add ? "+" : "-";
      const char *hue = op == Op::Keep ? "" : op == Op::Add ? green : red;
      std::string body = line.back() == '\n' ? line.substr(0, line.size() - 1) : line;
      out += std::string(hue) + prefix + body + (op == Op::Keep ? "" : reset) + "\n";
      if (line.back() != '\n') out += "\\ No newline at end of file\n";
    }
    k = end;
  }
  return out;
}

}  // namespace accmigrate
