#pragma once
// Refusals before anything is measured that need the whole sweep: a fixture whose buffers do not
// fit in what the backend has free (README "Bad input").
#include <vector>

#include "fusebench/backend.hpp"
#include "sweep.hpp"

namespace fusebench::bench {

// Throws std::invalid_argument naming the largest fixture that does not fit, its size and what
// is free (and where that figure comes from). Fixtures run one at a time, each freeing the
// previous one's buffers, so the largest one is what must fit. Does nothing where the backend
// cannot say what is free.
void check_fits_in_memory(const std::vector<Fixture>& fixtures, const Backend& backend);

}  // namespace fusebench::bench
