# The fresh-machine check: every file the build reads from the system must come from a Debian
# package that scripts/packages/*.txt bring in (scripts/check-packages; `scripts/setup --check`).
# Included from the top-level CMakeLists.txt before any target is defined, so that every target
# linked afterwards records what it read.
#
# Headers come from ninja's deps log (the compilers' depfiles). Linker inputs, explicit and implicit
# (crt files, libstdc++, libc's linker scripts, sanitizer runtimes), come from GNU ld's
# --dependency-file, written to link-deps/<target>.d (binutils >= 2.35, lld; not gold).
include(CheckLinkerFlag)

set(ACC_LINK_DEPS_DIR ${PROJECT_BINARY_DIR}/link-deps)
file(MAKE_DIRECTORY ${ACC_LINK_DEPS_DIR})
check_linker_flag(CXX "LINKER:--dependency-file=${PROJECT_BINARY_DIR}/CMakeFiles/link-deps-probe.d"
                  ACC_LINKER_HAS_DEPENDENCY_FILE)
if(ACC_LINKER_HAS_DEPENDENCY_FILE)
  add_link_options("LINKER:--dependency-file=${ACC_LINK_DEPS_DIR}/$<TARGET_PROPERTY:NAME>.d")
else()
  message(STATUS "acc: the linker has no --dependency-file; scripts/check-packages will not see linker inputs")
endif()

find_program(ACC_DPKG dpkg)
if(NOT ACC_BUILD_TESTS OR NOT ACC_DPKG)
  return()
endif()

set(_acc_check ${PROJECT_SOURCE_DIR}/scripts/check-packages)
set(_acc_expect ${PROJECT_SOURCE_DIR}/test/packages/expect_check.cmake)
# The check on this build. ctest runs it after the build (make test), when every depfile exists.
add_test(NAME packages.check
  COMMAND ${_acc_check} ${PROJECT_BINARY_DIR})
set_tests_properties(packages.check PROPERTIES TIMEOUT 120 LABELS packages)

# The check fails, naming the package, against a copy of the lists without one leaf package (one
# that no other listed package depends on, and that this build reads).
if(ACC_BUILD_LAUNCHER AND EXISTS ${PROJECT_SOURCE_DIR}/launcher/CMakeLists.txt)
  set(_acc_leaf libyaml-cpp-dev)
elseif(ACC_BUILD_RUNTIME)
  set(_acc_leaf libgloo-dev)
endif()
if(_acc_leaf)
  add_test(NAME packages.check_fails_without_a_listed_package
    COMMAND ${CMAKE_COMMAND} -DCHECK=${_acc_check}
            -DLISTS=${PROJECT_SOURCE_DIR}/scripts/packages -DREMOVE=${_acc_leaf}
            -DWORK=${PROJECT_BINARY_DIR}/test/packages/lists-without-${_acc_leaf}
            -DBUILD=${PROJECT_BINARY_DIR} -DEXPECT_RC=1
            "-DEXPECT=FAILED.*\n  ${_acc_leaf}: .*fix: add ${_acc_leaf} to .*/(launcher|runtime).txt"
            -P ${_acc_expect})
  set_tests_properties(packages.check_fails_without_a_listed_package PROPERTIES TIMEOUT 120 LABELS packages)
endif()

# A build directory that does not exist: exit status 2 and a message that names the fix.
add_test(NAME packages.check_no_build_dir
  COMMAND ${CMAKE_COMMAND} -DCHECK=${_acc_check}
          -DBUILD=${PROJECT_BINARY_DIR}/test/packages/no-such-build -DEXPECT_RC=2
          "-DEXPECT=no-such-build is not a configured Ninja build directory.*fix: build first"
          -P ${_acc_expect})
set_tests_properties(packages.check_no_build_dir PROPERTIES TIMEOUT 60 LABELS packages)

# The machine's CUDA toolkit wherever CMake found it (a compiler wrapper outside /usr/local/cuda*,
# as CI finds with a plain PATH): reported, not failed; a file installed by hand still fails.
add_test(NAME packages.check_machine_cuda_toolkit
  COMMAND ${PROJECT_SOURCE_DIR}/test/packages/check_machine_toolkit.sh ${_acc_check})
set_tests_properties(packages.check_machine_cuda_toolkit PROPERTIES TIMEOUT 60 LABELS packages)

# A machine with more than the lists (libtbb-dev, which libstdc++ looks for with __has_include and
# OpenCV's dev package brings): the build read it only because it is there, so the check passes and
# says so (--strict fails); a package the build needs still fails beside it. A fake machine: its own
# dpkg database, with the libstdc++ headers of the compiler this build uses.
add_test(NAME packages.check_passes_with_an_optional_package
  COMMAND ${PROJECT_SOURCE_DIR}/test/packages/check_optional_reads.sh ${_acc_check} optional)
add_test(NAME packages.check_fails_without_a_needed_package
  COMMAND ${PROJECT_SOURCE_DIR}/test/packages/check_optional_reads.sh ${_acc_check} needed)
set_tests_properties(packages.check_passes_with_an_optional_package packages.check_fails_without_a_needed_package
  PROPERTIES TIMEOUT 60 LABELS packages ENVIRONMENT "CXX=${CMAKE_CXX_COMPILER}")
