"""The real MoE workload: the small MoE LM on WikiText-2 (BPE trained on the train split), on CPU
with gloo processes, recording routing traces in the ``sgl-moe-trace`` format.

>>> cfg = WikiTextMoEConfig(steps=2, vocab_size=512)
>>> cfg.model().seq_length, cfg.moe().num_experts
(64, 8)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sgl import comm
from sgl._checks import check_choice, check_int, check_real
from sgl.errors import ConfigError
from sgl.systems.moe.config import MoEConfig
from sgl.systems.moe.traces import RoutingTrace, save_trace
from sgl.systems.moe.train import TrainSpec, check_options, train_moe_lm
from sgl.systems.parallel.model import TransformerConfig

__all__ = ["WikiTextMoEConfig", "wikitext_batches", "run_wikitext_moe"]


@dataclass(frozen=True)
class WikiTextMoEConfig:
    """Shapes and schedule of the WikiText-2 MoE LM run (defaults: the benchmark's CPU size)."""

    steps: int = 100
    batch_size: int = 16
    seq_len: int = 64
    vocab_size: int = 4096
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_experts: int = 8
    top_k: int = 2
    ffn_hidden_size: int = 128
    capacity_factor: float | None = None
    aux_loss_coef: float = 0.01
    bias_update_rate: float = 0.0
    gate: str = "softmax"
    activation: str = "swiglu"
    lr: float = 3e-3
    val_batches: int = 4
    max_documents: int | None = None  # only the first N train/valid articles (tests, quick runs)
    seed: int = 0
    capacity_groups: int | None = None  # see MoEConfig: None = capacity per expert per rank

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "seq_len", "vocab_size", "hidden_size", "num_layers", "val_batches"):
            check_int(getattr(self, name), name, 1 if name != "val_batches" else 0)
        check_real(self.lr, "lr", 0.0, open_low=True)
        if self.max_documents is not None:
            check_int(self.max_documents, "max_documents", 1)
        self.moe()  # validates the MoE fields

    def model(self) -> TransformerConfig:
        return TransformerConfig("wikitext-moe", self.num_layers, self.hidden_size, self.num_heads,
                                 self.ffn_hidden_size, self.vocab_size, self.seq_len)

    def moe(self) -> MoEConfig:
        return MoEConfig(self.hidden_size, self.ffn_hidden_size, self.num_experts, self.top_k, self.gate,
                         self.activation, self.capacity_factor, self.aux_loss_coef, self.bias_update_rate,
                         seed=self.seed, capacity_groups=self.capacity_groups)


def wikitext_batches(root: str | Path, cfg: WikiTextMoEConfig,
                     cache_dir: str | Path | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``([steps, B, S+1] train, [n, B, S+1] validation)`` id batches, blocks shuffled with the seed."""
    from sgl.systems.text import encode_corpus, lm_blocks, train_tokenizer, wikitext2_documents

    cut = slice(None, cfg.max_documents)
    train_docs = wikitext2_documents(root, "train")[cut]
    tok = train_tokenizer(train_docs, vocab_size=cfg.vocab_size, cache_dir=cache_dir)
    gen = torch.Generator().manual_seed(cfg.seed)
    blocks = lm_blocks(encode_corpus(tok, train_docs), cfg.seq_len)
    need = cfg.steps * cfg.batch_size
    idx = torch.randperm(blocks.shape[0], generator=gen)
    idx = idx.repeat(-(-need // idx.numel()))[:need]  # more steps than blocks: further epochs
    train = blocks[idx].view(cfg.steps, cfg.batch_size, cfg.seq_len + 1)
    val = None
    if cfg.val_batches:
        vblocks = lm_blocks(encode_corpus(tok, wikitext2_documents(root, "valid")[cut]), cfg.seq_len)
        n = min(cfg.val_batches, vblocks.shape[0] // cfg.batch_size)
        if n < 1:
            raise ConfigError(f"the validation split has fewer than batch_size={cfg.batch_size} blocks")
        val = vblocks[: n * cfg.batch_size].view(n, cfg.batch_size, cfg.seq_len + 1)
    return train, val


def _worker(rank: int, world: int, spec: TrainSpec) -> dict[str, Any]:
    out = train_moe_lm(rank, world, spec)
    out.pop("grads", None)
    return out


def _dropped(result: dict[str, Any]) -> int:
    """(token, expert) pairs this rank's capacity dropped over the training steps."""
    return int(sum(map(sum, result["dropped"])))


def run_wikitext_moe(root: str | Path, cfg: WikiTextMoEConfig, *, procs: int = 2, dispatch: str = "ep",
                     placement: str = "none", balance: str = "none", lsh_hashes: int = 6,
                     lsh_proj_dim: int | None = None, nodes: int = 1,
                     trace_out: str | Path | None = None, cache_dir: str | Path | None = None,
                     progress: bool = False, timeout: float = 3600.0, launcher: str = "spawn",
                     start_method: str = "spawn", hf_config: dict[str, Any] | None = None,
                     precision: str = "fp32") -> dict[str, Any]:
    """Train on WikiText-2 in ``procs`` gloo processes (1: in this process); returns the summary.

    ``launcher="torchrun"``: this process is one rank of a ``torchrun`` launch (``procs`` is
    ignored; ``comm.init()`` reads the environment); only rank 0 writes the trace.
    ``start_method``: how :func:`sgl.comm.spawn` starts the processes (``"fork"`` shares this
    process's imports: seconds faster to start, POSIX only).
    ``hf_config``: train a Hugging Face Mixtral / Qwen2-MoE causal LM built from this
    ``transformers`` config dict (converted with :func:`sgl.systems.moe.convert`) instead of the
    small LM; its shapes replace ``cfg``'s model fields (the BPE vocabulary is the config's
    ``vocab_size``).  ``precision``: ``"fp32"`` or ``"bf16"`` (autocast, fp32 master weights).
    """
    top_k = cfg.top_k
    if hf_config is not None:
        from dataclasses import replace

        from sgl.systems.moe.hf import check_hf_config

        check_hf_config(hf_config)
        cfg = replace(cfg, vocab_size=int(hf_config["vocab_size"]))
        top_k = int(hf_config["num_experts_per_tok"])
    check_int(procs, "procs", 1)
    check_choice(launcher, "launcher", ("spawn", "torchrun"))
    check_choice(start_method, "start_method", ("spawn", "fork", "forkserver"))
    check_options(dispatch, placement, balance)
    if launcher == "torchrun":
        comm.init()
        procs = comm.get_world_size()
    train, val = wikitext_batches(root, cfg, cache_dir)
    if procs == 1 and dispatch == "ep" and launcher == "spawn":
        dispatch = "local"
    spec = TrainSpec(None if hf_config else cfg.model(), None if hf_config else cfg.moe(), train, lr=cfg.lr,
                     dispatch=dispatch, placement=placement, hf_config=hf_config, precision=precision,
                     balance=balance, lsh_hashes=lsh_hashes,
                     lsh_proj_dim=lsh_proj_dim, nodes=nodes, val_batches=val,
                     record_traces=trace_out is not None, seed=cfg.seed, timeout=min(timeout, 600.0),
                     progress=progress)
    if launcher == "torchrun":
        mine = _worker(comm.get_rank(), procs, spec)
        rows = comm.all_reduce(torch.tensor([mine["sent_rows"], mine["routed_rows"], _dropped(mine)]))
        mine["sent_rows"], mine["routed_rows"], mine["dropped_total"] = int(rows[0]), int(rows[1]), int(rows[2])
        results = [mine]
    elif procs == 1:
        results = [train_moe_lm(0, 1, spec)]
    else:
        results = comm.spawn(_worker, procs, spec, timeout=timeout, start_method=start_method)
    r0 = results[0]
    summary: dict[str, Any] = {
        "config": asdict(cfg), "hf_model_type": (hf_config or {}).get("model_type"), "precision": precision,
        "procs": procs, "dispatch": dispatch, "placement": placement, "balance": balance,
        "first_loss": r0["loss"][0], "final_loss": r0["loss"][-1], "val_loss": r0.get("val_loss"),
        "mean_step_s": float(np.mean(r0["step_time"][1:] or r0["step_time"])),
        "sent_rows": sum(r["sent_rows"] for r in results), "routed_rows": sum(r["routed_rows"] for r in results),
        "dropped_pairs": (r0["dropped_total"] if "dropped_total" in r0 else sum(_dropped(r) for r in results)),
        "moved_samples": r0["moved_samples"], "layout_changes": r0["layout_changes"], "loss": r0["loss"],
    }
    if trace_out is not None and comm.get_rank() == 0:
        counts = torch.stack(r0["traces"]).cpu().numpy()
        save_trace(RoutingTrace(counts, top_k, cfg.seq_len, source=f"wikitext2 MoE LM ({dispatch})",
                                extra={"step_loss": r0["loss"]}), trace_out)
        summary["trace"] = str(trace_out)
    return summary
