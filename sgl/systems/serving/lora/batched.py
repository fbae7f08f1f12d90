"""Multi-LoRA serving with mixed adapters in one batch (Punica / S-LoRA style gathered LoRA).

Every adapted linear layer keeps the shared base weight ``W`` once and the adapters' factors
stacked as ``A [n, r, in]`` and ``B [n, out, r]`` (ranks below the largest ``r`` padded with
zeros, which adds nothing). A batch whose row ``i`` uses adapter ``a(i)`` runs

    y_i = W x_i + s_{a(i)} B_{a(i)} (A_{a(i)} x_i)

with one base matmul for the whole batch and the per-row factors gathered by adapter id
(Punica's BGMV): no adapter switch, no merge, any mix of tasks in one decode iteration.
Serving a row this way equals serving that request alone with its adapter (tested).
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Optional, Sequence

import torch

from sgl._checks import check_int
from sgl.errors import ConfigError

__all__ = ["MixedLoRABatch"]


class _Stacked:
    """One adapted linear layer: the base layer and every adapter's ``A``, ``B``, scaling stacked."""

    def __init__(self, module: Any, names: Sequence[str], dense: bool) -> None:
        self.module = module
        w = module.base_layer.weight
        rank = max(module.lora_A[n].weight.shape[0] for n in names)
        a = w.new_zeros(len(names), rank, w.shape[1])
        b = w.new_zeros(len(names), w.shape[0], rank)
        for j, n in enumerate(names):
            r = module.lora_A[n].weight.shape[0]
            a[j, :r] = module.lora_A[n].weight.detach()
            b[j, :, :r] = module.lora_B[n].weight.detach()
        self.a, self.b = a, b
        self.scale = torch.tensor([float(module.scaling[n]) for n in names], dtype=w.dtype, device=w.device)
        self.dense = dense
        if dense:   # every adapter's A side by side, B scaled side by side: two plain matmuls per batch
            self.a_cat = a.reshape(-1, w.shape[1])                                      # [n r, in]
            self.b_cat = (b * self.scale[:, None, None]).permute(1, 0, 2).reshape(w.shape[0], -1)  # [out, n r]

    def forward(self, x: torch.Tensor, rows: torch.Tensor, onehot: torch.Tensor) -> torch.Tensor:
        y = self.module.base_layer(x)
        if self.dense:   # h = x A_cat^T, zero every block but the row's adapter, then h B_cat^T
            n, r = self.a.shape[:2]
            h = torch.matmul(x.to(self.a.dtype), self.a_cat.t())
            h = (h.reshape(*h.shape[:-1], n, r) * onehot.reshape(-1, *([1] * (h.dim() - 2)), n, 1))
            return y + torch.matmul(h.reshape(*h.shape[:-2], n * r), self.b_cat.t())
        a, b = self.a[rows], self.b[rows]                          # [B, r, in], [B, out, r]
        h = torch.einsum("b...i,bri->b...r", x.to(a.dtype), a)
        delta = torch.einsum("b...r,bor->b...o", h, b)
        return y + delta * self.scale[rows].reshape(-1, *([1] * (delta.dim() - 1)))


class MixedLoRABatch:
    """Serve a batch of requests for different adapters of one ``peft.PeftModel`` in one forward.

    The adapters' weights are read once at construction (call :meth:`refresh` after training
    them further). Inside :meth:`rows` every LoRA linear layer of the model computes the
    per-row delta instead of peft's active-adapter one: gathered per row (``dense=False``,
    Punica's BGMV) or, for few small adapters (``n r <= 256`` when ``dense`` is None), as two
    plain matmuls over all adapters side by side with the other adapters' blocks zeroed
    (``n`` times the LoRA FLOPs, which are small, and no per-row gather).

    >>> import torch
    >>> from peft import LoraConfig, get_peft_model
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> torch.manual_seed(0) and None
    >>> cfg = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
    ...                   num_attention_heads=2, num_key_value_heads=1)
    >>> lora = lambda: LoraConfig(r=2, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    >>> model = get_peft_model(LlamaForCausalLM(cfg), lora(), adapter_name="pos")
    >>> model.add_adapter("neg", lora())
    >>> ids = torch.randint(0, 40, (2, 6))
    >>> mixed = MixedLoRABatch(model).logits(ids, ["pos", "neg"])
    >>> model.set_adapter("neg")
    >>> torch.allclose(mixed[1], model(input_ids=ids[1:]).logits[0], atol=1e-5)
    True
    """

    def __init__(self, peft_model: Any, adapters: Optional[Sequence[str]] = None,
                 dense: Optional[bool] = None) -> None:
        if not hasattr(peft_model, "peft_config"):
            raise ConfigError("MixedLoRABatch needs a peft.PeftModel with the task adapters loaded")
        self.model = peft_model
        loaded = list(peft_model.peft_config)
        self.adapters: List[str] = list(adapters) if adapters is not None else loaded
        for name in self.adapters:
            if name not in loaded:
                raise ConfigError(f"unknown adapter {name!r}; loaded adapters: {loaded}")
        if not self.adapters:
            raise ConfigError("MixedLoRABatch needs at least one adapter")
        self._dense = dense
        self.refresh()

    def refresh(self) -> None:
        """Re-read every adapter's factors from the model."""
        self.layers: List[_Stacked] = []
        for m in self.model.modules():
            if hasattr(m, "lora_A") and hasattr(m, "base_layer") and all(n in m.lora_A for n in self.adapters):
                if getattr(m, "merged", False):
                    raise ConfigError("an adapter is merged into the base weights: unmerge_adapter() first")
                rank = max(m.lora_A[n].weight.shape[0] for n in self.adapters)
                dense = self._dense if self._dense is not None else len(self.adapters) * rank <= 256
                self.layers.append(_Stacked(m, self.adapters, dense))
        if not self.layers:
            raise ConfigError("no LoRA linear layer holds every adapter in " + str(self.adapters))

    def ids(self, adapters: Sequence[str]) -> torch.Tensor:
        """Adapter names per row -> row ids into the stacks (an unknown name is an error)."""
        index: Dict[str, int] = {n: j for j, n in enumerate(self.adapters)}
        bad = [a for a in adapters if a not in index]
        if bad:
            raise ConfigError(f"unknown adapter {bad[0]!r}; loaded adapters: {self.adapters}")
        return torch.tensor([index[a] for a in adapters], dtype=torch.long,
                            device=self.layers[0].a.device)

    @contextlib.contextmanager
    def rows(self, adapters: Sequence[str]) -> Iterator[None]:
        """Within the block, batch row ``i`` of every forward uses adapter ``adapters[i]``."""
        rows = self.ids(adapters)
        onehot = torch.nn.functional.one_hot(rows, len(self.adapters)).to(self.layers[0].a.dtype)
        for layer in self.layers:
            layer.module.forward = (lambda lay: lambda x, *a, **k: lay.forward(x, rows, onehot))(layer)
        try:
            yield
        finally:
            for layer in self.layers:
                del layer.module.forward        # back to the class's (peft's) forward

    @torch.no_grad()
    def logits(self, input_ids: torch.Tensor, adapters: Sequence[str], **kwargs: Any) -> torch.Tensor:
        """Logits ``[B, L, V]`` of ``input_ids [B, L]``, row ``i`` with adapter ``adapters[i]``."""
        if len(adapters) != input_ids.shape[0]:
            raise ConfigError(f"{len(adapters)} adapter names for a batch of {input_ids.shape[0]} rows")
        with self.rows(adapters):
            return self.model(input_ids=input_ids, **kwargs).logits

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, adapters: Sequence[str], max_new_tokens: int = 16,
                 **kwargs: Any) -> torch.Tensor:
        """Greedy continuation of ``input_ids [B, L]`` (left-pad with ``attention_mask`` for ragged prompts)."""
        if len(adapters) != input_ids.shape[0]:
            raise ConfigError(f"{len(adapters)} adapter names for a batch of {input_ids.shape[0]} rows")
        max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1)
        with self.rows(adapters):
            return self.model.generate(input_ids=input_ids, max_new_tokens=max_new_tokens, do_sample=False,
                                       pad_token_id=0, **kwargs)
