#include "cli_style.h"

#include <iostream>

#include "did_you_mean.h"
#include "errors.h"

namespace acc::launcher {

std::string flag_names(const std::string& snake_name, const std::string& short_names) {
  std::string names = short_names.empty() ? snake_name : short_names + "," + snake_name;
  std::string kebab = snake_name;
  for (size_t i = 2; i < kebab.size(); ++i)
    if (kebab[i] == '_') kebab[i] = '-';
  if (kebab != snake_name) names += "," + kebab;
  return names;
}

std::string HelpFormatter::make_option_name(const CLI::Option* option, bool is_positional) const {
  if (is_positional) return CLI::Formatter::make_option_name(option, is_positional);
  std::string out;
  for (const auto& s : option->get_snames()) out += "-" + s + ", ";
  if (!option->get_lnames().empty()) out += "--" + option->get_lnames().front();
  else if (!out.empty()) out.resize(out.size() - 2);
  return out;
}

std::string HelpFormatter::make_usage(const CLI::App* app, std::string name) const {
  std::string usage = "Usage: " + name + (app->get_options().empty() ? "" : " [options]");
  if (!trailing_usage_.empty()) usage += " " + trailing_usage_;
  return usage + "\n";
}

void style_app(CLI::App& app, const std::string& version_text, const std::string& trailing_usage,
               const std::string& footer) {
  app.formatter(std::make_shared<HelpFormatter>(trailing_usage));
  app.get_formatter()->column_width(36);
  app.set_help_flag("-h,--help", "Show this help and exit");
  app.set_version_flag("--version", version_text, "Show the version and exit");
  app.footer(footer);
}

std::optional<int> parse_or_exit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return ExitCode::kOk;
  } catch (const CLI::CallForVersion& v) {
    std::cout << v.what() << "\n";
    return ExitCode::kOk;
  } catch (const CLI::ParseError& e) {
    std::cerr << app.get_name() << ": error: " << e.what() << " (see " << app.get_name() << " --help)\n";
    return ExitCode::kUsage;
  }
  return std::nullopt;
}

void throw_unknown_flag(const CLI::App& app, const std::string& flag) {
  std::vector<std::string> known;
  for (const CLI::Option* option : app.get_options())
    for (const auto& name : option->get_lnames()) known.push_back("--" + name);
  std::string message = "unknown flag '" + flag + "'";
  const std::string bare = flag.substr(0, flag.find('='));
  if (auto near = closest_match(bare, known)) message += " (did you mean '" + *near + "'?)";
  throw UsageError(message + "; see " + app.get_name() + " --help");
}

}  // namespace acc::launcher
