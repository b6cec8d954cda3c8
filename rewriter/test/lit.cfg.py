# lit configuration of acc-migrate's tests: one test file per rule (named after it, running it alone),
# plus CLI, output-mode and real-torch tests. Most tests parse against Inputs/stub (tiny torch/acc headers).
import os
import sys
import lit.formats

config.name = "acc-migrate"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".cpp", ".test"]
config.excludes = ["Inputs", "unit"]  # unit/: GoogleTest sources (ctest rewriter-unit.*)
config.test_source_root = os.path.dirname(__file__)

stub = os.path.join(config.test_source_root, "Inputs", "stub")
# The bare path first: lit substitutes in order, and %acc-migrate is a prefix of it.
config.substitutions.append(("%acc-migrate-bin", config.acc_migrate))
config.substitutions.append(("%acc-migrate", config.acc_migrate + " --color=false -j 1"))
config.substitutions.append(("%stub-flags", "-isystem " + stub + " -std=c++17"))
config.substitutions.append(("%examples", os.path.join(config.test_source_root, "..", "..", "examples", "programs")))
config.substitutions.append(("FileCheck", config.filecheck))
config.substitutions.append(("%python", sys.executable))

# Tests against the real libtorch headers need the project venv (scripts/setup).
venv = os.environ.get("ACC_VENV", os.path.expanduser("~/.cache/acc/venv"))
lib = os.path.join(venv, "lib")
if os.path.isdir(lib) and any(os.path.isdir(os.path.join(lib, d, "site-packages", "torch", "include"))
                              for d in os.listdir(lib)):
    config.available_features.add("real-torch")
# Precompiled torch headers are cached inside the build tree, shared by the tests (never ~/.cache).
config.environment["ACC_MIGRATE_CACHE"] = os.path.join(config.test_exec_root, "pch-cache")
for name in ("HOME", "ACC_VENV", "Torch_DIR"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
