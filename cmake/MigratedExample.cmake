# acc_migrated_example(<target> <source> OUT_DIR <dir> [SOURCES <source>...] [HEADERS <header>...])
# Migrates <source> and the other SOURCES (examples/programs/..., with their headers next to them;
# one run of acc-migrate over all of them, as over a project) at build time into <dir>, using the
# originals' compile commands from this build's compile_commands.json, and builds the migrated copy
# as <target> against libacc. Used by `make demo` (examples/demo) and the end-to-end tests
# (test/e2e). <dir>/<file name of source> is the migrated source.
function(acc_migrated_example target source)
  cmake_parse_arguments(arg "" "OUT_DIR" "SOURCES;HEADERS" ${ARGN})
  get_filename_component(source_dir ${source} DIRECTORY)
  set(migrated_sources)
  foreach(file ${source} ${arg_SOURCES})
    get_filename_component(file ${file} NAME)
    list(APPEND migrated_sources ${arg_OUT_DIR}/${file})
  endforeach()
  list(TRANSFORM arg_SOURCES PREPEND ${source_dir}/ OUTPUT_VARIABLE more_sources)
  list(TRANSFORM arg_HEADERS PREPEND ${source_dir}/ OUTPUT_VARIABLE headers)
  list(TRANSFORM arg_HEADERS PREPEND ${arg_OUT_DIR}/ OUTPUT_VARIABLE migrated_headers)
  file(RELATIVE_PATH shown ${PROJECT_SOURCE_DIR} ${source})
  # The diff and findings go to <dir>/acc-migrate.log (shown if it fails), not into the build's output.
  set(log ${arg_OUT_DIR}/acc-migrate.log)
  add_custom_command(OUTPUT ${migrated_sources} ${migrated_headers}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${arg_OUT_DIR}
    COMMAND sh -c "log=$1 exe=$2 db=$3 out=$4; shift 4; \"$exe\" --color=false -p \"$db\" --output-dir \"$out\" \"$@\" > \"$log\" 2>&1 || { cat \"$log\"; exit 1; }"
            acc-migrate ${log} $<TARGET_FILE:acc-migrate> ${PROJECT_BINARY_DIR} ${arg_OUT_DIR} ${source} ${more_sources}
    DEPENDS acc-migrate ${source} ${more_sources} ${headers}
    COMMENT "acc-migrate ${shown} (diff and findings: ${log})"
    VERBATIM)
  add_executable(${target} ${migrated_sources})
  target_link_libraries(${target} PRIVATE acc)
  set_target_properties(${target} PROPERTIES BUILD_RPATH "${ACC_TORCH_LIBDIR}")
endfunction()
