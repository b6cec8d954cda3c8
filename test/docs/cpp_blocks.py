"""Compiles every C++ block of the documentation, and runs the complete programs.

Conventions (the documentation's contract with this harness):
- A block with `int main(` is a complete program: compiled alone, as a user would copy it, with its own
  #include lines only (no precompiled header that could hide a missing include), linked with acc::acc,
  and run once as one process (annotation `args="..."` gives its arguments). `program=NAME` names the
  executable, so that shell blocks of the same file that start `./NAME` run it.
- Any other block is a fragment. It may not #include anything (a block that shows its includes promises
  that a user can copy it: make it a complete program). Fragments are compiled, one translation unit per
  Markdown file over one shared precompiled header (<torch/torch.h>, <acc/acc.h>), each fragment in a
  namespace of its own, inside a function after a prelude's declarations (`prelude=NAME`, a file in
  preludes/, default `training`), or at namespace scope with `scope=namespace`. All fragments are linked
  into one executable, so an API that is declared but missing from libacc fails too. They are not run.
- `#line` directives make the compiler name the Markdown file and line of every error.

Why a separate CMake project (project/) configured against acc's build tree (export(TARGETS) in
CMakeLists.txt): the blocks get exactly the usage requirements acc::acc gives users (include
directories, libtorch's compile options and libraries), new blocks are picked up at test time without
reconfiguring acc, and a wrong block fails this test instead of breaking acc's own build. The project's
build folder is kept between runs (ccache, Ninja), so an unchanged block costs nothing the next time.
"""
import os
import re
import shutil
import subprocess

CPP_LANGS = {"cpp", "c++", "cc", "cxx"}
MAIN = re.compile(r"\bint\s+main\s*\(")
INCLUDE = re.compile(r"^\s*#\s*include\b", re.M)
BLOCK_SCOPE_MARKER = "// doc-test: block scope"


def slug(text):
    return re.sub(r"[^A-Za-z0-9]", "_", text)


def write_if_changed(path, text):
    """Leaves an unchanged file alone, so Ninja and ccache see nothing to redo."""
    if os.path.exists(path) and open(path).read() == text:
        return
    with open(path, "w") as f:
        f.write(text)


class Prelude:
    def __init__(self, path):
        text = open(path).read()
        if BLOCK_SCOPE_MARKER not in text:
            raise ValueError(f"{path}: no '{BLOCK_SCOPE_MARKER}' line between its namespace-scope and "
                             "block-scope declarations")
        head, tail = text.split(BLOCK_SCOPE_MARKER, 1)
        self.path = path
        self.namespace_part = f'#line 1 "{path}"\n{head}'
        self.block_part = f'#line {head.count(chr(10)) + 2} "{path}"\n{tail}'


class CppBlocks:
    def __init__(self, source_dir, work_dir, preludes_dir, log):
        self.source_dir = source_dir
        self.work_dir = work_dir
        self.preludes_dir = preludes_dir
        self.log = log
        self.failures = []      # (block, message)
        self.programs = {}      # (md path, name) -> executable path, filled by build()
        self.fragments = {}     # md path -> [blocks]
        self.program_blocks = []
        self.names = {}         # slug -> block, to attribute link errors

    # --- sorting the blocks -------------------------------------------------------------------
    def add(self, block):
        if MAIN.search(block.text):
            # Targets are unique per block; `program=` names it for the shell blocks of its own file.
            block.target = f"doc_{slug(block.path)}_L{block.line}"
            block.options.setdefault("program", block.target)
            self.program_blocks.append(block)
        elif INCLUDE.search(block.text):
            self.failures.append((block, "this C++ block #includes headers but has no main(): a block that "
                                  "shows its includes promises that a user can copy it, so make it a complete "
                                  "program (compiled alone and run), or drop the #include lines to make it a "
                                  "fragment compiled after a prelude (see test/docs/README.md)"))
        else:
            self.fragments.setdefault(block.path, []).append(block)

    def prelude(self, block):
        name = block.options.get("prelude", "training")
        path = os.path.join(self.preludes_dir, f"{name}.h")
        if not os.path.exists(path):
            raise LookupError(f"prelude '{name}' does not exist (no {path})")
        return Prelude(path)

    # --- generating the project's sources -----------------------------------------------------
    def fragment_source(self, path, blocks):
        out = [f"// Generated from {path} by test/docs/cpp_blocks.py at test time: edit {path}, not this.",
               "#include <torch/torch.h>", "#include <acc/acc.h>", ""]
        for block in blocks:
            try:
                prelude = self.prelude(block)
            except LookupError as e:
                self.failures.append((block, str(e)))
                continue
            ns = f"{slug(block.path)}_L{block.line}"
            self.names[ns] = block
            code = f'#line {block.first_line} "{block.path}"\n{block.text}\n'
            out.append(f"namespace doc_blocks::{ns} {{")
            out.append(prelude.namespace_part)
            if block.options.get("scope") == "namespace":
                out.append(code)
            else:
                out.append("[[maybe_unused]] void block() {")
                out.append(prelude.block_part)
                out.append("{")  # the block may redeclare a prelude name (its own accelerator)
                out.append(code)
                out.append("}")
                out.append("}")
            out.append(f"}}  // namespace doc_blocks::{ns}\n")
        return "\n".join(out)

    def generate(self):
        src = os.path.join(self.work_dir, "src")
        os.makedirs(src, exist_ok=True)
        fragment_sources, programs = [], []
        for path, blocks in sorted(self.fragments.items()):
            name = os.path.join(src, f"fragments_{slug(path)}.cpp")
            write_if_changed(name, self.fragment_source(path, blocks))
            fragment_sources.append(name)
        for block in self.program_blocks:
            name = os.path.join(src, f"{block.target}.cpp")
            write_if_changed(name, f'#line {block.first_line} "{block.path}"\n{block.text}\n')
            programs += [block.target, name]
        listing = ("# Generated by test/docs/cpp_blocks.py: the documentation's C++ blocks.\n"
                   f"set(DOC_FRAGMENT_SOURCES {' '.join(fragment_sources)})\n"
                   f"set(DOC_PROGRAMS {' '.join(programs)})\n")
        write_if_changed(os.path.join(src, "blocks.cmake"), listing)
        return os.path.join(src, "blocks.cmake")

    # --- building -----------------------------------------------------------------------------
    def build(self, cmake, project_dir, acc_dir, cxx, launcher):
        listing = self.generate()
        build = os.path.join(self.work_dir, "build")
        configure = [cmake, "-S", project_dir, "-B", build, "-G", "Ninja", f"-Dacc_DIR={acc_dir}",
                     f"-DDOC_BLOCKS_LIST={listing}", f"-DCMAKE_CXX_COMPILER={cxx}"]
        if launcher:
            configure.append(f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher.replace('|', ';')}")
        result = subprocess.run(configure, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError("configuring the doc-block project failed:\n" + result.stdout + result.stderr)
        # -k 0: every block's errors, not only the first failing file's.
        result = subprocess.run([cmake, "--build", build, "--", "-k", "0"], capture_output=True, text=True)
        output = result.stdout + result.stderr
        self.log(f"built the doc-block project ({'ok' if result.returncode == 0 else 'errors'})")
        self.attribute(output, result.returncode != 0)
        for block in self.program_blocks:
            exe = os.path.join(build, block.target)
            if os.path.exists(exe) and not any(b is block for b, _ in self.failures):
                self.programs[(block.path, block.options["program"])] = exe

    def all_blocks(self):
        return self.program_blocks + [b for bs in self.fragments.values() for b in bs]

    def block_at(self, path, line):
        for block in self.all_blocks():
            if block.path == path and block.first_line <= line <= block.first_line + block.text.count("\n"):
                return block
        return None

    def attribute(self, output, failed):
        """Gives each compiler or linker message to the block it names."""
        messages = {}
        location = re.compile(r"^(?P<path>[^\s:]+\.md):(?P<line>\d+)(?::\d+)?: (?P<kind>error|fatal error)")
        lines = output.split("\n")
        for i, line in enumerate(lines):
            m = location.match(line)
            block = m and self.block_at(m.group("path"), int(m.group("line")))
            if not block:
                for ns, candidate in self.names.items():
                    if f"doc_blocks::{ns}::" in line and ("undefined reference" in line or "error" in line):
                        block = candidate
            if block:
                messages.setdefault(id(block), (block, []))[1].append("\n".join(lines[i:i + 4]))
        for block, texts in messages.values():
            kind = "program" if block in self.program_blocks else (
                f"fragment, prelude {block.options.get('prelude', 'training')}"
                + (", namespace scope" if block.options.get("scope") == "namespace" else ""))
            self.failures.append((block, f"C++ block ({kind}) does not compile or link:\n"
                                  + "\n".join(texts[:6])))
        if failed and not messages:
            self.failures.append((None, "the doc-block project failed to build, at no block's line:\n"
                                  + output[-6000:]))

    # --- running ------------------------------------------------------------------------------
    def run_programs(self, env, cwd, timeout):
        for block in self.program_blocks:
            exe = self.programs.get((block.path, block.options["program"]))
            if not exe:
                continue
            args = block.options.get("args", "")
            args = args.split() if isinstance(args, str) else []
            try:
                result = subprocess.run([exe] + args, cwd=cwd, env=env, capture_output=True, text=True,
                                        timeout=timeout)
                ok, why = result.returncode == 0, f"exit status {result.returncode}"
                output = result.stdout + result.stderr
            except subprocess.TimeoutExpired as e:
                ok, why, output = False, f"still running after {timeout} s", str(e.stdout or "")
            if ok:
                self.log(f"{block.where()}: program {block.options['program']} ran on one process: ok")
            else:
                self.failures.append((block, f"the complete program ({block.options['program']}) compiled "
                                      f"but did not run as one process ({why}):\n{output[-3000:]}"))
