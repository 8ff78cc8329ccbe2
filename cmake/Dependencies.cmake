# Finds every dependency once; the rest of the build reads the FUSEBENCH_HAVE_* results.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(benchmark REQUIRED)
find_package(CLI11 QUIET CONFIG)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()

include(${CMAKE_CURRENT_LIST_DIR}/OpenBLAS.cmake)  # fusebench_openblas, FUSEBENCH_HAVE_SBGEMM

# oneDNN for the CPU backend's GEMMs (src/backends/cpu_gemm.hpp says which path runs when).
# Found by header and library, not by its CMake package: Debian's package config requires the
# OpenCL headers for its GPU runtime, which the CPU engine we use does not need. Optional: without
# it the CPU backend runs OpenBLAS alone and its report context says so.
set(FUSEBENCH_HAVE_DNNL OFF)
if(FUSEBENCH_WITH_DNNL)
  find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(DNNL_LIBRARY dnnl)
  if(DNNL_INCLUDE_DIR AND DNNL_LIBRARY)
    add_library(fusebench_dnnl INTERFACE)
    target_include_directories(fusebench_dnnl SYSTEM INTERFACE ${DNNL_INCLUDE_DIR})
    target_link_libraries(fusebench_dnnl INTERFACE ${DNNL_LIBRARY} ${CMAKE_DL_LIBS})
    set(FUSEBENCH_HAVE_DNNL ON)
  else()
    message(WARNING "fusebench: oneDNN not found (install libdnnl-dev): the CPU backend's GEMMs "
                    "run on OpenBLAS alone, up to 2x slower on AVX-512 CPUs and bf16 widened to fp32")
  endif()
endif()

# Google Benchmark 1.8 replaced Run::error_occurred with Run::skipped.
if(DEFINED benchmark_VERSION AND benchmark_VERSION VERSION_GREATER_EQUAL 1.8.0)
  set(FUSEBENCH_GBENCH_HAS_SKIPPED ON)
else()
  set(FUSEBENCH_GBENCH_HAS_SKIPPED OFF)
endif()
message(STATUS "fusebench: Google Benchmark ${benchmark_VERSION}")

# CUDA: optional, so a machine without the toolkit still builds the CPU backend.
set(FUSEBENCH_HAVE_CUDA OFF)
if(FUSEBENCH_WITH_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # sm_90 SASS plus compute_90 PTX so newer chips JIT; override with -DCMAKE_CUDA_ARCHITECTURES.
      set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 has no CUDA20 dialect for nvcc; kernels need 17
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit 12.0 REQUIRED)
    set(FUSEBENCH_HAVE_CUDA ON)
    include(${CMAKE_CURRENT_LIST_DIR}/CudaFeatures.cmake)
    fusebench_cuda_features(${CUDAToolkit_VERSION})
  else()
    message(STATUS "fusebench: no CUDA compiler found, building the CPU backend only")
  endif()
endif()

set(FUSEBENCH_HAVE_CUPTI OFF)
if(FUSEBENCH_HAVE_CUDA AND FUSEBENCH_CUDA_RANGE_PROFILER AND TARGET CUDA::cupti)
  find_path(CUPTI_RANGE_PROFILER_INCLUDE cupti_range_profiler.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
            ${CUDAToolkit_TARGET_DIR}/extras/CUPTI/include)
  find_library(NVPERF_HOST_LIB nvperf_host HINTS ${CUDAToolkit_LIBRARY_DIR}
               ${CUDAToolkit_TARGET_DIR}/extras/CUPTI/lib64)
  if(CUPTI_RANGE_PROFILER_INCLUDE AND NVPERF_HOST_LIB)
    set(FUSEBENCH_HAVE_CUPTI ON)
  endif()
endif()

set(FUSEBENCH_HAVE_NCCL OFF)
if(FUSEBENCH_HAVE_CUDA AND FUSEBENCH_WITH_NCCL)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS $ENV{NCCL_ROOT}/include ${NCCL_ROOT}/include
            ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include)
  find_library(NCCL_LIBRARY nccl HINTS $ENV{NCCL_ROOT}/lib ${NCCL_ROOT}/lib
               ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_ROOT}/lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    add_library(fusebench_nccl INTERFACE)
    target_include_directories(fusebench_nccl INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(fusebench_nccl INTERFACE ${NCCL_LIBRARY})
    set(FUSEBENCH_HAVE_NCCL ON)
  endif()
endif()

set(FUSEBENCH_HAVE_MPI OFF)
if(FUSEBENCH_WITH_MPI)
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(FUSEBENCH_HAVE_MPI ON)
  endif()
endif()

find_package(GTest QUIET)

message(STATUS "fusebench: CUDA=${FUSEBENCH_HAVE_CUDA} CUPTI=${FUSEBENCH_HAVE_CUPTI} "
               "NCCL=${FUSEBENCH_HAVE_NCCL} MPI=${FUSEBENCH_HAVE_MPI} sbgemm=${FUSEBENCH_HAVE_SBGEMM} "
               "oneDNN=${FUSEBENCH_HAVE_DNNL}")
