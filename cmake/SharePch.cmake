# Every executable under the given directories that links libacc and has no precompiled header of
# its own reuses one: the test suite's (<torch/torch.h>, <gtest/gtest.h>) for GoogleTest programs,
# acc-selftest's (<torch/torch.h>) for the others (their compile definitions must match). A torch
# translation unit then compiles in a few seconds instead of ~25. Targets whose flags differ still
# build: the compiler ignores a PCH that does not match and parses the headers.
function(acc_share_pch gtest_pch_target plain_pch_target)
  foreach(dir ${ARGN})
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t ${targets})
      get_target_property(type ${t} TYPE)
      get_target_property(libs ${t} LINK_LIBRARIES)
      get_target_property(own_pch ${t} PRECOMPILE_HEADERS)
      get_target_property(reused ${t} PRECOMPILE_HEADERS_REUSE_FROM)
      if(type STREQUAL "EXECUTABLE" AND "acc" IN_LIST libs AND NOT own_pch AND NOT reused)
        if("${libs}" MATCHES "GTest::")
          target_precompile_headers(${t} REUSE_FROM ${gtest_pch_target})
        else()
          target_precompile_headers(${t} REUSE_FROM ${plain_pch_target})
        endif()
      endif()
    endforeach()
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    if(subdirs)
      acc_share_pch(${gtest_pch_target} ${plain_pch_target} ${subdirs})
    endif()
  endforeach()
endfunction()
