# lit configuration of acc-migrate's tests: one test file per rule (named after it, running it alone),
# plus CLI, output-mode and whole-program tests. They parse the venv's real libtorch headers (made by
# scripts/setup), as a user's run does: acc-migrate infers the flags and loads torch from the
# precompiled-header cache below (~0.5 s a file once the cache is warm).
import os
import subprocess
import sys
import lit.formats

config.name = "acc-migrate"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".cpp", ".test"]
config.excludes = ["Inputs", "unit"]  # unit/: GoogleTest sources (ctest rewriter-unit.*)
config.test_source_root = os.path.dirname(__file__)
repo = os.path.normpath(os.path.join(config.test_source_root, "..", ".."))


def acc_include_dir():
    """A directory holding acc/acc.h as installed: links to the runtime's headers, the contract's
    (acc/environment.h) and the acc/version.h that only a runtime build generates
    (rewriter/CMakeLists.txt writes one for the tests). Migrated test code includes <acc/acc.h> and
    is parsed again (idempotence)."""
    target = os.path.join(config.test_exec_root, "acc-include", "acc")
    os.makedirs(target, exist_ok=True)
    links = {}
    for source in (os.path.join(repo, "runtime", "include", "acc"), os.path.join(repo, "contract", "acc")):
        links.update({name: os.path.join(source, name) for name in os.listdir(source) if not name.endswith(".in")})
    links["version.h"] = os.path.join(config.test_exec_root, "generated", "acc", "version.h")
    for name, path in links.items():
        if not os.path.lexists(os.path.join(target, name)):
            os.symlink(path, os.path.join(target, name))
    return os.path.dirname(target)


# The bare path first: lit substitutes in order, and %acc-migrate is a prefix of it.
config.substitutions.append(("%acc-migrate-bin", config.acc_migrate))
config.substitutions.append(
    ("%acc-migrate", config.acc_migrate + " --color=false -j 1 --acc-include=" + acc_include_dir()))
config.substitutions.append(("%examples", os.path.join(repo, "examples", "programs")))
config.substitutions.append(("%repo", repo))
config.substitutions.append(("FileCheck", config.filecheck))
# <omp.h> for clang: examples/programs/member_trainer is built by GCC with -fopenmp and includes it. A
# build that compiles the examples lists that command in its compile_commands.json, and acc-migrate
# gives clang GCC's include directory for -fopenmp (with the macro that hides the attribute form
# clang 16 rejects in GCC's omp.h, GccFlags.cpp); a build without them lists none, so the tests that
# migrate the examples pass the same two arguments themselves.
try:
    gcc_include = subprocess.run(["gcc", "-print-file-name=include"], capture_output=True, text=True).stdout.strip()
except OSError:
    gcc_include = "include"
config.substitutions.append(("%omp-flags", "-idirafter %s '-D__malloc__(...)='" % gcc_include))
config.substitutions.append(("%python", sys.executable))

# The venv's torch (scripts/setup). Every test that parses code needs it; the feature stays for tests
# that want to say so (REQUIRES: real-torch).
venv = os.environ.get("ACC_VENV", os.path.expanduser("~/.cache/acc/venv"))
lib = os.path.join(venv, "lib")
if os.path.isdir(lib) and any(os.path.isdir(os.path.join(lib, d, "site-packages", "torch", "include"))
                              for d in os.listdir(lib)):
    config.available_features.add("real-torch")
else:
    lit_config.warning("no torch headers under %s (run scripts/setup): the tests that parse code fail" % venv)
# Precompiled torch headers are cached inside the build tree, shared by the tests (never ~/.cache).
config.environment["ACC_MIGRATE_CACHE"] = os.path.join(config.test_exec_root, "pch-cache")
for name in ("HOME", "ACC_VENV", "Torch_DIR"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
