# Finds libtorch. An explicit Torch_DIR or CMAKE_PREFIX_PATH (a pip install, the official libtorch
# zip, a source build) wins; otherwise the torch of acc's virtualenv (scripts/setup) is used.
# ACC_PYTHON is the venv's Python (with torch, accelerate, safetensors) that parity tests run.
if(DEFINED ENV{ACC_VENV})
  set(_acc_venv "$ENV{ACC_VENV}")
else()
  set(_acc_venv "$ENV{HOME}/.cache/acc/venv")
endif()
set(ACC_PYTHON "${_acc_venv}/bin/python" CACHE FILEPATH
    "Python of acc's virtualenv (torch, accelerate, safetensors), used by parity tests")

find_package(Torch QUIET)
if(NOT Torch_FOUND)
  execute_process(
    COMMAND "${ACC_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _acc_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _acc_torch_rc ERROR_QUIET)
  if(NOT _acc_torch_rc EQUAL 0)
    message(FATAL_ERROR
      "acc: libtorch not found. Run scripts/setup (creates ${_acc_venv} with torch), "
      "or pass -DTorch_DIR=<libtorch>/share/cmake/Torch or -DCMAKE_PREFIX_PATH=<libtorch>.")
  endif()
  list(APPEND CMAKE_PREFIX_PATH "${_acc_torch_prefix}")
  find_package(Torch REQUIRED)
endif()
# TORCH_LIBRARY points at .../torch/lib/libtorch.so; its folder goes into RPATHs.
get_filename_component(ACC_TORCH_LIBDIR "${TORCH_LIBRARY}" DIRECTORY)

# Under add_subdirectory/FetchContent the parent links acc::acc, whose interface names torch's
# imported targets; imported targets are visible only below the directory that found them, so make
# them global (find_package's GLOBAL needs CMake 3.24).
if(NOT PROJECT_IS_TOP_LEVEL)
  get_directory_property(_acc_imported IMPORTED_TARGETS)
  foreach(_acc_target ${_acc_imported})
    get_target_property(_acc_global ${_acc_target} IMPORTED_GLOBAL)
    if(NOT _acc_global)
      set_target_properties(${_acc_target} PROPERTIES IMPORTED_GLOBAL TRUE)
    endif()
  endforeach()
endif()
