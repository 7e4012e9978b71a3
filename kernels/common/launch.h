// One kernel launch through cudaLaunchKernelExC, with programmatic dependent
// launch (PDL) when asked: the kernel may start while the one before it on the
// stream drains (it waits in griddepcontrol.wait). Host code; the decode and
// MoE launchers share it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace swordfish {

// The launch's own error (cleared from the sticky state), or cudaSuccess.
inline cudaError_t launch_ex(const void* fn, dim3 grid, int block, size_t smem, bool pdl, void** args,
                             cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(block);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (pdl) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  const cudaError_t e = cudaLaunchKernelExC(&cfg, fn, args);
  if (e != cudaSuccess) cudaGetLastError();
  return e;
}

}  // namespace swordfish
