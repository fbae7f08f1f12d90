"""One prepared GPU check: every device path of SGL once, with a pass/fail and timing table.

Run on a machine with CUDA (at most ~8 minutes on one GPU; each check is small)::

    python benchmarks/gpu_check.py            # all checks
    python benchmarks/gpu_check.py --only propagate,gamlp --out gpu_check.json

Without CUDA it prints that no GPU is visible and exits 0 (``--cpu`` runs the same checks on
the CPU, which is how this script itself is tested). A check passes when it runs on the device
*and* its result matches the CPU reference (propagation: max |diff| within float32 rounding) or
its quality bar (training: accuracy / AUC above chance). Exit status 1 when any check fails.

Checks:

* ``graph_to``: ``Graph.to``/``cpu``/``pin_memory`` round trip, ``HeteroGraph.to``.
* ``propagate``: ``propagate_hops`` resident on the device (cuSPARSE) equals the CPU result.
* ``propagate_streamed``: the host-chunked mode (CSR on the host, row blocks through the device).
* ``gamlp``: GAMLP trains on the device (``sgl train --device``).
* ``sage_minibatch``: mini-batch GraphSAGE with the neighbour sampler on the device.
* ``outre``: out-of-core training (OUTRE): features and caches on the host, model on the device.
* ``deepfm_het``: DeepFM with a HET embedding cache on the device.
* ``link``: supervised link prediction (GCN encoder) on the device.
* ``moe_grouped``: a converted HF Mixtral gives its logits on the device; 64 bf16 experts as one
  grouped GEMM against the per-expert loop (equal results, both timed).
* ``hf_llama_bf16``: a tiny HF Llama trains under bf16 autocast from fp32 master weights.
* ``pqcache``: PQCache ``generate()`` on the device: equal to full attention at budget 1.0, and
  device KV bytes at a 10 % budget (<= 0.15x the full cache) with today's selection's tokens.

* ``executor_hf``: the executor's DDP and FSDP2 ZeRO-3 plans on a tiny HF Llama, one process on
  the GPU (NCCL), equal to 1-process training.
* ``memo_offload``: MEMO's token-wise offload (side copy stream, pinned buffers) on HF Llama
  layers under bf16 autocast: the same loss, step time against no offload, and MFU.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sgl  # noqa: E402
from sgl.cli import main as cli_main  # noqa: E402

Check = Callable[[str], str]


def _graph(num_nodes: int = 20_000, features: int = 64) -> Any:
    return sgl.datasets.load("synthetic", num_nodes=num_nodes, num_features=features, num_classes=4, seed=0)


def check_graph_to(device: str) -> str:
    g = _graph(2_000, 16)
    moved = g.to(device, non_blocking=True)
    assert moved.device.type == torch.device(device).type, moved.device
    back = moved.cpu()
    for key in ("indptr", "indices", "x", "y"):
        assert torch.equal(getattr(back, key), getattr(g, key)), key
    if torch.device(device).type == "cuda":
        pinned = g.pin_memory()
        assert pinned.x.is_pinned()
    hetero = sgl.datasets.load("synthetic-mag", scale=0.0005, num_classes=4, num_features=16, seed=0)
    assert hetero.to(device).device.type == torch.device(device).type
    return f"{g.num_nodes:,} nodes and a heterogeneous graph moved and back"


def _hops_close(a: List[torch.Tensor], b: List[torch.Tensor]) -> float:
    return max(float((x.cpu() - y.cpu()).abs().max()) for x, y in zip(a, b))


def check_propagate(device: str) -> str:
    g = _graph(200_000, 64)
    ref = sgl.ops.propagate_hops(g, g.x, k=3, kernel="aten")
    start = time.perf_counter()
    hops = sgl.ops.propagate_hops(g, g.x, k=3, device=device)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    assert hops[-1].device.type == torch.device(device).type, hops[-1].device
    diff = _hops_close(hops, ref)
    assert diff < 1e-4, diff
    return f"200k nodes, k=3: {seconds:.3f} s, max |diff| vs CPU {diff:.1e}"


def check_propagate_streamed(device: str) -> str:
    g = _graph(100_000, 64)
    ref = sgl.ops.propagate_hops(g, g.x, k=2, kernel="aten")
    hops = sgl.ops.propagate_hops(g, g.x, k=2, device=device, chunk_rows=8_192)
    diff = _hops_close(hops, ref)
    assert diff < 1e-4, diff
    return f"100k nodes in 8,192-row blocks: max |diff| vs CPU {diff:.1e}"


def _cli(argv: List[str]) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "record.json"
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            rc = cli_main([*argv, "--out", str(out), "--no-progress"])
        assert rc == 0, buffer.getvalue()[-2000:]
        return json.loads(out.read_text())


def _mean(record: Dict[str, Any], key: str) -> float:
    value = record[key]
    return float(value["mean"] if isinstance(value, dict) else value)


def check_gamlp(device: str) -> str:
    record = _cli(["train", "--model", "gamlp", "--dataset", "synthetic", "--dataset-option", "num_nodes=20000",
                   "--dataset-option", "num_classes=4", "--seeds", "1", "--epochs", "30", "--device", device])
    acc = _mean(record, "test_acc")
    assert acc > 0.5, acc  # 4 classes: chance is 0.25
    return f"test accuracy {acc:.3f}"


def check_sage_minibatch(device: str) -> str:
    record = _cli(["train", "--model", "sage", "--dataset", "synthetic", "--dataset-option", "num_nodes=20000",
                   "--dataset-option", "num_classes=4", "--sampler", "neighbor", "--fanouts", "10,5", "--seeds", "1",
                   "--epochs", "3", "--batch-size", "512", "--device", device])
    acc = _mean(record, "test_acc")
    assert acc > 0.4, acc
    return f"test accuracy {acc:.3f}"


def check_outre(device: str) -> str:
    from sgl.samplers import write_store

    with tempfile.TemporaryDirectory() as tmp:
        store = write_store(_graph(20_000, 64), Path(tmp) / "store")
        record = _cli(["train", "--model", "sage", "--dataset", f"store:{store}", "--sampler", "outre",
                       "--memory-budget", "4MB", "--fanouts", "10,5", "--seeds", "1", "--epochs", "2",
                       "--batch-size", "512", "--device", device])
    acc = _mean(record, "test_acc")
    assert acc > 0.4, acc
    return f"test accuracy {acc:.3f}"


def check_deepfm_het(device: str) -> str:
    record = _cli(["train", "--task", "ctr", "--model", "deepfm", "--ctr-embedding", "het", "--dataset-option",
                   "num_rows=20000", "--seeds", "1", "--epochs", "2", "--device", device])
    auc = _mean(record, "test_auc")
    assert auc > 0.55, auc
    return f"test AUC {auc:.3f}"


def check_link(device: str) -> str:
    # CSBM edges carry only community information: 4 classes at homophily 0.8 cap the AUC near
    # 0.78, and a GCN with a dot decoder reached 0.64 on the CPU (so 0.55 tells learning from chance)
    record = _cli(["train", "--task", "link", "--model", "gcn", "--dataset", "synthetic", "--dataset-option",
                   "num_nodes=2000", "--dataset-option", "num_classes=4", "--seeds", "1", "--epochs", "100",
                   "--device", device])
    auc = _mean(record, "test_auc")
    assert auc > 0.55, auc
    return f"test AUC {auc:.3f}"


def check_moe_grouped(device: str) -> str:
    """A converted HF Mixtral on the device: same logits as unconverted; grouped-GEMM experts vs the loop."""
    from transformers import MixtralConfig, MixtralForCausalLM

    from sgl.systems.moe import convert
    from sgl.systems.moe.experts import run_experts

    torch.manual_seed(0)
    model = MixtralForCausalLM(MixtralConfig(vocab_size=256, hidden_size=128, intermediate_size=256,
                                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                             num_local_experts=8, num_experts_per_tok=2)).to(device).eval()
    ids = torch.randint(0, 256, (4, 64), device=device)
    with torch.no_grad():
        before = model(ids).logits
        convert(model)
        diff = float((model(ids).logits - before).abs().max())
    assert diff <= 1e-4, diff
    e, h, f = 64, 256, 512
    counts = [64] * e
    x = torch.randn(sum(counts), h, device=device, dtype=torch.bfloat16)
    ws = [torch.randn(e, a, b, device=device, dtype=torch.bfloat16) / a ** 0.5 for a, b in ((h, f), (h, f), (f, h))]
    times = {}
    for impl in ("loop", "grouped"):
        run_experts(x, counts, *ws, impl)
        _sync(device)
        start = time.perf_counter()
        for _ in range(10):
            out = run_experts(x, counts, *ws, impl)
        _sync(device)
        times[impl] = (time.perf_counter() - start) / 10
        if impl == "loop":
            ref = out.float()
    err = float((out.float() - ref).abs().max())
    assert err <= 5e-2, err
    return (f"converted logits max |diff| {diff:.1e}; 64 experts bf16 fwd: loop {times['loop'] * 1e3:.2f} ms, "
            f"grouped {times['grouped'] * 1e3:.2f} ms ({times['loop'] / times['grouped']:.2f}x)")


def check_hf_llama_bf16(device: str) -> str:
    """A tiny HF Llama trains a few steps on the device under bf16 autocast from fp32 weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256,
                                         num_hidden_layers=2, num_attention_heads=4,
                                         num_key_value_heads=2)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = torch.randint(0, 256, (8, 64), device=device)
    losses = []
    for _ in range(20):
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            loss = model(ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0] and all(p.dtype == torch.float32 for p in model.parameters())
    return f"loss {losses[0]:.3f} -> {losses[-1]:.3f} in 20 bf16 steps (fp32 master weights)"


def check_pqcache(device: str) -> str:
    """PQCache generate() on the device: equal to full attention at budget 1.0; device KV bytes at 10 %."""
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    from sgl.systems.serving.kv import PQKVCache, kv_cache_bytes, kv_selection, make_selector

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=1024)).to(device).eval()
    ids = torch.randint(3, 64, (1, 300), device=device)
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    plain = model.generate(ids, **kw)

    def run(budget: float, tiered: bool):
        sel = make_selector("pqcache", budget, bits=4)
        with kv_selection(model, sel):
            cache = PQKVCache.for_model(model, sel) if tiered else DynamicCache()
            return model.generate(ids, cache=cache, **kw), cache

    full, _ = run(1.0, True)
    assert torch.equal(full, plain)
    old, dense = run(0.1, False)
    new, tiered = run(0.1, True)
    assert torch.equal(new, old)
    ratio = tiered.device_bytes() / kv_cache_bytes(dense)
    assert ratio <= 0.15, ratio
    return f"budget 1.0 equals full attention; at 10 %: device KV {ratio:.3f}x the full cache, same tokens"


def check_executor_hf(device: str) -> str:
    """The executor's DDP and FSDP2 ZeRO-3 on a tiny HF Llama (one process: one GPU), equal to 1-process training."""
    from sgl.systems.runtime import ExecConfig, make_plan, run_plans, train_reference

    cfg = ExecConfig(model="tiny", arch="hf-llama", steps=3, global_bsz=8, chunks=1, lr=1e-2, seed=0)
    reference = train_reference(cfg)
    backend = "nccl" if torch.device(device).type == "cuda" else "gloo"
    start = time.perf_counter()
    out = run_plans([make_plan("dp", 1, cfg), make_plan("sdp", 1, cfg)], cfg, backend=backend, timeout=240.0)
    seconds = time.perf_counter() - start
    gaps = {}
    for name, reports in zip(("ddp", "fsdp2-zero3"), out):
        losses = reports[0]["losses"]
        gaps[name] = max(abs(a - b) for a, b in zip(losses, reference))
        assert gaps[name] < 1e-3, (name, losses, reference)
    return (f"{backend}: DDP and FSDP2 ZeRO-3 each {cfg.steps} steps, max |loss - 1-process| "
            f"{max(gaps.values()):.1e}; both runs {seconds:.1f} s")


#: dense bf16 peak FLOP/s of GPUs whose MFU the MEMO check can state
_PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12}


def check_memo_offload(device: str) -> str:
    """MEMO token-wise offload on HF Llama layers: equal loss, step time against no offload, and MFU."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from sgl.systems.memory import wrap_blocks

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=1024, hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                      num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).to(device)
    ids = torch.randint(0, cfg.vocab_size, (4, 512), device=device)

    def timed(steps: int = 3):
        losses, times = [], []
        for i in range(steps + 1):
            model.zero_grad(set_to_none=True)
            _sync(device)
            t0 = time.perf_counter()
            with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
                loss = model(ids, labels=ids).loss
            loss.backward()
            _sync(device)
            if i:
                times.append(time.perf_counter() - t0)
            losses.append(float(loss.detach()))
        return losses[-1], sorted(times)[len(times) // 2]

    plain_loss, plain_s = timed()
    wrap_blocks(model, alpha=0.5)
    memo_loss, memo_s = timed()
    assert memo_loss == plain_loss, (memo_loss, plain_loss)
    params = sum(p.numel() for p in model.parameters())
    flops = 6 * params * ids.numel()
    name = torch.cuda.get_device_name(0) if torch.device(device).type == "cuda" else ""
    peak = next((v for k, v in _PEAK_BF16.items() if k in name), None)
    mfu = f", MFU {flops / memo_s / peak:.1%} of {peak / 1e12:.0f} TFLOP/s bf16" if peak else ""
    return (f"equal loss; step {memo_s * 1e3:.1f} ms offloaded vs {plain_s * 1e3:.1f} ms plain "
            f"(x{memo_s / plain_s:.2f}); {flops / memo_s / 1e12:.2f} TFLOP/s{mfu}")


def check_lora_int4(device: str) -> str:
    """LoRA-Inlaid's packed int4 base (log12 scales) on the device: the decoded weight equals GPTQ's and the CPU's."""
    import torch.nn.functional as F

    from sgl.systems.serving.lora import Int4Linear, gptq_codes

    g = torch.Generator().manual_seed(0)
    w, x = torch.randn(256, 512, generator=g), torch.randn(512, 1024, generator=g)
    r = gptq_codes(w.to(device), (x @ x.T / 1024).to(device), bits=4, group_size=32)
    lin = Int4Linear.from_codes(r.codes, r.scales, r.zeros, 32, scale_format="log12", scale_base=r.scale_base,
                                scale_step=r.scale_step)
    assert lin.qweight.device.type == torch.device(device).type
    assert torch.equal(lin.dequantize(), r.dequantized.float())
    assert torch.equal(lin.to("cpu").dequantize(), r.dequantized.float().cpu())
    inp = torch.randn(8, 512, device=device)
    gap = float((lin.to(device)(inp) - F.linear(inp, r.dequantized.float())).abs().max())
    assert gap < 1e-4, gap
    bf16 = w.numel() * 2
    return f"decode exact on {device} and CPU; {bf16 / lin.nbytes():.2f}x below bf16 from storage; forward gap {gap:.1e}"


def check_static_int8(device: str) -> str:
    """Static int8 GAMLP from int8 hops on the device (``torch._int_mm``): close to the fp32 model on the
    dequantised hops, and its throughput against the fused fp32 plan."""
    from sgl.models import GAMLP, GAMLPConfig
    from sgl.models.accel import Int8NodeFeatures, fuse_fp32, quantize_static_int8

    graph = _graph(num_nodes=20_000, features=128).to(device)
    torch.manual_seed(0)
    model = GAMLP(graph.num_features, 8, GAMLPConfig(k=4, hidden=64, attention="recursive")).to(device).eval()
    feats = model.precompute(graph)
    hops8 = Int8NodeFeatures.quantize(feats)
    plan, fused = quantize_static_int8(model, hops8, split_weights=True), fuse_fp32(model)
    rows = torch.arange(4096, device=device)
    with torch.no_grad():
        ref = model(hops8[rows])
        out = plan(hops8.codes_at(rows))
        assert out.device.type == torch.device(device).type
        gap = float((out - ref).abs().max() / ref.abs().max())
        assert gap < 1e-2, gap
        times = {}
        for name, fn, x in (("fp32", fused, lambda: feats[rows]), ("int8", plan, lambda: hops8.codes_at(rows))):
            fn(x())
            _sync(device)
            t = time.perf_counter()
            for _ in range(5):
                fn(x())
            _sync(device)
            times[name] = (time.perf_counter() - t) / 5
    return (f"relative gap {gap:.1e} to fp32 on the int8 hops; {times['fp32'] * 1e3:.1f} ms fp32 fused vs "
            f"{times['int8'] * 1e3:.1f} ms int8 per 4096 rows ({times['fp32'] / times['int8']:.2f}x)")


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


CHECKS: Dict[str, Check] = {
    "graph_to": check_graph_to, "propagate": check_propagate, "propagate_streamed": check_propagate_streamed,
    "gamlp": check_gamlp, "sage_minibatch": check_sage_minibatch, "outre": check_outre,
    "deepfm_het": check_deepfm_het, "link": check_link,
    "moe_grouped": check_moe_grouped, "hf_llama_bf16": check_hf_llama_bf16, "pqcache": check_pqcache,
    "executor_hf": check_executor_hf, "memo_offload": check_memo_offload, "lora_int4": check_lora_int4,
    "static_int8": check_static_int8,
}


def run_checks(device: str, names: List[str]) -> List[Dict[str, Any]]:
    rows = []
    for name in names:
        start = time.perf_counter()
        try:
            detail, ok = CHECKS[name](device), True
        except Exception as exc:  # noqa: BLE001 - a failing check is a row of the table, not the end
            detail, ok = f"{type(exc).__name__}: {exc}".splitlines()[0][:160], False
            traceback.print_exc(file=sys.stderr)
        rows.append({"check": name, "ok": ok, "seconds": round(time.perf_counter() - start, 2), "detail": detail})
        print(f"{name:20s} {'PASS' if ok else 'FAIL':4s} {rows[-1]['seconds']:8.2f} s  {detail}", flush=True)
    return rows


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help=f"comma-separated checks (default all: {','.join(CHECKS)})")
    parser.add_argument("--cpu", action="store_true", help="run the checks on the CPU (tests this script)")
    parser.add_argument("--out", help="write the table as JSON")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        parser.error(f"unknown checks {unknown}; known: {', '.join(CHECKS)}")
    if args.cpu:
        device = "cpu"
    elif torch.cuda.is_available():
        device = "cuda"
    else:
        print("no CUDA device is visible: nothing to check (use --cpu to run the checks on the CPU)")
        return 0
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
    print(f"SGL {sgl.__version__}, torch {torch.__version__}, device {device} ({name})")
    print(f"{'check':20s} {'':4s} {'time':>10s}  detail")
    rows = run_checks(device, names)
    failed = [r["check"] for r in rows if not r["ok"]]
    print(f"{len(rows) - len(failed)}/{len(rows)} passed" + (f"; failed: {', '.join(failed)}" if failed else ""))
    if args.out:
        from sgl.fileio import atomic_write

        with atomic_write(args.out, "w") as handle:
            json.dump({"device": name, "torch": torch.__version__, "rows": rows}, handle, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
