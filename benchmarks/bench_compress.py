"""SketchML / TinyScript / KVSAgg against their baselines, side by side, printing ratios.

    SGL_TEST_DATA=../shared/datasets .venv/bin/python benchmarks/bench_compress.py [--parts sketchml,tinyscript,kvsagg]

* ``sketchml`` -- HET training on ``criteo_het_sampled`` (2 simulated workers, LocalTransport; the
  codec path is the one DistTransport uses per destination) with pushes as fp32 key-value,
  uniform 8-bit, zlib and SketchML: push bytes and test AUC.
* ``tinyscript`` -- gradients of the TinyLM on WikiText-2 token windows: relative MSE of
  TinyScript vs uniform (QSGD-style) at 2..8 bits.
* ``tinyscript-ddp`` -- a TinyLM trained by DDP over 2 processes with each gradient compressor
  (TinyScript / uniform at 2..5 bits, torch's PowerSGD): final losses and bytes sent.
* ``tinyscript-tsplit`` -- the same TinyLM trained on one process under TSPLIT (attention kept,
  MLP split in 4 micro-tensors) with what TSPLIT stores for backward exact or as TinyScript /
  uniform codes: stored bytes (payload storage against the float32 bytes they replace) and losses.
* ``kvsagg`` -- WikiText-2 train split over 8 clients: unigram and bigram counts through
  HyperIBLT + pairwise masks, bytes per client vs dense masked aggregation (computed) and plain
  insecure sparse aggregation (int32 key + int32 count per entry), encode/mask/decode times.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from sgl.comm.compress import (
    FIELD_PRIME, HyperIBLT, PairwiseMasker, TinyScriptQuantizer, UniformQuantizer, X25519Identity,
    aggregate_tables, table_bytes,
)


def _data_root() -> Path | None:
    root = os.environ.get("SGL_TEST_DATA")
    return Path(root) if root else None


# ------------------------------------------------------------------ SketchML
def bench_sketchml(root: Path, epochs: int) -> None:
    from sgl.datasets.ctr import CTRData  # noqa: F401  (fails early if the CTR loaders are missing)
    from sgl.embeddings import build_embedding
    from sgl.models.ctr import build_ctr_model
    from sgl.tasks.ctr import CTRTrainConfig
    from sgl.tasks.ctr_workers import train_ctr_workers

    folder = root / "criteo_het_sampled"
    sparse = np.load(folder / "sampled_sparse_feats.npy")
    dense = np.load(folder / "sampled_dense_feats.npy").astype(np.float32)
    labels = np.load(folder / "sampled_labels.npy").reshape(-1).astype(np.float32)
    local = np.stack([np.unique(col, return_inverse=True)[1] + 1 for col in sparse.T], 1).astype(np.int64)
    dims = [int(local[:, f].max()) + 1 for f in range(local.shape[1])]
    data = CTRData(dense, local, labels, dims, [f"C{f}" for f in range(len(dims))])
    train, val, test = data.split((0.8, 0.1, 0.1), seed=0)
    print(f"criteo_het_sampled: {len(labels)} rows, {data.num_embeddings} ids, 2 HET workers, {epochs} epochs")
    rows = []
    for codec in ("none", "uniform8", "zlib", "sketchml"):
        torch.manual_seed(0)
        emb = build_embedding("het", data.num_embeddings, 16, workers=2, lr=0.05, compress=codec, seed=0)
        model = build_ctr_model("wdl", emb, len(dims), 16, dense.shape[1], hidden=[64])
        counter = [0]
        for w in emb.workers:  # count push bytes only (pulls are not compressed)
            def push(*a, _orig=w.transport.push, _stats=w.transport.stats):
                before = _stats.bytes_sent
                _orig(*a)
                counter[0] += _stats.bytes_sent - before
            w.transport.push = push
        t0 = time.perf_counter()
        res = train_ctr_workers(model, train, val, test, CTRTrainConfig(epochs=epochs, lr=0.01, progress=False))
        pushed = counter[0]
        rows.append((codec, pushed, res["test_auc"], time.perf_counter() - t0))
    base = rows[0][1]
    print(f"{'codec':10s} {'push bytes':>12s} {'x fewer':>8s} {'test AUC':>9s} {'time s':>7s}")
    for codec, pushed, auc, secs in rows:
        print(f"{codec:10s} {pushed:12,d} {base / pushed:8.2f} {auc:9.4f} {secs:7.1f}")


# ------------------------------------------------------------------ TinyScript
def bench_sketchml_dist(root: Path, seeds: int) -> None:
    """The same codecs through the real DistTransport: ``sgl train --task ctr --ctr-embedding het --procs 2``."""
    import json
    import tempfile

    from sgl.cli.main import main as sgl_main

    print(f"\nSketchML through DistTransport, 2 Gloo processes, WDL on criteo_het_sampled, {seeds} seeds")
    print(f"{'codec':<10} {'push bytes/seed':>16} {'vs fp32':>8} {'test AUC':>17} {'AUC lost':>9}")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for codec in ("none", "uniform8", "zlib", "sketchml"):
            out = Path(tmp) / f"{codec}.json"
            code = sgl_main(["train", "--task", "ctr", "--model", "wdl", "--dataset", "criteo", "--root",
                             str(root / "criteo_het_sampled"), "--ctr-embedding", "het", "--procs", "2",
                             "--compress", codec, "--seeds", str(seeds), "--out", str(out)])
            if code != 0:
                raise SystemExit(f"sgl train --compress {codec} failed ({code})")
            rows[codec] = json.loads(out.read_text())
    base = rows["none"]
    for codec, r in rows.items():
        pushed, auc = r["push_bytes"]["mean"], r["test_auc"]
        print(f"{codec:<10} {pushed:16,.0f} {base['push_bytes']['mean'] / pushed:7.2f}x "
              f"{auc['mean']:.4f} +- {auc['std']:.4f} {base['test_auc']['mean'] - auc['mean']:+9.4f}")
    sk, u8 = rows["sketchml"]["push_bytes"]["mean"], rows["uniform8"]["push_bytes"]["mean"]
    print(f"SketchML vs uniform 8-bit: {u8 / sk:.2f}x fewer push bytes")


def bench_tinyscript(root: Path) -> None:
    from sgl.systems.runtime.tiny_lm import TinyLM, TransformerConfig, lm_loss

    words = (root / "wikitext2" / "train.txt").read_text().split()[:200_000]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    tokens = torch.tensor([vocab[w] for w in words])
    torch.manual_seed(0)
    cfg = TransformerConfig(name="tiny", vocab_size=len(vocab), hidden_size=64, num_layers=2, num_heads=4,
                            ffn_hidden_size=128, seq_length=65)
    model = TinyLM(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    grads = []
    for step in range(30):
        batch = torch.stack([tokens[i:i + 65] for i in torch.randint(0, tokens.numel() - 65, (16,)).tolist()])
        opt.zero_grad()
        lm_loss(model(batch), batch).backward()
        if step in (5, 15, 29):
            grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None]))
        opt.step()
    print(f"TinyLM (2 layers, hidden 64, vocab {len(vocab)}): gradient relative MSE at steps 5/15/29")
    print(f"{'bits':>4s} {'uniform':>10s} {'tinyscript':>11s} {'ratio':>6s}")
    for bits in range(2, 9):
        u = np.mean([float((UniformQuantizer(bits, seed=1).roundtrip(g) - g).pow(2).sum() / g.pow(2).sum())
                     for g in grads])
        t = np.mean([float((TinyScriptQuantizer(bits, seed=1).roundtrip(g) - g).pow(2).sum() / g.pow(2).sum())
                     for g in grads])
        print(f"{bits:4d} {u:10.4g} {t:11.4g} {t / u:6.3f}")


def _wikitext_lm(root) -> tuple:
    """The TinyLM setup shared by the TinyScript training parts: the first 200k WikiText-2 words as token
    ids (train: the first 180k; held-out: 64 windows of 65 after them), the model config, and the loss."""
    import torch.nn.functional as F  # noqa: N812

    from sgl.systems.runtime.tiny_lm import TransformerConfig

    words = (Path(root) / "wikitext2" / "train.txt").read_text().split()[:200_000]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    tokens = torch.tensor([vocab[w] for w in words])
    train, held = tokens[:180_000], tokens[180_000:]
    cfg = TransformerConfig(name="tiny", vocab_size=len(vocab), hidden_size=64, num_layers=2, num_heads=4,
                            ffn_hidden_size=128, seq_length=65)
    val = torch.stack([held[i:i + 65] for i in range(0, held.numel() - 65, 65)][:64])

    def loss_of(model, batch):
        logits = model(batch[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))

    return train, val, cfg, loss_of


def _lm_rank(rank: int, world: int, root: str, variants: list, steps: int) -> dict:
    """Train the same TinyLM under DDP with each gradient compressor; losses of rank ``rank``."""
    from sgl.systems.runtime.tiny_lm import TinyLM
    from sgl.tasks.grad_compress import register_grad_compress

    torch.set_num_threads(1)
    train, val, cfg, loss_of = _wikitext_lm(root)
    out = {}
    for name, bits in variants:
        torch.manual_seed(0)
        model = TinyLM(cfg)
        net = torch.nn.parallel.DistributedDataParallel(model)
        state = register_grad_compress(net, name, bits=bits, rank=bits, seed=0)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        gen = torch.Generator().manual_seed(rank)
        losses = []
        start = time.perf_counter()
        for _ in range(steps):
            idx = torch.randint(0, train.numel() - 65, (8,), generator=gen).tolist()
            batch = torch.stack([train[i:i + 65] for i in idx])
            opt.zero_grad()
            loss = loss_of(net, batch)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        with torch.no_grad():
            held_loss = float(loss_of(model, val))
        out[f"{name}-{bits}"] = {"train": float(np.mean(losses[-20:])), "val": held_loss,
                                 "seconds": time.perf_counter() - start,
                                 "bytes": getattr(state, "bytes_sent", None)}
    return out


def bench_tinyscript_ddp(root: Path, steps: int) -> None:
    """Final loss of a DDP-trained TinyLM: TinyScript at b bits vs uniform at b+1 bits, PowerSGD beside them."""
    from sgl import comm

    from sgl.errors import CommError

    variants = [("none", 32)] + [(q, b) for b in (2, 3, 4) for q in ("tinyscript", "uniform")] + [("uniform", 5)]
    r = comm.spawn(_lm_rank, 2, str(root), variants, steps, timeout=3600.0)[0]
    for rank in (1, 4):  # torch's PowerSGD hook, each in its own world so a failure is reported, not fatal
        try:
            r.update(comm.spawn(_lm_rank, 2, str(root), [("powersgd", rank)], steps, timeout=3600.0)[0])
        except CommError as exc:
            print(f"powersgd rank {rank}: failed ({str(exc).splitlines()[0][:200]})")
    base = r["none-32"]
    print(f"\nTinyLM (2 layers, hidden 64) on WikiText-2, DDP over 2 Gloo processes, {steps} Adam steps, 8 sequences "
          f"of 64 tokens per rank per step; train loss = mean of the last 20 steps, held-out loss on 64 sequences")
    print(f"{'compressor':<14} {'train loss':>10} {'held-out':>9} {'vs fp32':>8} {'bytes/rank':>12} {'time s':>7}")
    for key, v in r.items():
        sent = "-" if v["bytes"] is None else f"{v['bytes']:,}"
        print(f"{key:<14} {v['train']:10.4f} {v['val']:9.4f} {v['val'] / base['val'] - 1:+8.2%} {sent:>12} "
              f"{v['seconds']:7.1f}")
    for b in (2, 3, 4):
        t, u = r[f"tinyscript-{b}"]["val"], r[f"uniform-{b + 1}"]["val"]
        print(f"TinyScript {b}-bit vs uniform {b + 1}-bit held-out loss: {t / u - 1:+.2%} (target within 1%)")


def bench_tinyscript_tsplit(root: Path, steps: int) -> None:
    """TSPLIT's stored activations as codes: bytes against float32, final loss against exact storage."""
    from sgl.systems.memory import TSplitBlock
    from sgl.systems.runtime.tiny_lm import TinyLM

    train, val, cfg, loss_of = _wikitext_lm(root)
    variants = [("exact", None)] + [(f"tinyscript-{b}", TinyScriptQuantizer(b, seed=0)) for b in (2, 3, 4, 8)]
    variants += [(f"uniform-{b}", UniformQuantizer(b, seed=0)) for b in (2, 3, 4)]
    print(f"\nTinyLM (2 layers, hidden 64) on WikiText-2 under TSPLIT (attention keep, MLP split:4), {steps} Adam "
          f"steps of 16 sequences; stored = what the blocks keep for backward (payload storage vs the float32 bytes "
          f"it replaces); train loss = mean of the last 10 steps")
    print(f"{'storage':<14} {'float32 B/step':>15} {'stored B/step':>14} {'ratio':>6} {'train':>7} {'held-out':>9} "
          f"{'vs exact':>9} {'s/step':>7}")
    base = None
    for name, q in variants:
        torch.manual_seed(0)
        model = TinyLM(cfg)
        for i in range(len(model.blocks)):
            model.blocks[i] = TSplitBlock(model.blocks[i], "keep", "split:4", quantizer=q)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        gen = torch.Generator().manual_seed(1)
        losses = []
        start = time.perf_counter()
        for _ in range(steps):
            batch = torch.stack([train[i:i + 65] for i in torch.randint(0, train.numel() - 65, (16,),
                                                                         generator=gen).tolist()])
            opt.zero_grad()
            loss = loss_of(model, batch)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        per_step = (time.perf_counter() - start) / steps
        with torch.no_grad():
            held_loss = float(loss_of(model, val))
        base = held_loss if base is None else base
        if q is None:
            raw = coded = "-"
            ratio = "-"
        else:
            r = sum(b.store.raw + b.host_store.raw for b in model.blocks) / steps
            c = sum(b.store.coded + b.host_store.coded for b in model.blocks) / steps
            raw, coded, ratio = f"{r:,.0f}", f"{c:,.0f}", f"{r / c:.2f}"
        print(f"{name:<14} {raw:>15} {coded:>14} {ratio:>6} {np.mean(losses[-10:]):7.4f} {held_loss:9.4f} "
              f"{held_loss / base - 1:+9.2%} {per_step:7.3f}")


# ------------------------------------------------------------------ KVSAgg
def _client_sets(root: Path, clients: int, bigram: bool):
    words = []
    for line in (root / "wikitext2" / "train.txt").open():
        words.extend(line.split() + ["<eos>"])
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    ids = torch.tensor([vocab[w] for w in words])
    keys = ids[:-1] * len(vocab) + ids[1:] if bigram else ids
    sets = []
    for part in torch.tensor_split(keys, clients):
        uniq, counts = torch.unique(part, return_counts=True)
        sets.append((uniq, counts))
    return sets, len(vocab) ** (2 if bigram else 1), keys


def bench_kvsagg(root: Path, clients: int) -> None:
    for bigram in (False, True):
        sets, space, keys = _client_sets(root, clients, bigram)
        truth_keys, truth_counts = torch.unique(keys, return_counts=True)
        iblt = HyperIBLT.for_keys(truth_keys.numel(), key_space=space, seed=0)
        ids = [X25519Identity.generate() for _ in range(clients)]
        public = [i.public_bytes for i in ids]
        t0 = time.perf_counter()
        tables = [iblt.encode(k, c) for k, c in sets]
        t_enc = (time.perf_counter() - t0) / clients
        t0 = time.perf_counter()
        masked = [PairwiseMasker(i, ids[i], public).mask(t) for i, t in enumerate(tables)]
        t_mask = (time.perf_counter() - t0) / clients
        t0 = time.perf_counter()
        out = iblt.decode(aggregate_tables(iblt, masked))
        t_dec = time.perf_counter() - t0
        exact = out.ok and torch.equal(out.keys, truth_keys) and torch.equal(out.values.reshape(-1), truth_counts)
        kv = table_bytes(iblt)
        dense = 4 * space + 32
        plain = np.mean([8 * k.numel() for k, _ in sets])
        top = torch.topk(out.values.reshape(-1), 100).indices if out.ok else None
        top_ok = out.ok and torch.equal(out.values.reshape(-1)[top].sort().values,
                                        torch.topk(truth_counts, 100).values.sort().values)
        name = "bigram" if bigram else "unigram"
        print(f"{name}: key space {space:,}, distinct in the sum {truth_keys.numel():,}, per client "
              f"{np.mean([k.numel() for k, _ in sets]):,.0f}; exact={exact}, top-100 exact={top_ok}")
        print(f"  bytes/client: KVSAgg {kv:,} | dense masked {dense:,} ({dense / kv:.1f}x KVSAgg) | plain sparse "
              f"{plain:,.0f} (KVSAgg {kv / plain:.2f}x)")
        print(f"  times: encode {t_enc:.3f} s/client, mask {t_mask:.3f} s/client, server decode {t_dec:.2f} s")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", default="sketchml,sketchml-dist,tinyscript,tinyscript-ddp,kvsagg")
    p.add_argument("--seeds", type=int, default=3, help="seeds of the 2-process SketchML part")
    p.add_argument("--lm-steps", type=int, default=150, help="steps of the DDP TinyLM part")
    p.add_argument("--tsplit-steps", type=int, default=40, help="steps of the TSPLIT TinyLM part")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--clients", type=int, default=8)
    args = p.parse_args(argv)
    root = _data_root()
    if root is None or not root.exists():
        print("set SGL_TEST_DATA to the shared datasets folder")
        return 0
    torch.set_num_threads(1)
    parts = args.parts.split(",")
    if "sketchml" in parts:
        bench_sketchml(root, args.epochs)
    if "sketchml-dist" in parts:
        bench_sketchml_dist(root, args.seeds)
    if "tinyscript" in parts:
        bench_tinyscript(root)
    if "tinyscript-ddp" in parts:
        bench_tinyscript_ddp(root, args.lm_steps)
    if "tinyscript-tsplit" in parts:
        bench_tinyscript_tsplit(root, args.tsplit_steps)
    if "kvsagg" in parts:
        bench_kvsagg(root, args.clients)
    return 0


if __name__ == "__main__":
    sys.exit(main())
