#pragma once
// Measured roofline ceilings, once per run: copy bandwidth (device-to-device on the GPU, memcpy
// on the CPU; bytes read + written) and the dense GEMM peak of each dtype (a large square
// product on random data through the backend's own GEMM, so the same library and algorithm
// policy as the sweep).
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/cost_model.hpp"
#include "measure/timing_device.hpp"

namespace fusebench::measure {

struct MeasuredCeilings {
  double bandwidth = 0;                // B/s, best of the copy repetitions
  std::map<DType, double> peak_flops;  // FLOP/s per dtype, best of the GEMM repetitions
  // GPU: the SM clock probed just after each GEMM of the peak measurement (the clock a
  // sustained GEMM load runs at, e.g. at the power cap): the median of the second half of the
  // probes, once the clock settled. The throttle rule compares samples with it. Absent on the
  // CPU or when no probe returned a reading.
  std::optional<double> loaded_clock_mhz;
  nlohmann::json json;  // for context["ceilings"]

  Ceilings for_dtype(DType dtype) const;  // source "measured"
};

// `device` null: the backend's memory is host memory (CPU backend). Sizes are chosen so the
// CPU measurement stays under ~2 s on two cores.
MeasuredCeilings measure_ceilings(Backend& backend, const std::vector<DType>& dtypes,
                                  DeviceTiming* device);

// The entry's fraction of the roofline: roofline_seconds(plan) (each step bound by its own
// arithmetic intensity) / measured time; 1 = at the ceiling. Negative when not computable.
double roofline_fraction(const Plan& plan, double measured_s, const Ceilings& c);

}  // namespace fusebench::measure
