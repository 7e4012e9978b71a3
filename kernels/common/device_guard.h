// Host helper shared by the dispatcher and the launchers: make a device current
// for a scope (kernels launch, and function attributes and occupancy apply, on
// the current device) and restore the caller's device after it.
#pragma once

#include <cuda_runtime_api.h>

namespace swordfish {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (device < 0) {  // an unset problem device (-1): never fall back to whatever is current
      ok_ = false;
      return;
    }
    if (cudaGetDevice(&prev_) == cudaSuccess && prev_ != device) {
      ok_ = cudaSetDevice(device) == cudaSuccess;
      restore_ = ok_;
    }
    if (!ok_) cudaGetLastError();
  }
  ~DeviceGuard() {
    if (restore_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  // False when the device could not be made current (the sticky error is cleared).
  bool ok() const { return ok_; }

 private:
  int prev_ = 0;
  bool ok_ = true;
  bool restore_ = false;
};

}  // namespace swordfish
