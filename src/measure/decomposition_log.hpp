#pragma once
// Per-run medians seen so far in a run, for the fused-vs-split decomposition (timing_policy.hpp):
// once a variant and the op's baseline both have an eager and a device-time median (batch, else
// cold) at one shape, their difference is decomposed into host launch, device overhead and bytes.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace fusebench::measure {

class DecompositionLog {
 public:
  struct Point {
    double median_s = 0, bytes = 0;
    int launches = 0;
  };
  // `shape`: what the variants share (op, model, tokens, tp, dtype, ...), without the regime.
  void record(const std::string& shape, const std::string& variant, const std::string& regime,
              const Point& point);

  struct Result {
    std::optional<nlohmann::json> decomposition;  // with "baseline" and "device_regime"
    std::string unavailable;                      // why not, when the inputs exist but
  };
  // The decomposition of baseline - variant at `shape`, when both have the regimes it needs.
  Result decompose(const std::string& shape, const std::string& baseline,
                   const std::string& variant, double bandwidth) const;

 private:
  // shape -> variant -> regime -> point
  std::map<std::string, std::map<std::string, std::map<std::string, Point>>> points_;
};

}  // namespace fusebench::measure
