"""Fenced code blocks of Markdown files, with their doc-test annotations.

A block may be preceded (on the line just before its fence) by an annotation
    <!-- doc-test: key=value key="value with spaces" flag -->
that tells the harness how to check it (see README.md in this folder for the keys).
"""
import re
import shlex
from dataclasses import dataclass, field

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)(?P<lang>[^\s`]*)\s*$")
ANNOTATION = re.compile(r"^\s*<!--\s*doc-test:(?P<body>.*?)-->\s*$")
INLINE_CODE = re.compile(r"(?<!`)`(?P<code>[^`\n]+)`(?!`)")


@dataclass
class Block:
    path: str            # as given (relative to the repository root)
    line: int            # 1-based line of the opening fence
    lang: str
    text: str            # the block's lines, the fence's indentation removed
    options: dict = field(default_factory=dict)

    @property
    def first_line(self):
        """1-based line of the block's first line of code."""
        return self.line + 1

    def where(self):
        return f"{self.path}:{self.line}"


def parse_annotation(body, where):
    options = {}
    for word in shlex.split(body):
        key, eq, value = word.partition("=")
        options[key] = value if eq else True
    return options


def blocks(path, text):
    """Every fenced block of `text` (the contents of `path`), in order."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m.group("indent"), m.group("fence")
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*" + re.escape(fence) + r"\s*$", lines[j]):
            j += 1
        if j == len(lines):
            raise ValueError(f"{path}:{i + 1}: code block opened here is never closed")
        body = [l[len(indent):] if l.startswith(indent) else l.lstrip() for l in lines[i + 1:j]]
        options = {}
        if i > 0:
            a = ANNOTATION.match(lines[i - 1])
            if a:
                options = parse_annotation(a.group("body"), f"{path}:{i}")
        out.append(Block(path, i + 1, m.group("lang").lower(), "\n".join(body), options))
        i = j + 1
    return out


def inline_spans(path, text):
    """(line, code) of every inline code span outside fenced blocks."""
    spans = []
    in_block = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            if in_block is None:
                in_block = m.group("fence")
            elif line.strip() == in_block:
                in_block = None
            continue
        if in_block is None:
            spans.extend((number, s.group("code")) for s in INLINE_CODE.finditer(line))
    return spans
