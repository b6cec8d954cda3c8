# ccache in front of the compiler when it is installed. The sloppiness settings let ccache reuse
# objects compiled with precompiled headers (torch's headers dominate every translation unit).
find_program(ACC_CCACHE ccache)
if(ACC_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      ${ACC_CCACHE})
endif()
