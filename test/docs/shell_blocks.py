"""Checks the shell commands of the documentation that start acc's tools, torchrun or accelerate launch.

Where commands come from: ```sh / ```bash / ```console / ```shell blocks (every line; `$ ` prompts
and `\\` continuations understood; `bash -c '...'` and wrappers such as srun or exec looked into), and
inline code spans that begin with a tool's name (flags only, since prose abbreviates them).

The mode each command gets (printed for every command):
- run:      acc-env, acc-test, acc-config default, `acc-migrate --list-rules`, and acc-launch on one
            machine: run for real in a scratch HOME. acc-launch starts the doc program the command names
            (`./train`, built from a C++ block with `program=train` in the same file) or, for a program the
            docs do not build, /bin/true in its place. Commands run as written otherwise (the test runs
            alone: RUN_SERIAL), except paths under the repository root made absolute.
- flags:    every other acc tool command (several machines, paths that exist only on a user's machine,
            inline spans): each flag must be one the tool's --help (or its subcommand's) lists, with a
            value where the tool wants one.
- parsed:   torchrun and accelerate launch: parsed by their own parsers from the venv, and what they would
            start resolved by their own code (python_launchers.py); then run for real when the program is
            a doc program.
Commands of other programs (make, srun's own flags, mpirun) are not checked and are listed as such.
"""
import json
import os
import re
import shlex
import socket
import subprocess

ACC_TOOLS = {"acc-launch", "acc-config", "acc-env", "acc-test", "acc-migrate", "acc-merge-weights",
             "acc-selftest"}
SHELL_LANGS = {"sh", "bash", "console", "shell", "shell-session"}
WRAPPERS = {"srun", "exec", "env", "time", "sudo", "nohup"}
OPERATORS = {";", "&&", "||", "|", "&", "(", ")"}


class Command:
    def __init__(self, where, tool, args, inline=False, text=""):
        self.where, self.tool, self.args, self.inline, self.text = where, tool, args, inline, text

    def __str__(self):
        return " ".join([self.tool] + self.args)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def split_words(line):
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def commands_in_words(words, where, inline=False):
    """The tool commands among shell words (simple commands split at operators)."""
    found, current = [], []
    for word in words + [";"]:
        if word in OPERATORS:
            found += tool_command(current, where, inline)
            current = []
        else:
            current.append(word)
    return found


def tool_command(words, where, inline):
    i = 0
    while i < len(words):
        word = words[i]
        base = os.path.basename(word)
        if word in ("bash", "sh") and words[i + 1:i + 2] == ["-c"]:
            return commands_in_words(split_words(words[i + 2]), where, inline) if i + 2 < len(words) else []
        if base in ACC_TOOLS:
            return [Command(where, base, words[i + 1:], inline)]
        if base == "torchrun":
            return [Command(where, "torchrun", words[i + 1:], inline)]
        if base == "accelerate" and words[i + 1:i + 2] == ["launch"]:
            return [Command(where, "accelerate launch", words[i + 2:], inline)]
        if "=" in word and not word.startswith("-") and i == 0 or base in WRAPPERS or (i > 0 and word.startswith("-")):
            i += 1   # VAR=value, a wrapper, or a wrapper's flag: look further
            continue
        return []
    return []


def block_commands(block):
    """(commands, other command lines) of one shell block."""
    commands, others = [], []
    # `\` continuations joined; each logical line is reported at the block line where it starts.
    logical = []
    raw = block.text.split("\n")
    i = 0
    while i < len(raw):
        first = i
        line = raw[i]
        while line.endswith("\\") and i + 1 < len(raw):
            i += 1
            line = line[:-1] + " " + raw[i]
        logical.append((block.first_line + first, re.sub(r"^\s*\$ ", "", line)))
        i += 1
    for number, line in logical:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{block.path}:{number}"
        try:
            words = split_words(line)
        except ValueError as e:
            commands.append(Command(where, "shell", [], text=f"cannot be split into words: {e}"))
            continue
        found = commands_in_words(words, where)
        commands += found
        if not found:
            others.append((where, line.strip()))
    return commands, others


TOOL_IN_SPAN = re.compile(r"^(?:build/bin/)?(acc-[a-z-]+|torchrun|accelerate launch)(\s|$)")


def inline_commands(path, spans):
    out = []
    for line, code in spans:
        m = TOOL_IN_SPAN.match(code)
        if not m or (m.group(1).startswith("acc-") and m.group(1) not in ACC_TOOLS):
            continue
        where = f"{path}:{line}"
        try:
            words = split_words(code.replace("[", " ").replace("]", " "))
        except ValueError:
            continue
        out += commands_in_words(words, where, inline=True)
    return out


class ToolHelp:
    """The flags a tool (or one of its subcommands) lists in its --help."""
    OPTION = re.compile(r"^\s+(?:(-\w)(?:, |\s))?(--[\w-]+)(=<[^>]*>| [A-Z0-9][\w.,-]*)?")
    SHORT = re.compile(r"^\s+(-\w)( <[^>]*>| [A-Z][\w-]*)?\s")  # LLVM's `-p <dir>`

    def __init__(self, bin_dir, env):
        self.bin_dir, self.env, self.cache = bin_dir, env, {}

    def flags(self, tool, sub=None):
        key = (tool, sub)
        if key not in self.cache:
            argv = [os.path.join(self.bin_dir, tool)] + ([sub] if sub else []) + ["--help"]
            out = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=30).stdout
            flags = {}
            for line in out.split("\n"):
                m = self.OPTION.match(line)
                short = self.SHORT.match(line)
                if short and not m:
                    flags[short.group(1)] = bool(short.group(2))
                if m:
                    takes_value = bool(m.group(3))
                    for name in filter(None, (m.group(1), m.group(2))):
                        flags[normalize(name)] = takes_value
            if tool == "acc-migrate":  # LLVM's cl::opt also takes -name for --name, and -- ends flags
                flags.update({normalize("-" + k.lstrip("-")): v for k, v in list(flags.items())})
            self.cache[key] = flags
        return self.cache[key]


def normalize(flag):
    """acc-launch accepts --num-processes for --num_processes."""
    dashes = len(flag) - len(flag.lstrip("-"))
    return flag[:dashes] + flag[dashes:].replace("-", "_")


# Tools whose arguments after the first positional one belong to the launched program.
PROGRAM_TOOLS = {"acc-launch", "acc-test"}


def check_flags(command, help_):
    """Problems with the flags of an acc tool command, from its --help."""
    args = list(command.args)
    sub = None
    if command.tool == "acc-config" and args[:1] == ["default"]:
        sub, args = "default", args[1:]
    known = help_.flags(command.tool, sub)
    problems, positional = [], []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            break
        if word.startswith("-") and len(word) > 1 and not re.match(r"^-\d", word):
            name, eq, _ = word.partition("=")
            if normalize(name) not in known:
                problems.append(f"{command.tool}{' ' + sub if sub else ''} has no flag {name} "
                                f"(see {command.tool}{' ' + sub if sub else ''} --help)")
            elif known[normalize(name)] and not eq:
                if i + 1 >= len(args) and not command.inline:  # prose may name a flag without its value
                    problems.append(f"{name} needs a value")
                i += 1
        else:
            positional.append(word)
            if command.tool in PROGRAM_TOOLS:
                break
        i += 1
    return problems, positional


class ShellChecks:
    def __init__(self, source_dir, bin_dir, python, env, programs, log, scratch):
        self.source_dir, self.bin_dir, self.python = source_dir, bin_dir, python
        self.env, self.programs, self.log, self.scratch = env, programs, log, scratch
        self.help = ToolHelp(bin_dir, env)
        self.failures = []   # (where, message)

    def fail(self, command, message):
        self.failures.append((command.where, f"`{command}`: {message}"))

    def program_for(self, command, name):
        """The executable of a doc program named like `./train`, from the command's own Markdown file."""
        path = command.where.rsplit(":", 1)[0]
        return self.programs.get((path, os.path.basename(name)))

    def absolute(self, args):
        """Paths the docs give relative to the repository root (configs/...), made absolute."""
        return [os.path.join(self.source_dir, a) if not a.startswith("-") and "/" in a and
                os.path.exists(os.path.join(self.source_dir, a)) else a for a in args]

    def run(self, command, argv, timeout=120, env=None):
        try:
            result = subprocess.run(argv, cwd=self.scratch, env=env or self.env, capture_output=True,
                                    text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except subprocess.TimeoutExpired:
            self.fail(command, f"still running after {timeout} s")
            return False
        if result.returncode != 0:
            self.fail(command, f"exit status {result.returncode}:\n" + (result.stdout + result.stderr)[-3000:])
            return False
        return True

    def check_acc_tool(self, command):
        problems, positional = check_flags(command, self.help)
        for p in problems:
            self.fail(command, p)
        if problems or command.inline:
            return "flags"
        args = self.absolute(command.args)
        exe = os.path.join(self.bin_dir, command.tool)
        if command.tool == "acc-launch":
            machines = "--num_machines" in map(normalize, args) and \
                args[list(map(normalize, args)).index("--num_machines") + 1] not in ("1",)
            if machines or not positional:
                return "flags (several machines)" if machines else "flags"
            at = args.index(positional[0]) if positional[0] in args else len(args)
            flags, program = args[:at], args[at:]
            doc_program = self.program_for(command, program[0])
            if doc_program:
                argv, mode = [exe] + flags + [doc_program] + program[1:], f"run ({program[0]}: the doc program)"
            else:
                argv, mode = [exe] + flags + ["/bin/true"], f"run ({program[0]} replaced by /bin/true)"
            self.run(command, argv)
            return mode
        if command.tool in ("acc-env", "acc-test") or (command.tool == "acc-config" and args[:1] == ["default"]):
            self.run(command, [exe] + args)
            return "run"
        if command.tool == "acc-migrate" and not positional:
            self.run(command, [exe] + args)
            return "run"
        return "flags"

    def check_launchers(self, commands):
        """torchrun and accelerate launch commands, parsed in one Python process."""
        if not commands:
            return {}
        items = [{"tool": "torchrun" if c.tool == "torchrun" else "accelerate", "argv": c.args,
                  "inline": c.inline} for c in commands]
        env = dict(self.env)
        result = subprocess.run([self.python, os.path.join(os.path.dirname(__file__), "python_launchers.py")],
                                input=json.dumps(items), capture_output=True, text=True, env=env, timeout=300)
        if result.returncode != 0:
            raise RuntimeError("python_launchers.py failed:\n" + result.stderr[-3000:])
        modes = {}
        for command, verdict in zip(commands, json.loads(result.stdout)):
            if not verdict["ok"]:
                self.fail(command, verdict["error"])
                modes[id(command)] = "parsed"
                continue
            if verdict.get("flags_only"):
                modes[id(command)] = "parsed (flags only: no program)"
                continue
            program = verdict.get("command", [""])[0]
            doc_program = None if command.inline else self.program_for(command, program)
            if not doc_program:
                modes[id(command)] = "parsed"
                continue
            port = str(free_port())
            args = [doc_program if a == program else a for a in command.args]
            if command.tool == "torchrun":
                argv = [self.python, "-m", "torch.distributed.run", "--master_port", port] + args
            else:
                argv = [self.python, "-m", "accelerate.commands.launch", "--main_process_port", port] + args
            self.run(command, argv, timeout=180)
            modes[id(command)] = f"parsed, run ({program}: the doc program)"
        return modes

    def check(self, commands):
        launchers = [c for c in commands if c.tool in ("torchrun", "accelerate launch")]
        modes = self.check_launchers(launchers)
        for command in commands:
            if command.tool == "shell":
                self.failures.append((command.where, command.text))
                continue
            if command.tool in ACC_TOOLS:
                modes[id(command)] = self.check_acc_tool(command)
            kind = "inline" if command.inline else "block"
            self.log(f"{command.where}: [{modes[id(command)]}, {kind}] {command}")
