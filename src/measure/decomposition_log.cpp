#include "measure/decomposition_log.hpp"

#include "measure/timing_policy.hpp"

namespace fusebench::measure {

void DecompositionLog::record(const std::string& shape, const std::string& variant,
                              const std::string& regime, const Point& point) {
  points_[shape][variant][regime] = point;
}

DecompositionLog::Result DecompositionLog::decompose(const std::string& shape,
                                                     const std::string& baseline,
                                                     const std::string& variant,
                                                     double bandwidth) const {
  Result out;
  const auto by_shape = points_.find(shape);
  if (variant == baseline || by_shape == points_.end()) return out;
  const auto& by_variant = by_shape->second;
  const auto times = [](const std::map<std::string, Point>& r,
                        std::string* device_regime) -> std::optional<VariantTimes> {
    const auto eager = r.find("eager");
    if (eager == r.end()) return std::nullopt;
    for (const char* d : {"batch", "cold"}) {
      if (auto it = r.find(d); it != r.end()) {
        *device_regime = d;
        const Point& e = eager->second;
        return VariantTimes{e.median_s, it->second.median_s, e.bytes, e.launches};
      }
    }
    return std::nullopt;
  };
  const auto b_it = by_variant.find(baseline);
  const auto v_it = by_variant.find(variant);
  if (b_it == by_variant.end() || v_it == by_variant.end()) return out;
  std::string base_dev, var_dev;
  const auto b = times(b_it->second, &base_dev);
  const auto v = times(v_it->second, &var_dev);
  if (!b || !v || base_dev != var_dev) return out;
  if (!(bandwidth > 0)) {
    out.unavailable = "no measured bandwidth ceiling";
    return out;
  }
  nlohmann::json d = to_json(measure::decompose(*b, *v, bandwidth));
  d["baseline"] = baseline;
  d["device_regime"] = base_dev;
  out.decomposition = d;
  return out;
}

}  // namespace fusebench::measure
