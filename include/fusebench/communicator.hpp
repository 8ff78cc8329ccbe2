#pragma once
// Collectives used by the tensor-parallel pipelines, behind one interface (NCCL, in-process,
// MPI, modelled).
#include <string>

#include "fusebench/backend.hpp"

namespace fusebench {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void all_reduce(const MatRef& data) = 0;                     // sum, in place
  virtual void all_gather(const MatRef& src, const MatRef& dst) = 0;  // along columns
};

}  // namespace fusebench
