# acc_migrated_example(<target> <source> OUT_DIR <dir> [HEADERS <header>...])
# Migrates <source> (examples/programs/..., with its headers next to it) with acc-migrate at build
# time into <dir>, using the original's compile command from this build's compile_commands.json, and
# builds the migrated copy as <target> against libacc. Used by `make demo` (examples/demo) and the
# end-to-end tests (test/e2e). <dir>/<file name of source> is the migrated source.
function(acc_migrated_example target source)
  cmake_parse_arguments(arg "" "OUT_DIR" "HEADERS" ${ARGN})
  get_filename_component(source_dir ${source} DIRECTORY)
  get_filename_component(file ${source} NAME)
  list(TRANSFORM arg_HEADERS PREPEND ${source_dir}/ OUTPUT_VARIABLE headers)
  list(TRANSFORM arg_HEADERS PREPEND ${arg_OUT_DIR}/ OUTPUT_VARIABLE migrated_headers)
  file(RELATIVE_PATH shown ${PROJECT_SOURCE_DIR} ${source})
  # The diff and findings go to <dir>/acc-migrate.log (shown if it fails), not into the build's output.
  set(log ${arg_OUT_DIR}/acc-migrate.log)
  add_custom_command(OUTPUT ${arg_OUT_DIR}/${file} ${migrated_headers}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${arg_OUT_DIR}
    COMMAND sh -c "\"$1\" --color=false -p \"$2\" --output-dir \"$3\" \"$4\" > \"$5\" 2>&1 || { cat \"$5\"; exit 1; }"
            acc-migrate $<TARGET_FILE:acc-migrate> ${PROJECT_BINARY_DIR} ${arg_OUT_DIR} ${source} ${log}
    DEPENDS acc-migrate ${source} ${headers}
    COMMENT "acc-migrate ${shown} (diff and findings: ${log})"
    VERBATIM)
  add_executable(${target} ${arg_OUT_DIR}/${file})
  target_link_libraries(${target} PRIVATE acc)
  set_target_properties(${target} PROPERTIES BUILD_RPATH "${ACC_TORCH_LIBDIR}")
endfunction()
