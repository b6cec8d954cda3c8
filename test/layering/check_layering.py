#!/usr/bin/env python3
"""The include structure of the source tree, as docs/architecture.md describes it.

- The wings never include each other: runtime/, launcher/ and rewriter/ share only the
  environment contract (contract/acc/environment.h) and the launch code of common/
  (<acc_common/...>).
- common/ (acc_common, linked by the launcher and by libacc) includes no wing and no torch header:
  of acc's own headers it sees only the contract.
- runtime/src is grouped by concern; the folders include each other without cycles, counting a
  public header (<acc/...>) as the folder's that implements it (OWNERS below).
- The state-dict seam: checkpoint/ includes no strategy (ddp/, fsdp/, parallel/), and a strategy sees only
  the seam's headers of checkpoint/ (checkpoint/SEAM below).
- Public headers (runtime/include/acc) include no private header of runtime/src.
- comm/gate/ (rank 0's authenticating store gate and its clients) is torch-free and self-contained:
  of acc's code it sees only itself and base/ (GATE below), so that it stays testable without torch.
- The runtime's tests mirror runtime/src: runtime/test/<path>/ tests runtime/src/<path>/, and the
  top-level test/ (the suites that cross the wings) has no folder named after a runtime concern.
- function_launcher/ (acc::launch, which forks) sees torch's headers in one file only (TORCH_SEAMS
  below), so that nothing else in it can touch CUDA or torch's threads by accident.

Usage: check_layering.py [ROOT]   (default: the repository this script is in)
Prints each violation with the file and line that makes it; exit status 1 when there is one.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)
SOURCE = (".h", ".hpp", ".cpp", ".cc")

# checkpoint/ headers that a parallelism strategy may include: the seam and the file formats a
# strategy's layout writes with.
SEAM = {"checkpoint/state_dict_layout.h", "checkpoint/shard_files.h", "checkpoint/optimizer_files.h"}
STRATEGIES = {"ddp", "fsdp", "parallel"}

# The folder of runtime/src that implements each public header (runtime/include/acc/...): including
# the header depends on that folder. A new public header must be added here.
OWNERS = {
    "base": ["errors.h", "testing.h", "warnings.h"],
    "config": ["fsdp.h", "launch_info.h", "options.h", "project_configuration.h", "detail/bucket_size.h",
               # The tracker interface and LogWith are the vocabulary of the log_with option;
               # tracking/ implements the trackers.
               "tracker.h"],
    "comm": ["collectives.h", "process_control.h", "state.h", "tensor_tree.h"],
    "amp": ["autocast.h", "grad_scaler.h", "detail/fused_step_scaling.h"],
    "optim": ["lr_schedules.h", "optimizer.h", "scheduler.h", "detail/data_loader_state.h"],
    "data": ["data_loader.h", "data_sharding.h", "to_device.h"],
    "checkpoint": ["checkpoint_model.h", "checkpointing.h", "safetensors.h", "safetensors_format.h",
                   "detail/checkpoint_registry.h"],
    "tracking": ["progress_bar.h", "tracking.h"],
    "hooks": ["activation_checkpointing.h", "hooks.h"],
    "inference": ["big_modeling.h", "device_map.h"],
    "function_launcher": ["function_launcher.h"],
    "core": ["acc.h", "accelerator.h", "version.h"],
}
OWNER_OF = {"acc/" + header: folder for folder, headers in OWNERS.items() for header in headers}

# comm/gate/ includes no torch header, and of runtime/src only itself and these folders.
GATE = "comm/gate/"
GATE_SEES = {"base"}

# Folders of runtime/src that include torch's headers in the named files only.
TORCH_SEAMS = {"function_launcher": {"function_launcher/torch_in_rank.cpp"}}
TORCH_HEADERS = ("torch/", "ATen/", "c10/", "caffe2/")


WING_FOLDERS = ("runtime/", "launcher/", "rewriter/")


def sources(root, top):
    for folder, _, files in os.walk(os.path.join(root, top)):
        for name in sorted(files):
            if name.endswith(SOURCE):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for match in INCLUDE.finditer(text):
                    line = text.count("\n", 0, match.start()) + 1
                    yield os.path.relpath(path, root), line, match.group(1), match.group(2)


def find_cycle(graph):
    """A cycle of folders as a list [a, b, ..., a], or None."""
    state = {}
    stack = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def check(root):
    problems = []
    src = os.path.join(root, "runtime", "src")
    folders = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))} if os.path.isdir(src) else set()

    # The wings.
    # (The code of each wing, not its tests: the rewriter's test inputs are user programs.)
    wings = {"launcher": ("launcher/src", "launcher/tools"), "rewriter": ("rewriter/src",),
             "runtime": ("runtime/src", "runtime/include", "runtime/tools")}
    for wing, tops in wings.items():
        foreign = tuple(other + "/" for other in wings if other != wing)
        for path, line, _, target in (item for top in tops for item in sources(root, top)):
            if target.startswith(foreign) or target.startswith(tuple("../" + f for f in foreign)):
                problems.append(f"{path}:{line}: the {wing} includes '{target}' of another wing")
            if wing != "runtime" and target.startswith("acc/") and target != "acc/environment.h":
                problems.append(f"{path}:{line}: the {wing} includes the runtime's '{target}'; the wings share only "
                                "acc/environment.h (contract/) and acc_common/ (common/)")

    # common/: below both wings that link it, so it may see neither of them, nor torch.
    for path, line, _, target in sources(root, "common"):
        bare = target
        while bare.startswith("../"):
            bare = bare[3:]
        if target.startswith(TORCH_HEADERS):
            problems.append(f"{path}:{line}: common/ includes the torch header '{target}'; common/ is torch-free "
                            "(both the launcher and libacc link it)")
        elif bare.startswith(WING_FOLDERS):
            problems.append(f"{path}:{line}: common/ includes '{target}' of a wing; the wings include common/, "
                            "never the other way")
        elif target.startswith("acc/") and target != "acc/environment.h":
            problems.append(f"{path}:{line}: common/ includes the runtime's '{target}'; of acc's own headers "
                            "common/ sees only acc/environment.h (contract/)")

    # The runtime's tests beside it, mirroring its folders.
    tests = os.path.join(root, "runtime", "test")
    for folder, _, names in sorted(os.walk(tests)):
        relative = os.path.relpath(folder, tests).replace(os.sep, "/")
        if relative != "." and names and not os.path.isdir(os.path.join(src, relative)):
            problems.append(f"runtime/test/{relative}/: no runtime/src/{relative}/ to mirror; a runtime test goes "
                            "in the folder of the concern it tests, a suite that crosses the wings in test/")
    for name in sorted(folders):
        if os.path.isdir(os.path.join(root, "test", name)):
            problems.append(f"test/{name}/: the tests of the runtime's {name}/ go in runtime/test/{name}/; test/ "
                            "holds the suites that cross the wings")

    # Folders of runtime/src, and the public headers as their owners'.
    graph = {f: set() for f in folders}
    where = {}
    include = os.path.join("runtime", "include")
    public = set()
    for folder, _, names in os.walk(os.path.join(root, include)):
        for name in names:
            if name.endswith((".h", ".h.in")):
                path = os.path.relpath(os.path.join(folder, name), os.path.join(root, include))
                public.add(path.replace(os.sep, "/").removesuffix(".in"))
    for header in sorted(public - OWNER_OF.keys()):
        problems.append(f"runtime/include/{header}: a public header with no owning folder; add it to OWNERS in "
                        "test/layering/check_layering.py under the folder that implements it")

    def add_edge(here, there, path, line, target, quote):
        if there != here and here in graph and there in graph:
            graph[here].add(there)
            where.setdefault((here, there), f"{path}:{line} includes {quote[0]}{target}{quote[1]}")

    for path, line, kind, target in sources(root, os.path.join("runtime", "src")):
        parts = path.split(os.sep)
        if len(parts) < 4:
            continue  # runtime/src/pch.h
        here = parts[2]
        head = target.split("/")[0]
        if here in TORCH_SEAMS and target.startswith(TORCH_HEADERS) and \
                "/".join(parts[2:]) not in TORCH_SEAMS[here]:
            problems.append(f"{path}:{line}: {here}/ includes the torch header '{target}'; only "
                            f"{', '.join(sorted(TORCH_SEAMS[here]))} may")
        if "/".join(parts[2:]).startswith(GATE):
            owner = OWNER_OF.get(target) if kind == "<" else head if head in folders else None
            if target.startswith(TORCH_HEADERS):
                problems.append(f"{path}:{line}: {GATE} includes the torch header '{target}'; the gate is torch-free")
            elif owner is not None and owner not in GATE_SEES and not target.startswith(GATE):
                problems.append(f"{path}:{line}: {GATE} includes '{target}' ({owner}/); the gate sees only "
                                f"itself and {', '.join(sorted(GATE_SEES))}/")
        if kind == "<" and target in OWNER_OF:
            add_edge(here, OWNER_OF[target], path, line, target, "<>")
        if kind != '"' or head not in folders:
            continue
        add_edge(here, head, path, line, target, '""')
        if here == "checkpoint" and head in STRATEGIES:
            problems.append(f"{path}:{line}: checkpoint/ includes the strategy header '{target}'; go through "
                            "checkpoint/state_dict_layout.h")
        if here in STRATEGIES and head == "checkpoint" and target not in SEAM:
            problems.append(f"{path}:{line}: {here}/ includes '{target}', a checkpoint internal; a strategy sees "
                            f"only {', '.join(sorted(SEAM))}")

    # Public headers: no private header, and an include of another owner's is its folder's edge.
    for path, line, kind, target in sources(root, include):
        if kind == '"' or target.split("/")[0] in folders:
            problems.append(f"{path}:{line}: public header includes the private '{target}'; move what it needs "
                            "to include/acc/detail/")
        header = os.path.relpath(path, include).replace(os.sep, "/").removesuffix(".in")
        if header in OWNER_OF and target in OWNER_OF:
            add_edge(OWNER_OF[header], OWNER_OF[target], path, line, target, "<>")
    cycle = find_cycle(graph)
    if cycle:
        steps = [where[(a, b)] for a, b in zip(cycle, cycle[1:])]
        problems.append("runtime/src folders include each other in a cycle " + " -> ".join(cycle) + ":\n    " +
                        "\n    ".join(steps))
    return problems, graph


def layers(graph):
    """Each folder's layer: 0 for one that includes no other, else one above the highest it includes."""
    level = {}

    def visit(node):
        if node not in level:
            level[node] = 0  # the graph has no cycle here
            level[node] = 1 + max((visit(n) for n in graph[node]), default=-1)
        return level[node]

    for node in graph:
        visit(node)
    return level


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    problems, graph = check(os.path.abspath(root))
    if problems:
        for problem in problems:
            print("layering: " + problem)
        print(f"layering: {len(problems)} problem(s); docs/architecture.md says where things go")
        return 1
    print("layering: ok; runtime/src folders from the top layer down, each including only lower ones:")
    level = layers(graph)
    for folder in sorted(graph, key=lambda f: (-level[f], f)):
        print(f"  {level[folder]:2d} {folder} -> {', '.join(sorted(graph[folder])) or '(none)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
