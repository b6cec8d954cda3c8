#include "yaml_aliases.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <sstream>
#include <vector>

#include "errors.h"

namespace acc::launcher {
namespace {

// The size of every anchored node (values in it, aliases counted by what they stand for), built from
// the events bottom-up; a size never exceeds the values written in the text plus the budget, so the
// counts cannot overflow however deep the nesting.
class AliasCounter : public YAML::EventHandler {
 public:
  explicit AliasCounter(const std::string& path) : path_(path) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnAnchor(const YAML::Mark&, const std::string& name) override { pending_name_ = name; }
  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override { finish(anchor, 1); }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    finish(anchor, 1);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto known = sizes_.find(anchor);
    // An alias of an anchor still open (a node that contains itself) is refused by yaml-cpp's builder
    // or walks as one value; either way it adds one.
    const long size = known == sizes_.end() ? 1 : known->second;
    added_ += size;
    if (added_ > kMaxAliasValues) {
      const auto name = names_.find(anchor);
      throw UsageError(path_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) +
                       ": the aliases of this file (here *" + (name == names_.end() ? "?" : name->second) +
                       ") stand for more than " + std::to_string(kMaxAliasValues) +
                       " values, far more than any config has (a YAML \"billion laughs\"); write the values out "
                       "instead of aliasing them (Accelerate's own configs use no aliases)");
    }
    add(size);
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open(anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open(anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    YAML::anchor_t anchor;
    long size;
  };
  void name(YAML::anchor_t anchor) {
    if (anchor) names_[anchor] = pending_name_;
  }
  void add(long size) {
    if (!open_.empty()) open_.back().size += size;
  }
  void finish(YAML::anchor_t anchor, long size) {
    name(anchor);
    if (anchor) sizes_[anchor] = size;
    add(size);
  }
  void open(YAML::anchor_t anchor) {
    name(anchor);
    open_.push_back({anchor, 1});
  }
  void close() {
    if (open_.empty()) return;
    const Open done = open_.back();
    open_.pop_back();
    if (done.anchor) sizes_[done.anchor] = done.size;
    add(done.size);
  }

  const std::string& path_;
  std::string pending_name_;
  std::map<YAML::anchor_t, long> sizes_;
  std::map<YAML::anchor_t, std::string> names_;
  std::vector<Open> open_;
  long added_ = 0;
};

}  // namespace

void check_alias_expansion(const std::string& path, const std::string& text) {
  // Cheap when there is nothing to count: '*' starts every alias.
  if (text.find('*') == std::string::npos) return;
  std::istringstream in(text);
  YAML::Parser parser(in);
  AliasCounter counter(path);
  parser.HandleNextDocument(counter);
}

}  // namespace acc::launcher
