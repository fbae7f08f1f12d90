"""Angel-PTM-style pages: parameters and Adam states in fixed-size pages over device, host and SSD.

The model's parameters are views into one flat device vector, cut into pages of ``page_elems``
elements.  Page ``i`` holds its fp32 parameters, Adam ``m`` and ``v`` (``12 * page_elems`` bytes).
Its home is the SSD tier: two slot files per page, ``page{i}.{s}``, slot ``s = step % 2``; at most
``host_bytes`` of pages are cached in host memory (LRU).  After backward the
:class:`PageScheduler` walks the pages in layer order, a prefetch thread reading the next pages
from SSD while the current one is updated, and each updated page is written to its slot for this
step without any lock, by a writer thread while the next page updates: a page file is written to
a temporary name and renamed (atomic), so a page is either its old or its new version.  When all pages of step ``t`` are written, ``COMMIT`` (the
step and its loss) is renamed into place.  After a crash, every page still has the slot of the
last committed step (the slot written next is the other one), so training resumes at
``COMMIT.step + 1`` with nothing lost and nothing applied twice.

The Adam update is ``torch.optim.Adam``'s (``foreach=False``) element-wise arithmetic on a page,
so paged training follows in-memory training bit for bit.

>>> import tempfile, torch
>>> model = torch.nn.Linear(4, 2)
>>> store = PagedAdam(model, tempfile.mkdtemp(), page_elems=4, host_bytes=96, lr=0.1)
>>> store.num_pages, store.resume()
(3, 1)
"""
from __future__ import annotations

import json
import math
import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

from sgl._checks import check_int, check_real
from sgl.errors import CacheError, PlanError
from sgl.fileio import atomic_write

__all__ = ["PagedAdam"]


class PagedAdam:
    """Adam whose parameters and states live in SSD pages with a bounded host cache.

    Args:
        model: its parameters are re-pointed into one flat vector (same values).
        directory: the SSD tier (created); holds ``page*.{0,1}``, ``COMMIT`` and ``META``.
        page_elems: elements per page.
        host_bytes: host-memory budget of the page cache; at least two pages (one updating, one
            prefetched) must fit, else :class:`~sgl.errors.PlanError` names that minimum.
        lr, betas, eps: Adam's.
        durable: fsync every page file (survives power loss, not only a killed process).
    """

    def __init__(self, model: nn.Module, directory: str | os.PathLike, page_elems: int = 1 << 16,
                 host_bytes: float = 64 << 20, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, durable: bool = False) -> None:
        self.page_elems = check_int(page_elems, "page_elems", 1)
        self.host_bytes = check_real(host_bytes, "host_bytes", 0.0)
        self.lr, self.betas, self.eps = check_real(lr, "lr", 0.0, open_low=True), betas, eps
        self.durable = bool(durable)
        page_bytes = 12 * self.page_elems
        if self.host_bytes < 2 * page_bytes:
            raise PlanError(f"host budget {self.host_bytes:.0f} B is below the minimum working set of two pages "
                            f"(2 x {page_bytes} B: the page being updated and the one prefetched); raise "
                            "host_bytes or use smaller pages")
        self.capacity = int(self.host_bytes // page_bytes)
        self.params = [p for p in model.parameters() if p.requires_grad]
        total = sum(p.numel() for p in self.params)
        self.flat = torch.zeros(total, dtype=torch.float32, device=self.params[0].device)
        offset = 0
        for p in self.params:
            n = p.numel()
            self.flat[offset:offset + n].copy_(p.detach().reshape(-1))
            p.data = self.flat[offset:offset + n].view_as(p)
            offset += n
        self.num_pages = math.ceil(total / self.page_elems)
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cache: "OrderedDict[int, np.ndarray]" = OrderedDict()
        self.lock = threading.Lock()  # guards the cache dict only; page files need none
        self.step = 0
        self.stats = {"ssd_reads": 0, "ssd_writes": 0, "cache_hits": 0}
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sgl-page-writer")
        self._check_meta(total)

    # -- files -------------------------------------------------------------------------------
    def _check_meta(self, total: int) -> None:
        meta = {"format": "sgl-paged-adam-v1", "elements": total, "page_elems": self.page_elems}
        path = self.dir / "META"
        if path.exists():
            old = json.loads(path.read_text())
            if old != meta:
                raise CacheError(f"{self.dir} holds pages of another model ({old}); expected {meta}. "
                                 "Use an empty folder or the same model and page size")
        else:
            with atomic_write(path, "w") as fh:
                json.dump(meta, fh)

    def _page_path(self, page: int, step: int) -> Path:
        return self.dir / f"page{page}.{step % 2}"

    def _span(self, page: int) -> slice:
        lo = page * self.page_elems
        return slice(lo, min(lo + self.page_elems, self.flat.numel()))

    def _read(self, page: int, step: int) -> np.ndarray:
        path = self._page_path(page, step)
        raw = np.fromfile(path, dtype=np.float32)
        if len(raw) < 1 or int(raw[0]) != step:
            raise CacheError(f"page {page} slot {path.name} holds step {int(raw[0]) if len(raw) else None}, "
                             f"not {step}: the page store is corrupt")
        self.stats["ssd_reads"] += 1
        return raw[1:].reshape(3, -1).copy()

    def _write(self, page: int, step: int, data: np.ndarray) -> None:
        # One writer per page slot: a fixed temporary name, then an atomic rename.  No fsync per
        # page: a killed process loses nothing the kernel has (``durable=True`` syncs at commit).
        path = self._page_path(page, step)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as fh:
            np.concatenate([np.array([step], dtype=np.float32), data.reshape(-1)]).tofile(fh)
            if self.durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
        self.stats["ssd_writes"] += 1

    def _get(self, page: int) -> np.ndarray:
        with self.lock:
            if page in self.cache:
                self.cache.move_to_end(page)
                self.stats["cache_hits"] += 1
                return self.cache[page]
        data = self._read(page, self.step)
        with self.lock:
            self.cache[page] = data
            while len(self.cache) > self.capacity:
                self.cache.popitem(last=False)
        return data

    # -- life cycle ----------------------------------------------------------------------------
    def resume(self) -> int:
        """Load the last committed step (or write step 0 pages); returns the next step to run."""
        commit = self.dir / "COMMIT"
        if commit.exists():
            self.step = int(json.loads(commit.read_text())["step"])
            for page in range(self.num_pages):
                data = self._get(page)
                self.flat[self._span(page)].copy_(torch.from_numpy(data[0]))
            return self.step + 1
        self.step = 0
        for page in range(self.num_pages):
            n = self._span(page).stop - self._span(page).start
            data = np.zeros((3, n), dtype=np.float32)
            data[0] = self.flat[self._span(page)].detach().cpu().numpy()
            self._write(page, 0, data)
        with atomic_write(commit, "w") as fh:
            json.dump({"step": 0, "loss": None}, fh)
        return 1

    def history(self) -> Dict[str, Any]:
        return json.loads((self.dir / "COMMIT").read_text())

    def step_update(self, loss: float, crash_after_pages: Optional[int] = None) -> None:
        """Apply Adam to every page for step ``self.step + 1`` and commit it.

        ``crash_after_pages`` (tests) kills the process with SIGKILL after that many page writes.
        """
        t = self.step + 1
        grad = torch.cat([p.grad.reshape(-1) for p in self.params]) if self.params else None
        b1, b2 = self.betas
        prefetched: Dict[int, threading.Thread] = {}

        def prefetch(page: int) -> None:
            if page < self.num_pages and page not in prefetched:
                th = threading.Thread(target=self._get, args=(page,), daemon=True)
                th.start()
                prefetched[page] = th

        writes = []
        prefetch(0)
        for page in range(self.num_pages):
            prefetch(page + 1)  # next layer's page loads while this one updates
            prefetched.pop(page).join()
            data = self._get(page).copy()
            span = self._span(page)
            p = torch.from_numpy(data[0])
            m, v = torch.from_numpy(data[1]), torch.from_numpy(data[2])
            g = grad[span].detach().cpu()
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g.conj(), value=1 - b2)
            step_size = self.lr / (1 - b1 ** t)
            denom = (v.sqrt() / math.sqrt(1 - b2 ** t)).add_(self.eps)
            p.addcdiv_(m, denom, value=-step_size)
            writes.append(self._writer.submit(self._write, page, t, data))  # written while the next page updates
            with self.lock:
                if page in self.cache:
                    self.cache[page] = data
            self.flat[span].copy_(p)
            if crash_after_pages is not None and page + 1 >= crash_after_pages:
                writes[-1].result()
                os.kill(os.getpid(), 9)
        for w in writes:
            w.result()  # every page of step t is on disk before COMMIT names step t
        with atomic_write(self.dir / "COMMIT", "w") as fh:
            json.dump({"step": t, "loss": float(loss)}, fh)
        self.step = t
        for p in self.params:
            p.grad = None

    @property
    def state_bytes(self) -> int:
        """Bytes of parameters + Adam states kept in pages."""
        return 12 * self.flat.numel()
