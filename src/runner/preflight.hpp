#pragma once
// Refusals before anything is measured that need the whole sweep: a fixture whose sizes overflow,
// or whose buffers do not fit in what the backend has free (README "Bad input").
#include <cstdint>
#include <vector>

#include "fusebench/backend.hpp"
#include "sweep.hpp"

namespace fusebench::bench {

// The bytes of the buffers `f` holds (its plan's, times the in-process TP ranks that each hold
// one), checked: throws SizeOverflow (checked_size.hpp) naming the buffer, the tokens, the model
// and the limit when a size does not fit in 63 bits. What --list-bytes prints and what
// check_fits_in_memory weighs.
std::uint64_t fixture_bytes(const Fixture& f);

// Throws std::invalid_argument naming the first moe fixture whose routing alone (its host
// arrays, sized per token x top_k slot) needs more host memory than is available: its plan could
// not even be built to be listed (issue 37: --ops=moe --tokens=2^30 allocated until killed).
void check_moe_routing_fits(const std::vector<Fixture>& fixtures);

// fixture_bytes of every fixture, after check_moe_routing_fits: build_sweep refuses a sweep whose
// sizes overflow before anything is listed or allocated (a wrapped size would allocate, index and
// report the wrong size).
void check_sizes(const std::vector<Fixture>& fixtures);

// Throws std::invalid_argument naming the largest fixture that does not fit, its size and what
// is free (and where that figure comes from). Such a fixture could never be measured. The members
// of a comparison group are held at once (group_runner.hpp), but one that fits alone and not
// beside the others fails alone at run time, named so, and the rest of its group is measured:
// that is not refused here. Does nothing where the backend cannot say what is free.
void check_fits_in_memory(const std::vector<Fixture>& fixtures, const Backend& backend);

}  // namespace fusebench::bench
