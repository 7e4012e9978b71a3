// Host helper shared by the launchers: raise a kernel's dynamic shared-memory
// limit once per (device, kernel, size) instead of on every launch.
//
// cudaFuncSetAttribute applies to the current device; callers make the
// problem's device current first (dispatch::run does). Thread safe.
#pragma once

#include <cuda_runtime_api.h>

#include <mutex>
#include <set>
#include <string>
#include <tuple>

namespace swordfish {

inline std::string ensure_dynamic_smem(const void* fn, int bytes, int device) {
  static std::mutex mu;
  static std::set<std::tuple<int, const void*, int>> done;
  const auto key = std::make_tuple(device, fn, bytes);
  std::lock_guard<std::mutex> lock(mu);
  if (done.count(key) != 0) return "";
  const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return "cannot raise the dynamic shared-memory limit to " + std::to_string(bytes) + " bytes on device " +
           std::to_string(device) + ": " + cudaGetErrorString(e);
  }
  done.insert(key);
  return "";
}

}  // namespace swordfish
