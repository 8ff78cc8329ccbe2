#pragma once
// Factories of the CUPTI passes (defined only when FUSEBENCH_HAVE_CUPTI).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "fusebench/backend.hpp"
#include "fusebench/counters.hpp"

namespace fusebench::measure {

class ActivityAggregator;

// Feeds the kernel, memcpy and memset records of a CUPTI activity buffer to `out`; returns ""
// or the reason the buffer could not be read.
std::string parse_activity_buffer(std::uint8_t* buffer, std::size_t valid_bytes,
                                  ActivityAggregator& out);

// Launch counting with the Activity API. Returns nullptr and sets *why when tracing cannot run
// here (checked by enabling and disabling the activity kinds once).
std::unique_ptr<CounterCollector> make_activity_launch_counter(Backend& backend, int iterations,
                                                               std::string* why);

// DRAM/L2 bytes with the Range Profiler. Returns nullptr and sets *why when profiling cannot run
// here (checked by a dry run over an empty range); fills *setup with chip, metrics and passes.
std::unique_ptr<CounterCollector> make_range_profiler_pass(Backend& backend, nlohmann::json* setup,
                                                           std::string* why);

}  // namespace fusebench::measure
