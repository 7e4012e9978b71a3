// Host helper shared by the launchers: make sure a kernel may use `bytes` of
// dynamic shared memory, calling cudaFuncSetAttribute only when the limit must
// rise.
//
// The attribute is a ceiling per (device, kernel), not a per-launch value, and
// setting it also LOWERS it: a kernel launched with K-dependent shared memory
// (the act-order gather stages one row of x, K * 2 bytes) that once set 4 KB for
// K = 2048 and then 2 KB for K = 1024 would have its next K = 2048 launch refused
// ("invalid argument") if a cache remembered 4 KB as done. So the cache holds the
// highest value set per (device, kernel), and never sets a lower one.
//
// cudaFuncSetAttribute applies to the current device; callers make the
// problem's device current first (dispatch::run does). Thread safe.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace swordfish {

inline std::string ensure_dynamic_smem(const void* fn, int bytes, int device) {
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, int> raised;  // (device, kernel) -> highest limit set
  std::lock_guard<std::mutex> lock(mu);
  int& limit = raised[std::make_pair(device, fn)];
  if (bytes <= limit) return "";
  const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return "cannot raise the dynamic shared-memory limit to " + std::to_string(bytes) + " bytes on device " +
           std::to_string(device) + ": " + cudaGetErrorString(e);
  }
  limit = bytes;
  return "";
}

}  // namespace swordfish
