// The per-device record of the path a dispatcher's run() took last (the
// last_path / last_moe_path ops read it), shared by the GEMM and MoE
// dispatchers. Sized once from the device count; values are the dispatcher's
// path enum as int, 0 (auto) until a run records one.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>

namespace swordfish {
namespace dispatch {

class LastPathRecord {
 public:
  LastPathRecord() {
    if (cudaGetDeviceCount(&count_) != cudaSuccess || count_ < 0) {
      cudaGetLastError();  // no driver / no device: nothing is ever recorded
      count_ = 0;
    }
    path_.reset(new std::atomic<int>[count_ > 0 ? count_ : 1]);
    for (int i = 0; i < count_; ++i) path_[i].store(0, std::memory_order_relaxed);
  }
  void record(int device, int path) {
    if (device >= 0 && device < count_) path_[device].store(path, std::memory_order_relaxed);
  }
  int last(int device) const {
    return device >= 0 && device < count_ ? path_[device].load(std::memory_order_relaxed) : 0;
  }

 private:
  int count_ = 0;
  std::unique_ptr<std::atomic<int>[]> path_;
};

}  // namespace dispatch
}  // namespace swordfish
