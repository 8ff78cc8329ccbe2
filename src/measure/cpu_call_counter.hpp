#pragma once
// Passes that need no CUPTI: the CPU backend's library-call counter, and a pass that only
// reports its counters unavailable with a reason (pass turned off, no device, no CUPTI).
#include <memory>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/counters.hpp"

namespace fusebench::measure {

std::unique_ptr<CounterCollector> make_cpu_call_counter(Backend& backend);
std::unique_ptr<CounterCollector> make_unavailable_pass(std::string name,
                                                        std::vector<std::string> counters,
                                                        std::string why);

}  // namespace fusebench::measure
