#pragma once
// A bound on what a YAML file's aliases stand for. yaml-cpp keeps one node for an anchor and all its
// aliases, but whoever walks the tree (the config's checks, its reader) visits that node once per alias,
// so nested aliases multiply: a 396-byte "billion laughs" of nine levels took seconds, and each level
// nine times more. Accelerate writes no aliases into its configs, but PyYAML (which Accelerate reads
// them with) accepts them, so a few are accepted too and only their expansion is bounded.
#include <string>

namespace acc::launcher {

// More values than any config needs (Accelerate's largest, with a DeepSpeed section, has under 100), and
// few enough that walking them takes microseconds.
inline constexpr long kMaxAliasValues = 1000;

// Counts, in one pass over the parser's events (linear in the text), how many values the aliases of
// the first document of `text` add to it. Throws UsageError "path:line:column: ..." at the alias that
// passes kMaxAliasValues. YAML syntax errors are thrown as yaml-cpp's ParserException, as YAML::Load
// throws them.
void check_alias_expansion(const std::string& path, const std::string& text);

}  // namespace acc::launcher
