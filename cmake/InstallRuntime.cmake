# Installs libacc as a CMake package (find_package(acc CONFIG REQUIRED); target acc::acc brings
# libtorch_cpu transitively; libacc_cuda.so is installed beside libacc.so) and a pkg-config file for Makefile users.
include(CMakePackageConfigHelpers)

install(TARGETS acc EXPORT accTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# libacc_cuda.so sits next to libacc.so, where libacc looks for it; nothing links it.
if(TARGET acc_cuda)
  install(TARGETS acc_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/acc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/generated/acc/version.h
  ${PROJECT_SOURCE_DIR}/contract/acc/environment.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/acc)

set(ACC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/acc)
install(EXPORT accTargets NAMESPACE acc:: DESTINATION ${ACC_CMAKE_DIR})
# The Torch location this libacc was built against; users may still override with Torch_DIR.
get_filename_component(ACC_TORCH_CMAKE_DIR "${Torch_DIR}" ABSOLUTE)
# Its version: accConfig.cmake refuses a libtorch of another minor version.
set(ACC_BUILT_TORCH_VERSION "${Torch_VERSION}")
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/accConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/accConfig.cmake INSTALL_DESTINATION ${ACC_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/accConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/accConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/accConfigVersion.cmake DESTINATION ${ACC_CMAKE_DIR})

# pkg-config: libtorch has no .pc file of its own, so acc.pc carries its flags.
set(ACC_PC_TORCH_INCLUDES "")
foreach(dir ${TORCH_INCLUDE_DIRS})
  string(APPEND ACC_PC_TORCH_INCLUDES " -I${dir}")
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/acc.pc.in ${CMAKE_CURRENT_BINARY_DIR}/acc.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/acc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
