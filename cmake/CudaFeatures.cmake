# The CUDA toolkit's floor per feature (README, "Requirements"). The bf16 suite builds on CUDA
# 12.0+; what needs a newer toolkit is left out below its floor, and configure says what:
#   12.5  cublasGemmGroupedBatchedEx (the grouped GEMM variants, the moe op's grouped variant)
#   12.6  the CUPTI Range Profiler API (cupti_range_profiler.h: launch counts and DRAM bytes)
#   12.9  cuBLASLt's scale modes (CUBLASLT_MATMUL_DESC_{A,B}_SCALE_MODE, OUTER_VEC_32F,
#         VEC128_32F, BLK128x128_32F): the fp8 scaled GEMM
# cuBLAS and CUPTI ship with the toolkit, at its version.
#
# FUSEBENCH_PRETEND_CUDA_VERSION pretends another toolkit version for this gate only (nothing is
# compiled against it), so ctest checks the floor without an old toolkit (cuda_feature_floor).
set(FUSEBENCH_PRETEND_CUDA_VERSION "" CACHE STRING
    "Gate the CUDA features on this toolkit version instead of the one found (a test of the floor)")

# Sets, in the caller's scope, FUSEBENCH_CUDA_GROUPED_GEMM, FUSEBENCH_CUDA_RANGE_PROFILER and
# FUSEBENCH_CUDA_FP8_GEMM (ON/OFF) and FUSEBENCH_CUDA_LEFT_OUT (what was left out, or empty) for
# a toolkit of `version` (FUSEBENCH_PRETEND_CUDA_VERSION when set), and says so.
function(fusebench_cuda_features version)
  if(NOT FUSEBENCH_PRETEND_CUDA_VERSION STREQUAL "")
    message(STATUS "fusebench: gating CUDA features on the pretended toolkit "
                   "${FUSEBENCH_PRETEND_CUDA_VERSION} (FUSEBENCH_PRETEND_CUDA_VERSION; found ${version})")
    set(version ${FUSEBENCH_PRETEND_CUDA_VERSION})
  endif()
  set(left_out "")
  set(grouped ON)
  set(range_profiler ON)
  set(fp8 ON)
  if(version VERSION_LESS 12.5)
    set(grouped OFF)
    list(APPEND left_out "the grouped GEMM (cublasGemmGroupedBatchedEx needs cuBLAS 12.5+)")
  endif()
  if(version VERSION_LESS 12.6)
    set(range_profiler OFF)
    list(APPEND left_out "the CUPTI passes (the Range Profiler API needs CUPTI 12.6+)")
  endif()
  if(version VERSION_LESS 12.9)
    set(fp8 OFF)
    list(APPEND left_out "the fp8 scaled GEMM (cuBLASLt's scale modes need cuBLAS 12.9+)")
  endif()
  if(left_out)
    # One unwrapped status line each (a WARNING's text is re-wrapped), then the warning.
    foreach(item IN LISTS left_out)
      message(STATUS "fusebench: CUDA ${version}: left out ${item}")
    endforeach()
    message(STATUS "fusebench: CUDA ${version}: the bf16 suite builds; CUDA 12.9+ builds everything")
    list(JOIN left_out "; " text)
    message(WARNING "fusebench: CUDA ${version} is below the floor of some features; left out: "
                    "${text}. The bf16 suite builds; CUDA 12.9+ builds everything.")
  else()
    message(STATUS "fusebench: CUDA ${version}: every CUDA feature built (floor 12.9)")
  endif()
  set(FUSEBENCH_CUDA_GROUPED_GEMM ${grouped} PARENT_SCOPE)
  set(FUSEBENCH_CUDA_RANGE_PROFILER ${range_profiler} PARENT_SCOPE)
  set(FUSEBENCH_CUDA_FP8_GEMM ${fp8} PARENT_SCOPE)
  set(FUSEBENCH_CUDA_LEFT_OUT "${left_out}" PARENT_SCOPE)
endfunction()
