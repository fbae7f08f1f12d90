"""PQCache's memory effect: a ``transformers`` ``Cache`` that keeps the middle tokens' KV off the device.

:class:`PQKVCache` holds, per layer, only the ``s`` sink tokens and the recent window on the
model's device, plus the PQ codes and codebooks of the middle tokens (one byte per id); the
middle tokens' keys and values live in a host tier (page-locked when the device is a GPU). A
decode step of ``T`` tokens with ``(s, r, k) = KVBudget.split(T)`` then

1. moves the tokens that left the recent window ``[T - r, T)`` to the host tier, coding their
   keys first (:meth:`PQIndex.append`, no retraining);
2. scores the middle ``[s, T - r)`` from the codes alone and keeps the top ``k``
   (the same scores and ties as :class:`~.selectors.PQCacheSelector` on a full cache);
3. fetches the ``k`` selected tokens from the host and attends ``sink + selected + recent``.

Device bytes between steps are ``(s + r) x 2 d x element size`` per (layer, row, KV head) plus
the codes, instead of ``T x 2 d x element size``. Host-to-device fetches and device-to-host
offloads run on a side stream when the device has one (CUDA), and wait for it only where the
data is used; on the CPU the same code runs with the copies in line.

Use it inside :func:`~.hook.kv_selection` with the same :class:`~.selectors.PQCacheSelector`:

>>> import torch
>>> from transformers import LlamaConfig, LlamaForCausalLM
>>> from sgl.systems.serving.kv import kv_selection, make_selector
>>> torch.manual_seed(0) and None
>>> cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
...                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
>>> model = LlamaForCausalLM(cfg).eval()
>>> ids = torch.randint(3, 50, (1, 120))
>>> plain = model.generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=0)
>>> sel = make_selector("pqcache", budget=1.0, bits=3)
>>> with kv_selection(model, sel):
...     same = model.generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=0,
...                           cache=PQKVCache.for_model(model, sel))
>>> torch.equal(plain, same)
True
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, List, Optional, Tuple

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from sgl._checks import check_int
from sgl.errors import ConfigError

__all__ = ["PQKVCache", "PQKVLayer", "kv_cache_bytes"]


def _storage_bytes(tensors, device: Optional[torch.device] = None) -> int:
    """Bytes of the distinct storages behind ``tensors`` (on ``device`` when given): what is held, views included."""
    seen: Dict[Tuple[str, int], int] = {}
    for t in tensors:
        if t is None or (device is not None and t.device != device):
            continue
        st = t.untyped_storage()
        seen[(str(t.device), st.data_ptr())] = st.nbytes()
    return sum(seen.values())


def kv_cache_bytes(cache: Cache, device: Optional[torch.device] = None) -> int:
    """Bytes a ``transformers`` cache holds (on ``device`` when given), measured from its tensors' storages.

    For a :class:`PQKVCache` this counts both tiers (its :meth:`~PQKVCache.device_bytes` counts the
    device tier alone); for other caches, every layer's keys and values.
    """
    if isinstance(cache, PQKVCache):
        for layer in cache.layers:
            layer.land()
        return sum(_storage_bytes(layer.tensors(), device) for layer in cache.layers if layer.is_initialized)
    return _storage_bytes([t for layer in cache.layers for t in (layer.keys, layer.values)], device)


def _side_stream(device: torch.device):
    """A copy stream on a CUDA device, None elsewhere (the copies then run in line)."""
    return torch.cuda.Stream(device) if device.type == "cuda" else None


def _on(stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


class PQKVLayer(CacheLayerMixin):
    """One decoder layer's tiers: sink and recent window on the device, the middle on the host."""

    is_sliding = False
    is_croppable = False
    supports_early_init = False

    def __init__(self, owner: "PQKVCache", layer_idx: int) -> None:
        super().__init__()
        self.owner, self.layer_idx = owner, layer_idx
        self.reset()

    def reset(self) -> None:
        self.keys = self.values = None          # the prompt, between prefill and settle()
        self.sink_k = self.sink_v = self.recent_k = self.recent_v = None
        self.host_k = self.host_v = None
        self.length = self.sink = self.offloaded = 0
        self.settled = False
        self.is_initialized = False
        self._pending: list = []                # offloads in flight: (event or None, host k, host v)

    def device_tensors(self) -> List[Optional[torch.Tensor]]:
        """The tensors of the device tier: prompt (until settled), sink, recent window, PQ codes and codebooks."""
        index = self.owner.selector.state.get(self.layer_idx, {}).get("index")
        codes = [index.codes, index.centroids] if index is not None else []
        return [self.keys, self.values, self.sink_k, self.sink_v, self.recent_k, self.recent_v] + codes

    def tensors(self) -> List[Optional[torch.Tensor]]:
        """Every tensor the layer holds: the device tier and the host tier."""
        return self.device_tensors() + [self.host_k, self.host_v]

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device, self.dtype = key_states.device, key_states.dtype
        self.host = self.owner.host_device
        self.stream = _side_stream(self.device)
        self.is_initialized = True

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return -1

    def get_mask_sizes(self, query_length: int) -> Tuple[int, int]:
        return self.length + query_length, 0

    def crop(self, tokens_to_remove: int) -> None:
        raise ConfigError("PQKVCache cannot be cropped (assisted decoding): use a DynamicCache")

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise ConfigError("PQKVCache does not support beam search: use num_beams=1")

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        """Prefill: keep the prompt for the hook's exact attention. Decode: append to the recent window."""
        if not self.owner.selector.active:
            raise ConfigError("PQKVCache holds only part of the KV: run the model inside "
                              "kv_selection(model, selector) with the selector the cache was built for")
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self.keys, self.values = key_states, value_states
            self.length = key_states.shape[2]
            return key_states, value_states
        if not self.settled:
            raise ConfigError("PQKVCache: the prompt was not seen by the kv_selection hook")
        if key_states.shape[2] != 1:
            raise ConfigError(f"PQKVCache decodes one token per step, got {key_states.shape[2]}: "
                              f"prefill once, then generate token by token")
        self.recent_k = torch.cat([self.recent_k, key_states], 2)
        self.recent_v = torch.cat([self.recent_v, value_states], 2)
        self.length += 1
        sink, recent, _ = self.owner.selector.budget.split(self.length)
        self._to_host(self.length - recent)
        return self.recent_k, self.recent_v

    def settle(self) -> None:
        """After the prompt's attention: sink and the next step's recent window stay, the middle leaves."""
        t = self.length
        budget = self.owner.selector.budget
        self.sink = min(budget.sink, t - 1)
        if t < budget.sink + 2 or t + 1 - budget.split(t + 1)[1] < self.sink:   # nothing to offload yet
            raise ConfigError(f"a prompt of {t} tokens is too short for PQKVCache (sink {budget.sink}); "
                              f"use the model's DynamicCache for it")
        k, v = self.keys, self.values
        self.keys = self.values = None
        self.sink_k, self.sink_v = k[:, :, :self.sink].clone(), v[:, :, :self.sink].clone()
        self.host_k = k[:, :, self.sink:self.sink].to(self.host)
        self.host_v = v[:, :, self.sink:self.sink].to(self.host)
        self.offloaded = 0
        self.recent_k, self.recent_v = k[:, :, self.sink:].clone(), v[:, :, self.sink:].clone()
        self.settled = True
        self._to_host(t + 1 - budget.split(t + 1)[1])

    def _to_host(self, window_start: int) -> None:
        """Tokens before ``window_start`` leave the device: coded (when new to the index), then offloaded."""
        have = self.sink + self.offloaded
        n = window_start - have
        if n <= 0:
            return
        k, v = self.recent_k[:, :, :n], self.recent_v[:, :, :n]
        index = self.owner.selector.state[self.layer_idx]["index"]
        b, hkv, _, d = k.shape
        coded = index.codes.shape[1]
        if have + n > self.sink + coded:      # prompt tokens were coded at prefill; later ones now
            new = have + n - self.sink - coded
            index.append(k[:, :, n - new:].reshape(b * hkv, new, d))
        with _on(self.stream):
            if self.stream is not None:
                self.stream.wait_stream(torch.cuda.current_stream(self.device))
            hk = k.to(self.host, non_blocking=self.stream is not None)
            hv = v.to(self.host, non_blocking=self.stream is not None)
            event = None
            if self.stream is not None:
                k.record_stream(self.stream)
                v.record_stream(self.stream)
                event = self.stream.record_event()
        self._pending.append((event, hk, hv))   # joins the host tier when next read (after the copy lands)
        self.offloaded += n
        self.recent_k, self.recent_v = self.recent_k[:, :, n:].clone(), self.recent_v[:, :, n:].clone()

    def land(self) -> None:
        """Append the offloads in flight to the host tier, once each copy has landed."""
        if not self._pending:
            return
        for event, _, _ in self._pending:
            if event is not None:
                event.synchronize()
        self.host_k = torch.cat([self.host_k] + [k for _, k, _ in self._pending], 2)
        self.host_v = torch.cat([self.host_v] + [v for _, _, v in self._pending], 2)
        self._pending = []

    def fetch(self, positions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """K, V ``[B, Hkv, n, d]`` on the device of the middle ``positions [B, Hkv, n]`` (from the host tier)."""
        self.land()
        rel = (positions - self.sink).to(self.host)
        idx = rel.unsqueeze(-1).expand(*rel.shape, self.host_k.shape[-1])
        hk, hv = self.host_k.gather(2, idx), self.host_v.gather(2, idx)
        if self.stream is None:
            return hk.to(self.device), hv.to(self.device)
        hk, hv = hk.pin_memory(), hv.pin_memory()
        with _on(self.stream):
            k = hk.to(self.device, non_blocking=True)
            v = hv.to(self.device, non_blocking=True)
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        k.record_stream(torch.cuda.current_stream(self.device))
        v.record_stream(torch.cuda.current_stream(self.device))
        return k, v


class PQKVCache(Cache):
    """A ``transformers`` ``Cache`` holding only sink, recent and (per step) selected tokens on the device.

    Args:
        selector: the :class:`~.selectors.PQCacheSelector` whose budget and PQ index it follows
            (the same object goes to :func:`~.hook.kv_selection`).
        num_layers: decoder layers of the model (:meth:`for_model` reads them from its config).
        host_device: the host tier's device (default: the CPU's memory; page-locked for CUDA models).

    Greedy and sampled ``generate()`` work with batch size >= 1; beam search and cropping
    (assisted decoding) raise :class:`~sgl.errors.ConfigError`.
    """

    def __init__(self, selector: Any, num_layers: int, host_device: Any = None) -> None:
        from sgl.systems.serving.kv.selectors import PQCacheSelector

        if not isinstance(selector, PQCacheSelector):
            raise ConfigError(f"PQKVCache needs a PQCacheSelector (make_selector('pqcache', ...)), "
                              f"got {type(selector).__name__}")
        num_layers = check_int(num_layers, "num_layers", minimum=1)
        self.selector = selector
        self.host_device = torch.device(host_device if host_device is not None else "cpu")
        super().__init__(layers=[PQKVLayer(self, i) for i in range(num_layers)])
        selector.kv_cache = self

    @classmethod
    def for_model(cls, model: Any, selector: Any, host_device: Any = None) -> "PQKVCache":
        """A cache for ``model``'s decoder layers (``config.num_hidden_layers``)."""
        cfg = model.config.get_text_config(decoder=True) if hasattr(model.config, "get_text_config") else model.config
        return cls(selector, cfg.num_hidden_layers, host_device)

    def device_bytes(self) -> int:
        """Bytes of the device tier (sink, recent window, codes, codebooks), from the storages of its tensors.

        On a GPU these are the bytes on the device; on the CPU both tiers share host memory and this
        counts what a GPU would hold (the host tier is :meth:`host_bytes`).
        """
        return sum(_storage_bytes(layer.device_tensors()) for layer in self.layers if layer.is_initialized)

    def host_bytes(self) -> int:
        """Bytes of the host tier (the middle tokens' K and V)."""
        for layer in self.layers:
            layer.land()
        return sum(_storage_bytes([layer.host_k, layer.host_v]) for layer in self.layers if layer.is_initialized)

    def reset(self) -> None:
        for layer in self.layers:
            layer.reset()
