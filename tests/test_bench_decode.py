"""benchmarks/bench_decode.py on the CPU: its options, and a clear exit without a GPU."""

from __future__ import annotations

import pytest
import repo_scripts
import torch


@pytest.fixture(scope="module")
def bdec():
    return repo_scripts.load("benchmarks/bench_decode.py")


def test_rounds_must_be_positive(bdec, capsys):
    with pytest.raises(SystemExit) as e:
        bdec.main(["--rounds", "0"])
    assert e.value.code == 2
    assert "--rounds must be >= 1, got 0" in capsys.readouterr().err


def test_shapes_are_the_issue_layers(bdec):
    assert bdec.SHAPES["70b_gate_up"] == (8192, 57344) and bdec.SHAPES["8b_down"] == (14336, 4096)
    assert len(bdec.SHAPES) == 8


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU exit")
def test_without_a_gpu_it_says_what_it_needs(bdec):
    with pytest.raises(SystemExit) as e:
        bdec.main(["--M", "1"])
    assert "needs a CUDA device" in str(e.value.code)


def test_settle_must_not_be_negative(bdec, capsys):
    with pytest.raises(SystemExit) as e:
        bdec.main(["--settle", "-1"])
    assert e.value.code == 2
    assert "--settle must be >= 0, got -1" in capsys.readouterr().err


def test_order_choices(bdec, capsys):
    with pytest.raises(SystemExit) as e:
        bdec.main(["--order", "random"])
    assert e.value.code == 2
    assert "invalid choice: 'random'" in capsys.readouterr().err
