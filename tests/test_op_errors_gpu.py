"""Argument errors inside the ops must come back as Python exceptions, never crash the process.

Each case runs in a child process (scripts/probe_op_errors.py) so that a
crash is reported as a failure instead of ending the test session.
"""

import pytest
import repo_scripts
import torch

import swordfish_backend.ops as ops

probe = repo_scripts.load("scripts/probe_op_errors.py")

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and ops.has_extension()),
                                reason="needs a CUDA device and the compiled extension")


@pytest.mark.parametrize("case", sorted(probe.CASES))
def test_argument_error_is_an_exception(case):
    rc, line = probe.run(case)
    assert rc == 0, f"the child process died (exit {rc}): {line}"
    assert line.startswith(("ValueError: swordfish.", "RuntimeError: swordfish.")), line
