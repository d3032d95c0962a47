# FindOpenBLAS: OpenBLAS's CBLAS, the OpenMP flavour first, as Cortado's own
# build looks for it (Debian: libopenblas-openmp-dev; its threads are the
# OpenMP threads the CPU layers share). Any other OpenBLAS is taken where that
# one is absent.
# Defines OpenBLAS_FOUND, OPENBLAS_INCLUDE_DIR, OPENBLAS_LIBRARY and the
# imported target OpenBLAS::OpenBLAS.
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp
  NO_DEFAULT_PATH)
find_library(OPENBLAS_LIBRARY NAMES openblas PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp
  NO_DEFAULT_PATH)
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread)
find_library(OPENBLAS_LIBRARY NAMES openblas)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenBLAS REQUIRED_VARS OPENBLAS_LIBRARY OPENBLAS_INCLUDE_DIR)
if(OpenBLAS_FOUND AND NOT TARGET OpenBLAS::OpenBLAS)
  add_library(OpenBLAS::OpenBLAS UNKNOWN IMPORTED)
  set_target_properties(OpenBLAS::OpenBLAS PROPERTIES IMPORTED_LOCATION "${OPENBLAS_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${OPENBLAS_INCLUDE_DIR}")
endif()
mark_as_advanced(OPENBLAS_INCLUDE_DIR OPENBLAS_LIBRARY)
