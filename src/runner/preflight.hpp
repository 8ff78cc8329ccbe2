#pragma once
// Refusals before anything is measured that need the whole sweep: a fixture whose buffers do not
// fit in what the backend has free (README "Bad input").
#include <vector>

#include "fusebench/backend.hpp"
#include "sweep.hpp"

namespace fusebench::bench {

// Throws std::invalid_argument naming the largest fixture that does not fit, its size and what
// is free (and where that figure comes from). Such a fixture could never be measured. The members
// of a comparison group are held at once (group_runner.hpp), but one that fits alone and not
// beside the others fails alone at run time, named so, and the rest of its group is measured:
// that is not refused here. Does nothing where the backend cannot say what is free.
void check_fits_in_memory(const std::vector<Fixture>& fixtures, const Backend& backend);

}  // namespace fusebench::bench
