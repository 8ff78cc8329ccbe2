#pragma once
// Measured roofline ceilings, once per run: copy bandwidth (device-to-device on the GPU, memcpy
// on the CPU; bytes read + written) and the dense GEMM peak of each dtype (a large square
// product on random data through the backend's own GEMM, so the same library and algorithm
// policy as the sweep).
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/quant.hpp"
#include "measure/timing_device.hpp"

namespace fusebench::measure {

struct MeasuredCeilings {
  double bandwidth = 0;                // B/s, best of the copy repetitions
  std::map<DType, double> peak_flops;  // FLOP/s per dtype, best of the GEMM repetitions
  // FLOP/s of the backend's scaled GEMM per quantized spec (QuantSpec::name()), best of the
  // repetitions: the roofline of that spec's entries (their GEMMs are scaled GEMMs).
  std::map<std::string, double> quant_peak_flops;
  // GPU: the SM clock probed just after each GEMM of the peak measurement (the clock a
  // sustained GEMM load runs at, e.g. at the power cap): the median of the second half of the
  // probes, once the clock settled. The throttle rule compares samples with it. Absent on the
  // CPU or when no probe returned a reading.
  std::optional<double> loaded_clock_mhz;
  nlohmann::json json;  // for context["ceilings"]

  Ceilings for_dtype(DType dtype) const;  // source "measured"
  // The scaled GEMM's peak of `spec` with the copy bandwidth; no peak when it was not measured.
  Ceilings for_quant(const QuantSpec& spec) const;
};

// `device` null: the backend's memory is host memory (CPU backend): each measurement repeats
// until its best has not improved by 1% over kCpuSettleReps repeats (within a time cap), so a
// slow first repeat or a busy moment does not become the ceiling; context gets the CPU's
// physical peak (cpu_physical_peak) beside it.
// `quant`: the quantized specs the sweep runs; each gets its scaled GEMM's peak (the same square
// product on quantized random data, the quantize left out), or the reason it has none, in
// context["ceilings"]["peak_flops_by_quant"], labelled with how the backend runs it (native or
// emulated).
MeasuredCeilings measure_ceilings(Backend& backend, const std::vector<DType>& dtypes,
                                  DeviceTiming* device, const std::vector<QuantSpec>& quant = {});

// The CPU's physical peak from its own figures (/proc/cpuinfo: cores, flags, clock): FLOP/s per
// FMA unit = cores x fp32 lanes x 2 x clock, bf16 twice that with avx512_bf16 dot products; the
// number of FMA units per core is not exposed by cpuid (1 or 2 on x86 cores with AVX-512), so
// both bounds are given. Empty where /proc/cpuinfo is unreadable.
nlohmann::json cpu_physical_peak();

// The ceilings a run publishes: the measured ones, raised wherever the sweep itself ran faster,
// so no entry's roofline_fraction exceeds 1 by construction (a ceiling below a throughput the
// sweep observed is a measurement that went wrong: a cold start, a busy moment). An entry above
// the roofline first raises the peak to its FLOP/s and the bandwidth to its byte rate; if its
// steps' roofline still exceeds its time (mixed-bound steps), both are scaled by that factor
// (which keeps the ridge). Every raise is recorded with the entry that caused it.
// Over a long run on a shared host the ceilings move (another tenant's memory traffic): the
// runner measures them again (add_measurement), and each entry is judged against the
// measurement nearest the time its results were taken, raised only by the entries nearest it.
class CeilingsLog {
 public:
  // The first measurement, at 0 s: the run's clock starts here.
  explicit CeilingsLog(const MeasuredCeilings& measured);
  // Seconds since construction (the run's clock for add_measurement and observe).
  double now_s() const;
  // The same ceilings measured again `at_s` seconds into the run.
  void add_measurement(double at_s, const MeasuredCeilings& measured);
  std::size_t measurements() const { return measurements_.size(); }
  double last_measured_s() const { return measurements_.back().at_s; }
  // Entry `name` ran `plan` in `seconds` per run, its results taken `at_s` seconds into the run
  // (< 0: now): raises the ceilings of the measurement nearest it where needed.
  void observe(const std::string& name, DType dtype, const Plan& plan, double seconds,
               double at_s = -1);
  // The published ceilings of the measurement nearest `at_s` (< 0: the first).
  Ceilings for_dtype(DType dtype, double at_s = -1) const;
  // A quantized spec's scaled-GEMM ceiling, measured nearest `at_s` (never raised).
  Ceilings for_quant(const QuantSpec& spec, double at_s) const;
  // roofline_fraction of `name` at `seconds` on the current ceilings; < 0 when unknown.
  double fraction(const std::string& name, double seconds) const;
  // When the measurement an observed entry is judged against was taken (< 0: unknown).
  double judged_against_s(const std::string& name) const;
  // context["ceilings"]: the first measurement, what the sweep raised and why; with several
  // measurements, `over_run`: each one and their spread.
  nlohmann::json json() const;

 private:
  struct Measurement {
    double at_s = 0;
    MeasuredCeilings measured;
    // Published: raised by the entries nearest this measurement.
    double bandwidth = 0;
    std::map<DType, double> peak;
    nlohmann::json raised = nlohmann::json::array();
    std::size_t raised_count = 0;
  };
  struct Seen {
    Plan plan;
    DType dtype;
    double seconds = 0;
    double at_s = 0;
  };
  std::size_t nearest(double at_s) const;
  void raise(Measurement& m, const std::string& name, const Seen& seen) const;
  // Every observation again, each onto its nearest measurement (after a new measurement moved
  // some entries' nearest one).
  void replay();
  std::vector<Measurement> measurements_;
  std::vector<std::pair<std::string, Seen>> observed_;  // in order (a name may repeat)
  std::map<std::string, std::size_t> last_;             // name -> its latest in observed_
  double t0_ = 0;                                       // steady clock at construction, s
};

// The entry's fraction of the roofline: roofline_seconds(plan) (each step bound by its own
// arithmetic intensity) / measured time; 1 = at the ceiling. Negative when not computable.
double roofline_fraction(const Plan& plan, double measured_s, const Ceilings& c);

}  // namespace fusebench::measure
