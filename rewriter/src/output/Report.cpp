#include "output/Report.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

namespace json = llvm::json;

namespace accmigrate {
namespace {

const char *levelName(Finding::Level level) {
  switch (level) {
    case Finding::Level::Note: return "note";
    case Finding::Level::Warning: return "warning";
    case Finding::Level::Error: return "error";
  }
  return "warning";
}

bool writeJson(const json::Value &value, const std::string &file, std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream out(file, ec);
  if (ec) {
    error = "cannot write " + file + ": " + ec.message();
    return false;
  }
  out << llvm::formatv("{0:2}", value) << "\n";
  return true;
}

std::string fileUri(const std::string &path) {
  llvm::SmallString<256> absolute(path);
  llvm::sys::fs::make_absolute(absolute);
  return "file://" + std::string(absolute);
}

}  // namespace

bool writeJsonReport(const RunSummary &run, const std::string &file, std::string &error) {
  json::Array files;
  for (const UnitResult &unit : run.units) {
    json::Object entry{{"path", unit.mainFile}, {"status", unit.parsed ? "parsed" : "failed"}};
    if (!unit.parsed) entry["diagnostic"] = unit.diagnostic;
    for (const ParseFailure &failure : run.failures) {
      if (failure.unit != &unit) continue;
      // Read from its text: it did not parse.
      entry["training_code"] = json::Array(failure.trainingCode);
      if (!failure.missingHeader.empty()) entry["missing_header"] = failure.missingHeader;
    }
    files.push_back(std::move(entry));
  }
  json::Array changes;
  for (const FileChange &change : run.changes) {
    json::Array edits;
    for (const Edit &e : change.edits)
      edits.push_back(json::Object{{"rule", e.rule}, {"line", e.line}, {"column", e.column},
                                   {"offset", e.offset}, {"length", e.length}, {"text", e.text}});
    changes.push_back(json::Object{{"path", change.path}, {"edits", std::move(edits)}});
  }
  json::Array findings;
  for (const Finding &f : run.findings)
    findings.push_back(json::Object{{"path", f.file}, {"line", f.line}, {"column", f.column}, {"rule", f.rule},
                                    {"level", levelName(f.level)}, {"reason", f.reason},
                                    {"suggestion", f.suggestion}});
  size_t failed = run.failures.size();
  size_t training = std::count_if(run.failures.begin(), run.failures.end(),
                                  [](const ParseFailure &f) { return !f.trainingCode.empty(); });
  json::Object report{{"tool", "acc-migrate"},
                      {"summary", json::Object{{"translation_units", int64_t(run.units.size())},
                                               {"failed", int64_t(failed)},
                                               {"failed_with_training_code", int64_t(training)},
                                               {"files_changed", int64_t(run.changes.size())},
                                               {"findings", int64_t(run.findings.size())}}},
                      {"units", std::move(files)},
                      {"changes", std::move(changes)},
                      {"findings", std::move(findings)}};
  return writeJson(json::Value(std::move(report)), file, error);
}

bool writeSarif(const RunSummary &run, const std::vector<const Rule *> &rules, const std::string &file,
                std::string &error) {
  json::Array ruleDescriptors;
  for (const Rule *rule : rules)
    ruleDescriptors.push_back(json::Object{{"id", rule->name},
                                           {"shortDescription", json::Object{{"text", rule->summary}}}});
  ruleDescriptors.push_back(json::Object{
      {"id", "parse"}, {"shortDescription", json::Object{{"text", "the file could not be parsed and was left unchanged"}}}});
  json::Array results;
  auto location = [](const std::string &path, unsigned line, unsigned column) {
    return json::Array{json::Object{
        {"physicalLocation",
         json::Object{{"artifactLocation", json::Object{{"uri", fileUri(path)}}},
                      {"region", json::Object{{"startLine", line}, {"startColumn", std::max(column, 1u)}}}}}}};
  };
  for (const Finding &f : run.findings)
    results.push_back(json::Object{{"ruleId", f.rule}, {"level", levelName(f.level)},
                                   {"message", json::Object{{"text", f.reason + "; " + f.suggestion}}},
                                   {"locations", location(f.file, f.line, f.column)}});
  for (const FileChange &change : run.changes)
    for (const Edit &e : change.edits)
      results.push_back(json::Object{{"ruleId", e.rule}, {"level", "note"},
                                     {"message", json::Object{{"text", "rewritten for acc"}}},
                                     {"locations", location(e.file, e.line, e.column)}});
  for (const UnitResult &unit : run.units)
    if (!unit.parsed)
      results.push_back(json::Object{{"ruleId", "parse"}, {"level", "error"},
                                     {"message", json::Object{{"text", "not migrated: " + unit.diagnostic}}},
                                     {"locations", location(unit.mainFile, 1, 1)}});
  json::Object sarif{
      {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
      {"version", "2.1.0"},
      {"runs", json::Array{json::Object{
                   {"tool", json::Object{{"driver", json::Object{{"name", "acc-migrate"},
                                                                 {"rules", std::move(ruleDescriptors)}}}}},
                   {"results", std::move(results)}}}}};
  return writeJson(json::Value(std::move(sarif)), file, error);
}

}  // namespace accmigrate
