// Source-text helpers shared by the rules: token extents, statement extents including the `;`,
// indentation, and the range that removes a statement together with its line when it is alone.
#pragma once
#include <clang/AST/Stmt.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Lex/Lexer.h>
#include <string>

namespace accmigrate {

// The location just past the token that starts at `loc`.
clang::SourceLocation afterToken(clang::SourceLocation loc, const clang::SourceManager &sm,
                                 const clang::LangOptions &lang);

// The characters of `range` (a token range), or "" when it cannot be read (macros, invalid).
std::string sourceText(clang::SourceRange range, const clang::SourceManager &sm,
                       const clang::LangOptions &lang);

// A statement's characters including the `;` that ends it (expression statements do not own it).
clang::CharSourceRange statementRange(const clang::Stmt *stmt, const clang::SourceManager &sm,
                                      const clang::LangOptions &lang);

// `statementRange` widened to the whole line (newline included) when nothing else is on it, so a
// removed statement leaves no blank line; otherwise widened over the spaces that follow it.
clang::CharSourceRange removalRange(clang::CharSourceRange stmt, const clang::SourceManager &sm);

// Where a new statement goes after `stmt`, a statement of a block: the start of the next line when
// the rest of the statement's last line is blank or a `//` comment (`ownLine`: the new statement is
// written as a line of its own, indent + text + newline), else right after the statement (newline +
// indent + text). Invalid inside macros.
clang::SourceLocation insertionAfter(const clang::Stmt *stmt, const clang::SourceManager &sm,
                                     const clang::LangOptions &lang, bool &ownLine);

// The leading whitespace of the line holding `loc`.
std::string lineIndent(clang::SourceLocation loc, const clang::SourceManager &sm);

}  // namespace accmigrate
