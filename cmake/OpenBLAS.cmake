# OpenBLAS for the CPU backend: the target fusebench_openblas, and FUSEBENCH_HAVE_SBGEMM when the
# library exports cblas_sbgemm (bf16 GEMMs; Debian 12's 0.3.21 declares it in cblas.h but does not
# export it). Through pkg-config where there is one, else Debian's layout directly (the GPU box's
# image has no pkg-config). Included by Dependencies.cmake, and alone by the ctest
# cmake_sbgemm_check (tests/cmake/), which configures it with and without pkg-config.
add_library(fusebench_openblas INTERFACE)
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(OPENBLAS QUIET IMPORTED_TARGET openblas)
endif()
if(OPENBLAS_FOUND)
  target_link_libraries(fusebench_openblas INTERFACE PkgConfig::OPENBLAS)
  set(FUSEBENCH_OPENBLAS_FOUND_BY "pkg-config")
  # An IMPORTED target: try_compile propagates its include directories and libraries.
  set(_fusebench_openblas_check_libraries PkgConfig::OPENBLAS)
  set(_fusebench_openblas_check_includes "")
else()
  find_path(OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES x86_64-linux-gnu/openblas-pthread openblas REQUIRED)
  find_library(OPENBLAS_LIBRARY openblas PATH_SUFFIXES openblas-pthread x86_64-linux-gnu/openblas-pthread REQUIRED)
  target_include_directories(fusebench_openblas INTERFACE ${OPENBLAS_INCLUDE_DIR})
  target_link_libraries(fusebench_openblas INTERFACE ${OPENBLAS_LIBRARY})
  set(FUSEBENCH_OPENBLAS_FOUND_BY "find_library: ${OPENBLAS_LIBRARY}")
  set(_fusebench_openblas_check_libraries ${OPENBLAS_LIBRARY})
  set(_fusebench_openblas_check_includes ${OPENBLAS_INCLUDE_DIR})
endif()
# The check links what was found, never fusebench_openblas: a plain INTERFACE target does not
# exist inside try_compile's project, so naming it linked "-lfusebench_openblas" and the check
# failed on every machine (issue 21 item 6).
include(CheckCXXSymbolExists)
set(CMAKE_REQUIRED_LIBRARIES ${_fusebench_openblas_check_libraries})
set(CMAKE_REQUIRED_INCLUDES ${_fusebench_openblas_check_includes})
check_cxx_symbol_exists(cblas_sbgemm "cblas.h" FUSEBENCH_HAVE_SBGEMM)
unset(CMAKE_REQUIRED_LIBRARIES)
unset(CMAKE_REQUIRED_INCLUDES)
