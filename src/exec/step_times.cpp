// Workspace::time_steps: each step of a plan timed alone, for the step profile of an entry.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <vector>

#include "fusebench/workspace.hpp"

namespace fusebench {

std::vector<double> Workspace::time_steps(int runs) {
  if (collective_steps_ > 0)
    throw std::invalid_argument("plan " + plan_.op + "/" + plan_.variant +
                                " has collectives: its steps are not timed alone");
  const std::size_t steps = plan_.steps.size();
  std::vector<std::vector<double>> samples(steps);
  const std::unique_ptr<RegionTimer> timer = backend_.make_timer();
  for (int run = 0; run < runs; ++run)
    for (std::size_t i = 0; i < steps; ++i) {
      timer->start();
      execute(plan_.steps[i], buffers_, nullptr);
      timer->stop();
      samples[i].push_back(timer->seconds());
    }
  std::vector<double> out(steps, 0.0);
  for (std::size_t i = 0; i < steps; ++i) {
    auto& v = samples[i];
    if (v.empty()) continue;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    out[i] = v[v.size() / 2];
  }
  return out;
}

}  // namespace fusebench
