# FindNCCL: NVIDIA's NCCL, beside the CUDA toolkit or under NCCL_HOME (the pip
# wheel nvidia-nccl-cu* ships only the versioned name libnccl.so.2), as
# Cortado's own build looks for it. Call find_package(CUDAToolkit) first.
# Defines NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY and the imported target
# NCCL::NCCL.
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
             ${CUDAToolkit_LIBRARY_ROOT}/lib64 $ENV{NCCL_HOME}/lib)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR)
if(NCCL_FOUND AND NOT TARGET NCCL::NCCL)
  add_library(NCCL::NCCL UNKNOWN IMPORTED)
  set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
