# FindHDF5C: HDF5's C library, found directly, as Cortado's own build finds it
# (CMake's FindHDF5 wants the C language enabled, which a C++ project that
# uses Cortado need not do). Debian keeps the serial build under hdf5/serial
# (libhdf5-dev).
# Defines HDF5C_FOUND, HDF5_INCLUDE_DIR, HDF5_LIBRARY and the imported target
# HDF5C::HDF5C.
find_path(HDF5_INCLUDE_DIR hdf5.h PATH_SUFFIXES hdf5/serial)
find_library(HDF5_LIBRARY NAMES hdf5_serial hdf5 PATH_SUFFIXES hdf5/serial)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(HDF5C REQUIRED_VARS HDF5_LIBRARY HDF5_INCLUDE_DIR)
if(HDF5C_FOUND AND NOT TARGET HDF5C::HDF5C)
  add_library(HDF5C::HDF5C UNKNOWN IMPORTED)
  set_target_properties(HDF5C::HDF5C PROPERTIES IMPORTED_LOCATION "${HDF5_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${HDF5_INCLUDE_DIR}")
endif()
mark_as_advanced(HDF5_INCLUDE_DIR HDF5_LIBRARY)
