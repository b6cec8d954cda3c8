#!/usr/bin/env python3
"""check_layering.py finds each kind of violation in a small tree made here, and names it."""
import os
import shutil
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layering.py")


def tree(files):
    root = tempfile.mkdtemp(prefix="acc-layering-")
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    return root


def run(files):
    root = tree(files)
    try:
        result = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
    finally:
        shutil.rmtree(root)
    return result.returncode, result.stdout


GOOD = {
    "runtime/src/comm/group.h": "#pragma once\n",
    "runtime/src/ddp/reducer.cpp": '#include "comm/group.h"\n',
    "runtime/src/checkpoint/state_dict_layout.h": "#pragma once\n",
    "runtime/src/checkpoint/training_state.cpp": '#include "checkpoint/state_dict_layout.h"\n',
    "runtime/src/fsdp/layout.cpp": '#include "checkpoint/state_dict_layout.h"\n#include "ddp/reducer.h"\n',
    "runtime/include/acc/options.h": "#include <acc/detail/bucket_size.h>\n#include <vector>\n",
    "runtime/include/acc/detail/bucket_size.h": "#pragma once\n",
    "runtime/include/acc/accelerator.h": "#include <acc/options.h>\n",
    "runtime/src/config/options.cpp": "#include <acc/options.h>\n",
    "runtime/src/core/accelerator.cpp": '#include <acc/accelerator.h>\n#include "comm/group.h"\n',
    "launcher/src/plan.cpp": "#include <acc/environment.h>\n#include <acc_common/job_id.h>\n",
    "runtime/src/function_launcher/env.cpp": "#include <acc_common/job_id.h>\n",
    "common/src/job_id.cpp": "#include <acc_common/job_id.h>\n#include <acc/environment.h>\n#include <sys/random.h>\n",
}

CASES = [
    ("a cycle", {"runtime/src/comm/group.cpp": '#include "ddp/reducer.h"\n'},
     ["cycle comm -> ddp -> comm", 'runtime/src/comm/group.cpp:1 includes "ddp/reducer.h"']),
    ("a cycle through a public header", {"runtime/src/comm/group.cpp": "#include <acc/accelerator.h>\n"},
     ["cycle comm -> core -> comm", "runtime/src/comm/group.cpp:1 includes <acc/accelerator.h>"]),
    ("a cycle between public headers' folders",
     {"runtime/include/acc/options.h": "#include <acc/accelerator.h>\n"},
     ["cycle config -> core -> config", "runtime/include/acc/options.h:1 includes <acc/accelerator.h>"]),
    ("a public header no folder owns", {"runtime/include/acc/new_api.h": "#pragma once\n"},
     ["runtime/include/acc/new_api.h: a public header with no owning folder; add it to OWNERS"]),
    ("the gate including torch or the rest of comm",
     {"runtime/src/comm/gate/store.cpp": '#include "comm/gate/frames.h"\n#include <ATen/Tensor.h>\n'
                                          '#include "comm/group.h"\n#include <acc/options.h>\n'},
     ["runtime/src/comm/gate/store.cpp:2: comm/gate/ includes the torch header 'ATen/Tensor.h'",
      "runtime/src/comm/gate/store.cpp:3: comm/gate/ includes 'comm/group.h' (comm/); the gate sees only itself",
      "runtime/src/comm/gate/store.cpp:4: comm/gate/ includes 'acc/options.h' (config/)"]),
    ("checkpoint including a strategy", {"runtime/src/checkpoint/x.cpp": '#include "fsdp/layout.h"\n'},
     ["runtime/src/checkpoint/x.cpp:1: checkpoint/ includes the strategy header 'fsdp/layout.h'"]),
    ("a strategy including a checkpoint internal",
     {"runtime/src/fsdp/y.cpp": '\n#include "checkpoint/training_state.h"\n'},
     ["runtime/src/fsdp/y.cpp:2: fsdp/ includes 'checkpoint/training_state.h', a checkpoint internal"]),
    ("a public header including a private one", {"runtime/include/acc/bad.h": '#include "comm/group.h"\n'},
     ["runtime/include/acc/bad.h:1: public header includes the private 'comm/group.h'"]),
    ("function_launcher/ including torch outside its seam", {"runtime/src/function_launcher/fork.cpp": "#include <ATen/Parallel.h>\n",
                                                   "runtime/src/function_launcher/torch_in_rank.cpp": "#include <ATen/Parallel.h>\n"},
     ["runtime/src/function_launcher/fork.cpp:1: function_launcher/ includes the torch header 'ATen/Parallel.h'; only "
      "function_launcher/torch_in_rank.cpp may"]),
    ("runtime tests outside the mirror", {"runtime/test/comm/group_test.cpp": "",
                                          "runtime/test/widgets/widget_test.cpp": "",
                                          "test/ddp/reducer_test.cpp": ""},
     ["runtime/test/widgets/: no runtime/src/widgets/ to mirror",
      "test/ddp/: the tests of the runtime's ddp/ go in runtime/test/ddp/"]),
    ("the launcher including the runtime", {"launcher/src/bad.cpp": "#include <acc/accelerator.h>\n"},
     ["launcher/src/bad.cpp:1: the launcher includes the runtime's 'acc/accelerator.h'"]),
    ("common/ including torch", {"common/src/bad.cpp": "#include <acc_common/job_id.h>\n#include <ATen/Parallel.h>\n"},
     ["common/src/bad.cpp:2: common/ includes the torch header 'ATen/Parallel.h'"]),
    ("common/ including the runtime's API", {"common/include/acc_common/bad.h": "#include <acc/options.h>\n"},
     ["common/include/acc_common/bad.h:1: common/ includes the runtime's 'acc/options.h'"]),
    ("common/ including a wing's source", {"common/src/bad.cpp": '#include "../../launcher/src/ports.h"\n',
                                            "common/test/bad_test.cpp": '#include "runtime/src/comm/gate/store_socket.h"\n'},
     ["common/src/bad.cpp:1: common/ includes '../../launcher/src/ports.h' of a wing",
      "common/test/bad_test.cpp:1: common/ includes 'runtime/src/comm/gate/store_socket.h' of a wing"]),
]


def main():
    failures = 0
    code, out = run(GOOD)
    if code != 0 or "layering: ok" not in out:
        print(f"FAIL: a clean tree was rejected (exit {code}):\n{out}")
        failures += 1
    for name, extra, expected in CASES:
        code, out = run({**GOOD, **extra})
        missing = [text for text in expected if text not in out]
        if code != 1 or missing:
            print(f"FAIL: {name}: exit {code}, missing {missing} in:\n{out}")
            failures += 1
        else:
            print(f"ok: {name}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
