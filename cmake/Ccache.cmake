# ccache in front of the compiler when it is installed. The sloppiness settings let ccache reuse
# objects compiled with precompiled headers (torch's headers dominate every translation unit);
# base_dir makes paths relative to the source tree, so a fresh clone elsewhere (CI) hits the cache.
find_program(ACC_CCACHE ccache)
if(ACC_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}" ${ACC_CCACHE})
endif()
