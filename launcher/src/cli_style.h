#pragma once
// Conventions shared by the four tools' command lines (CLI11): every multi-word flag is accepted as
// --snake_case (Accelerate's spelling, shown in --help) and --kebab-case; errors end up on stderr as
// "<tool>: error: ..." with exit status 2.
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace acc::launcher {

// "--num_processes" -> "--num_processes,--num-processes" (plus any short names given, e.g. "-n").
std::string flag_names(const std::string& snake_name, const std::string& short_names = "");

// Shows one spelling per flag in --help and names the trailing program in the usage line.
class HelpFormatter : public CLI::Formatter {
 public:
  explicit HelpFormatter(std::string trailing_usage = "") : trailing_usage_(std::move(trailing_usage)) {}
  std::string make_option_name(const CLI::Option* option, bool is_positional) const override;
  std::string make_usage(const CLI::App* app, std::string name) const override;

 private:
  std::string trailing_usage_;
};

// Applies the formatter, the help and version flags and the footer to `app`.
void style_app(CLI::App& app, const std::string& version_text, const std::string& trailing_usage,
               const std::string& footer);

// Runs CLI11's parse. Returns an exit status when the tool must stop (help, version, error: printed
// here), nullopt to go on.
std::optional<int> parse_or_exit(CLI::App& app, int argc, char** argv);

// An unknown flag ("--num_proces") as a UsageError naming the closest known flag.
[[noreturn]] void throw_unknown_flag(const CLI::App& app, const std::string& flag);

}  // namespace acc::launcher
