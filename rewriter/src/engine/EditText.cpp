#include "engine/EditText.h"

using namespace clang;

namespace accmigrate {

SourceLocation afterToken(SourceLocation loc, const SourceManager &sm, const LangOptions &lang) {
  return Lexer::getLocForEndOfToken(loc, 0, sm, lang);
}

std::string sourceText(SourceRange range, const SourceManager &sm, const LangOptions &lang) {
  if (range.isInvalid() || range.getBegin().isMacroID() || range.getEnd().isMacroID()) return "";
  bool invalid = false;
  StringRef text = Lexer::getSourceText(CharSourceRange::getTokenRange(range), sm, lang, &invalid);
  return invalid ? "" : text.str();
}

CharSourceRange statementRange(const Stmt *stmt, const SourceManager &sm, const LangOptions &lang) {
  SourceLocation end = afterToken(stmt->getEndLoc(), sm, lang);
  // Declarations own their `;`; expression statements end before it.
  std::optional<Token> next = Lexer::findNextToken(stmt->getEndLoc(), sm, lang);
  if (next && next->is(tok::semi)) end = next->getEndLoc();
  return CharSourceRange::getCharRange(stmt->getBeginLoc(), end);
}

CharSourceRange removalRange(CharSourceRange stmt, const SourceManager &sm) {
  FileID file = sm.getFileID(stmt.getBegin());
  StringRef buffer = sm.getBufferData(file);
  unsigned begin = sm.getFileOffset(stmt.getBegin());
  unsigned end = sm.getFileOffset(stmt.getEnd());
  unsigned lineStart = begin;
  while (lineStart > 0 && (buffer[lineStart - 1] == ' ' || buffer[lineStart - 1] == '\t')) --lineStart;
  unsigned after = end;
  while (after < buffer.size() && (buffer[after] == ' ' || buffer[after] == '\t')) ++after;
  bool aloneBefore = lineStart == 0 || buffer[lineStart - 1] == '\n';
  bool aloneAfter = after == buffer.size() || buffer[after] == '\n' || buffer[after] == '\r';
  SourceLocation start = sm.getLocForStartOfFile(file);
  if (aloneBefore && aloneAfter) {
    if (after < buffer.size() && buffer[after] == '\r') ++after;
    if (after < buffer.size() && buffer[after] == '\n') ++after;
    return CharSourceRange::getCharRange(start.getLocWithOffset(lineStart), start.getLocWithOffset(after));
  }
  // Something else shares the line (a trailing comment, another statement): keep it, drop our spaces.
  return CharSourceRange::getCharRange(stmt.getBegin(),
                                       start.getLocWithOffset(aloneAfter ? end : after));
}

SourceLocation insertionAfter(const Stmt *stmt, const SourceManager &sm, const LangOptions &lang, bool &ownLine) {
  CharSourceRange range = statementRange(stmt, sm, lang);
  if (range.getBegin().isMacroID() || range.getEnd().isMacroID()) return SourceLocation();
  StringRef buffer = sm.getBufferData(sm.getFileID(range.getEnd()));
  unsigned end = sm.getFileOffset(range.getEnd());
  unsigned after = end;
  while (after < buffer.size() && (buffer[after] == ' ' || buffer[after] == '\t')) ++after;
  if (buffer.substr(after).startswith("//")) after = buffer.find('\n', after);
  ownLine = after == StringRef::npos || after == buffer.size() || buffer[after] == '\n' || buffer[after] == '\r';
  if (!ownLine) return range.getEnd();
  if (after == StringRef::npos || after == buffer.size()) {  // the last line has no newline
    ownLine = false;
    return range.getEnd().getLocWithOffset(buffer.size() - end);
  }
  if (buffer[after] == '\r') ++after;
  return range.getEnd().getLocWithOffset(after + 1 - end);
}

std::string lineIndent(SourceLocation loc, const SourceManager &sm) {
  loc = sm.getExpansionLoc(loc);
  StringRef buffer = sm.getBufferData(sm.getFileID(loc));
  unsigned offset = sm.getFileOffset(loc);
  unsigned lineStart = offset;
  while (lineStart > 0 && buffer[lineStart - 1] != '\n') --lineStart;
  unsigned end = lineStart;
  while (end < buffer.size() && (buffer[end] == ' ' || buffer[end] == '\t')) ++end;
  return buffer.substr(lineStart, end - lineStart).str();
}

}  // namespace accmigrate
