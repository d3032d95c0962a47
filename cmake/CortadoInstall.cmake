# Installing Cortado, its CMake package and its Debian package.
#
#   cmake --install build [--prefix DIR]    bin/ (the tools), lib/ (libcortado.a,
#                                          libcortado_proto.a, libcortado_c.so),
#                                          include/ (cortado/**, cortado.pb.h),
#                                          lib/cmake/Cortado/ (find_package(Cortado)),
#                                          share/cortado/ (cortado.proto), share/doc/cortado/
#   cpack -G DEB --config build/CPackConfig.cmake [-B DIR]    cortado_<version>_<arch>.deb
#
# Included at the end of CMakeLists.txt, once every target exists. An
# outside project uses an installed Cortado as
#   find_package(Cortado REQUIRED)
#   target_link_libraries(my_program PRIVATE Cortado::cortado)
# (tests/install/ is such a project, and tests/scripts/install_test.sh builds it).
# docs/install.md says more.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CORTADO_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Cortado)

# ---- the installed targets' usage requirements --------------------------------
# In the build, cortado names its include folders in the source and build
# trees and links some libraries by their full paths (LMDB, OpenBLAS, HDF5,
# libjpeg, cuDNN, NCCL, MPI, OpenMP). An installed Cortado names its own
# include folder instead, and links those libraries through the imported
# targets that CortadoConfig.cmake finds again (cmake/CortadoConfig.cmake.in,
# cmake/modules/). Each item of the build's link interface is mapped here; an
# item this file does not know stops the configuration, so that a new
# dependency is added here and to the config file rather than forgotten.
function(cortado_installed_interface target)
  get_target_property(build_includes ${target} INTERFACE_INCLUDE_DIRECTORIES)
  set(includes "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  foreach(dir IN LISTS build_includes)
    list(APPEND includes "$<BUILD_INTERFACE:${dir}>")
  endforeach()
  set_property(TARGET ${target} PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${includes})

  get_target_property(build_links ${target} INTERFACE_LINK_LIBRARIES)
  set(links)
  foreach(item IN LISTS build_links)
    # Targets an installed Cortado has too: its own (renamed Cortado::* on
    # export) and the imported ones of the packages CortadoConfig.cmake finds.
    if(item MATCHES "^(cortado_proto|protobuf::libprotobuf|glog::glog|gflags|Threads::Threads|CUDA::[a-zA-Z_]+|opencv_[a-z]+)$"
       OR item STREQUAL "${CMAKE_DL_LIBS}")
      list(APPEND links "${item}")
      continue()
    endif()
    # Libraries named by their paths: the imported target that stands for each.
    set(installed "")
    if(item STREQUAL "${LMDB_LIBRARY}")
      set(installed LMDB::LMDB)
    elseif(item STREQUAL "${OPENBLAS_LIBRARY}")
      set(installed OpenBLAS::OpenBLAS)
    elseif(CORTADO_USE_HDF5 AND item STREQUAL "${HDF5_LIBRARY}")
      set(installed HDF5C::HDF5C)
    elseif(CORTADO_USE_LIBJPEG AND item STREQUAL "${LIBJPEG_LIBRARY}")
      set(installed JPEG::JPEG)
    elseif(CORTADO_USE_CUDA AND item STREQUAL "${CUDNN_LIBRARY}")
      set(installed CUDNN::CUDNN)
    elseif(CORTADO_USE_NCCL AND item STREQUAL "${NCCL_LIBRARY}")
      set(installed NCCL::NCCL)
    elseif(CORTADO_USE_MPI AND item IN_LIST MPI_CXX_LIBRARIES)
      # Link only: MPI's compile options stay off the consumer's sources, as
      # they stay off Cortado's.
      set(installed "$<LINK_ONLY:MPI::MPI_CXX>")
    elseif(OpenMP_CXX_FOUND AND item IN_LIST OpenMP_CXX_LIBRARIES)
      set(installed "$<LINK_ONLY:OpenMP::OpenMP_CXX>")
    else()
      message(FATAL_ERROR "${target} links '${item}', which cmake/CortadoInstall.cmake does not map to "
                          "what an installed Cortado links: add it there and to cmake/CortadoConfig.cmake.in")
    endif()
    list(APPEND links "$<BUILD_INTERFACE:${item}>")
    set(installed "$<INSTALL_INTERFACE:${installed}>")
    if(NOT installed IN_LIST links)  # MPI and OpenMP are several paths each
      list(APPEND links "${installed}")
    endif()
  endforeach()
  set_property(TARGET ${target} PROPERTY INTERFACE_LINK_LIBRARIES ${links})
endfunction()
cortado_installed_interface(cortado_proto)
cortado_installed_interface(cortado)

# The installed programs and the C interface keep the run path of the
# libraries they link from outside the system folders: OpenBLAS's OpenMP
# flavour (whatever Debian's alternatives select, as in the build), and in
# CUDA builds the folder of the CUDA libraries, which are not the
# distribution's.
set_target_properties(${CORTADO_TOOLS} cortado_c PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

# ---- what is installed --------------------------------------------------------
install(TARGETS ${CORTADO_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS cortado cortado_proto cortado_c EXPORT CortadoTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/cortado DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
install(FILES ${CMAKE_BINARY_DIR}/include/cortado/config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cortado)
# The headers include "cortado.pb.h" from the top of the include folder.
install(FILES ${PROTO_OUT}/cortado.pb.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES proto/cortado.proto DESTINATION ${CMAKE_INSTALL_DATADIR}/cortado)
install(PROGRAMS scripts/plot_grad_stats.py DESTINATION ${CMAKE_INSTALL_DATADIR}/cortado)  # trainer grad_stats --plot
install(FILES LICENSE README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- the CMake package ----------------------------------------------------------
install(EXPORT CortadoTargets NAMESPACE Cortado:: DESTINATION ${CORTADO_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/CortadoConfig.cmake.in ${CMAKE_BINARY_DIR}/CortadoConfig.cmake
  INSTALL_DESTINATION ${CORTADO_INSTALL_CMAKEDIR})
# Before 1.0 a minor version may change the interface: 0.1.x matches 0.1 only.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/CortadoConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/CortadoConfig.cmake ${CMAKE_BINARY_DIR}/CortadoConfigVersion.cmake
  DESTINATION ${CORTADO_INSTALL_CMAKEDIR})
install(DIRECTORY cmake/modules/ DESTINATION ${CORTADO_INSTALL_CMAKEDIR}/modules FILES_MATCHING PATTERN "Find*.cmake")

# ---- the Debian package (cpack -G DEB) ----------------------------------------
# One package, cortado: the tools, the libraries, the headers and the CMake
# package, under /usr. Its Depends are computed by dpkg-shlibdeps (Debian:
# dpkg-dev) from the programs and libcortado_c.so. The CUDA libraries of a
# CUDA build are NVIDIA's, not Debian's: dpkg-shlibdeps finds no package for
# them (CPack passes --ignore-missing-info), so they are not in Depends and
# the description says what to install.
set(CORTADO_PACKAGE_MAINTAINER "The Cortado authors" CACHE STRING
  "The Maintainer field of the Debian package (Debian's form: Name <email>)")
set(CPACK_PACKAGE_NAME cortado)
set(CPACK_PACKAGE_VENDOR "The Cortado authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${CORTADO_PACKAGE_MAINTAINER}")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "mixed-precision deep-learning training framework in the Caffe tradition")
# The description's lines are Debian's: at most 79 characters, one paragraph
# each for what Cortado is, what the package holds and what it needs.
string(CONCAT CPACK_PACKAGE_DESCRIPTION
  "Cortado trains nets written as Caffe prototxt files (with NVCaffe's type\n"
  "fields), with FP32, FP16 or BF16 storage per layer and loss scaling.\n"
  "\n"
  "This package holds the trainer and the other tools, the C++ library\n"
  "(libcortado.a), its headers and CMake package (find_package(Cortado)),\n"
  "and the C interface libcortado_c.so.\n"
  "\n")
if(CORTADO_USE_CUDA)
  set(_cortado_cuda_libraries "the CUDA ${CUDAToolkit_VERSION_MAJOR} runtime, cuBLAS and cuDNN 9")
  if(CORTADO_USE_NCCL)
    set(_cortado_cuda_libraries "the CUDA ${CUDAToolkit_VERSION_MAJOR} runtime, cuBLAS, cuDNN 9 and NCCL 2")
  endif()
  string(APPEND CPACK_PACKAGE_DESCRIPTION
    "This build runs on the CPU and on NVIDIA GPUs. It needs\n"
    "${_cortado_cuda_libraries}, which do not come from\n"
    "Debian and are not in Depends: install them from NVIDIA (the CUDA\n"
    "toolkit, cuDNN and NCCL, or their pip wheels) where the dynamic loader\n"
    "finds them; the programs also look in ${CUDAToolkit_LIBRARY_DIR}.")
else()
  string(APPEND CPACK_PACKAGE_DESCRIPTION "This build runs on the CPU only (no CUDA).")
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Building a program against the package needs the development packages of
# what libcortado.a links.
set(_cortado_dev_packages libprotobuf-dev libgoogle-glog-dev libgflags-dev liblmdb-dev libopenblas-openmp-dev)
if(CORTADO_USE_HDF5)
  list(APPEND _cortado_dev_packages libhdf5-dev)
endif()
if(CORTADO_USE_OPENCV)
  list(APPEND _cortado_dev_packages libopencv-dev)
endif()
if(CORTADO_USE_LIBJPEG)
  list(APPEND _cortado_dev_packages libjpeg62-turbo-dev)
endif()
if(CORTADO_USE_MPI)
  list(APPEND _cortado_dev_packages libopenmpi-dev)
endif()
list(JOIN _cortado_dev_packages ", " CPACK_DEBIAN_PACKAGE_SUGGESTS)
# dpkg-shlibdeps names OpenBLAS by its generic package (libopenblas0, whose
# first alternative is the pthread flavour); the build linked the OpenMP one.
if(OPENBLAS_LIBRARY MATCHES "/openblas-openmp/")
  set(CPACK_DEBIAN_PACKAGE_RECOMMENDS libopenblas0-openmp)
endif()
# The programs and libcortado_c.so without their symbol tables (a tenth smaller).
set(CPACK_STRIP_FILES ON)
include(CPack)
