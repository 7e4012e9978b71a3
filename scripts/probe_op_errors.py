"""Does an argument error raised inside a swordfish op reach Python as an exception?

    python scripts/probe_op_errors.py [LIBRARY.so]     # default: the installed extension

Each case runs in a child process (a crash must not end the probe) and prints
one line: the case, the child's exit status and the exception it printed.
tests/test_op_errors_gpu.py asserts the same on the installed extension.
"""

import subprocess
import sys

CASES = {
    "gemm_cpu_tensor": "torch.ops.swordfish.gemm(torch.zeros(4, 256, dtype=torch.bfloat16), "
                       "torch.zeros(2, 4, 512, dtype=torch.int32), torch.zeros(2, 128, dtype=torch.bfloat16), "
                       "None, None, None, 4, 128, False, 2, 0)",
    "gemm_bad_group": "torch.ops.swordfish.gemm(torch.zeros(4, 256, dtype=torch.bfloat16, device='cuda'), "
                      "torch.zeros(2, 4, 512, dtype=torch.int32, device='cuda'), "
                      "torch.zeros(16, 128, dtype=torch.bfloat16, device='cuda'), None, None, None, 4, 16, False, 2, 0)",
    "prepack_bad_dtype": "torch.ops.swordfish.prepack(torch.zeros(8, 64, device='cuda'), None, 4)",
    "select_path_bad_bits": "torch.ops.swordfish.select_path(1, 256, 128, 3, 128, False, False, False, 1, 0)",
}

CHILD = """
import sys, torch
lib = sys.argv[1]
if lib:
    torch.ops.load_library(lib)
else:
    import swordfish_backend.ops as o
    assert o.has_extension(), o.extension_error()
try:
    {call}
    print("NO EXCEPTION")
except Exception as e:
    print(type(e).__name__ + ": " + str(e).splitlines()[0])
"""


def run(case: str, lib: str = "") -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-c", CHILD.format(call=CASES[case]), lib], capture_output=True, text=True,
                       timeout=120)
    lines = (r.stdout.strip() or r.stderr.strip()).splitlines()
    return r.returncode, lines[-1] if lines else ""


if __name__ == "__main__":
    lib = sys.argv[1] if len(sys.argv) > 1 else ""
    for case in CASES:
        rc, line = run(case, lib)
        print(f"{case:24s} exit {rc:4d}  {line}")
