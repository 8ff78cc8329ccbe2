#include "fusebench/local_device.hpp"

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>

#include "fusebench/backend.hpp"
#include "fusebench/mpi_comm.hpp"

namespace fusebench {
namespace {
std::atomic<int> g_pinned_device{0};
}  // namespace

namespace {

// The first of `vars` that is set, as an integer >= `least`; `what` names it in the error.
std::optional<int> first_launcher_integer(const EnvLookup& lookup,
                                          std::initializer_list<const char*> vars, const char* what,
                                          int least) {
  for (const char* var : vars) {
    const char* value = lookup(var);
    if (value == nullptr) continue;
    const std::string text(value);
    std::size_t used = 0;
    int n = least - 1;
    try {
      n = std::stoi(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (text.empty() || used != text.size() || n < least) {
      throw std::invalid_argument(std::string(var) + "=" + text + " is not " + what);
    }
    return n;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> launcher_local_rank(const EnvLookup& lookup) {
  return first_launcher_integer(
      lookup,
      {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
       "PALS_LOCAL_RANKID", "PMI_LOCAL_RANK", "SLURM_LOCALID"},
      "a local rank (a non-negative integer)", 0);
}

std::optional<int> launcher_local_size(const EnvLookup& lookup) {
  return first_launcher_integer(
      lookup,
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE",
       "PALS_LOCAL_SIZE", "PMI_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"},
      "a local size (a positive integer)", 1);
}

int local_device_for(int local_rank, int visible_devices) {
  if (visible_devices < 1)
    throw std::invalid_argument("no visible CUDA device to place local rank " +
                                std::to_string(local_rank) + " on");
  if (local_rank < 0)
    throw std::invalid_argument("local rank " + std::to_string(local_rank) + " is negative");
  return local_rank % visible_devices;
}

int pin_local_cuda_device() {
  if (!launched_by_mpi()) return 0;
  const std::optional<int> local =
      launcher_local_rank([](const char* v) { return std::getenv(v); });
  if (!local) return 0;
  const int visible = cuda_device_count();
  if (visible < 1) return 0;
  const int device = local_device_for(*local, visible);
  g_pinned_device = device;
  return device;
}

int pinned_cuda_device() { return g_pinned_device; }

}  // namespace fusebench
