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

#include "kernels/common/device_guard.h"

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

// CTAs per SM of kernel `fn` (`threads` per CTA, `bytes` of dynamic shared
// memory) on `device`, after raising its shared-memory limit there (above).
// Cached per (device, kernel). 0 when it cannot run there, with *err saying
// why, prefixed "`who`: ".
inline int cached_occupancy(const void* fn, int threads, int bytes, int device, const char* who, std::string* err) {
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, int> cache;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(device, fn);
  const auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  DeviceGuard scope(device);
  const std::string raised = ensure_dynamic_smem(fn, bytes, device);
  if (!raised.empty()) {
    *err = std::string(who) + ": " + raised;
    return 0;
  }
  int blocks = 0;
  const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *err = std::string(who) + ": cannot configure the kernel on device " + std::to_string(device) + ": " +
           cudaGetErrorString(e);
    return 0;
  }
  if (blocks < 1) {
    *err = std::string(who) + ": the kernel does not fit on device " + std::to_string(device) + " (" +
           std::to_string(bytes) + " B of shared memory per CTA)";
    return 0;
  }
  cache.emplace(key, blocks);
  return blocks;
}

}  // namespace swordfish
