"""Student Parallelism: shallow students distilled from a deep teacher, run as one wide model.

Stacking distillation with boosting: student ``i`` fits the residual the students before it
leave on the teacher's logits,

    s_i = argmin_s  E_x || s(x) - (t(x) - Σ_{j<i} s_j(x)) ||^2  (+ λ CE(Σ_{j<=i} s_j(x), y)),

so the ensemble ``f_k(x) = Σ_{i<k} s_i(x)`` approximates the teacher better with every
student, and dropping the *last* students degrades it gracefully. All students share one
architecture, so their parameters are stacked and one pass runs them side
by side (batched matmuls over a leading student axis): the depth a request waits for is one
shallow student's, not the teacher's.

>>> import torch
>>> from sgl.systems.serving.students.encoders import bert_config
>>> from transformers import BertForSequenceClassification
>>> torch.manual_seed(0) and None
>>> students = [BertForSequenceClassification(bert_config(50, 1, hidden=16, heads=2)).eval() for _ in range(3)]
>>> wide = StudentEnsemble(students)
>>> ids = torch.randint(3, 50, (4, 7)); mask = torch.ones_like(ids)
>>> per = wide.each(ids, mask)                                    # [students, batch, labels]
>>> torch.allclose(wide(ids, mask, active=2), per[:2].sum(0), atol=1e-6)
True
>>> torch.allclose(per[1], students[1](input_ids=ids, attention_mask=mask).logits, atol=1e-5)
True
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np
import torch

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError
from sgl.systems.serving.lm import warmup_linear
from sgl.systems.serving.students.encoders import _batches, batched_logits

__all__ = ["StudentEnsemble", "distil_students"]


class StudentEnsemble(torch.nn.Module):
    """``k`` same-shaped BERT students run as one wide model: every weight is stacked ``[k, ...]``.

    One forward does each operation of a *single* shallow student once, on ``[k, batch, ...]``
    tensors (batched matmuls), so the sequential depth a request waits for is one student's.
    Equal to running each ``BertForSequenceClassification`` on its own (a test checks it).
    """

    def __init__(self, students: Sequence[torch.nn.Module]):
        super().__init__()
        if not students:
            raise ConfigError("StudentEnsemble needs at least one student")
        shapes = {tuple((n, tuple(p.shape)) for n, p in s.named_parameters()) for s in students}
        if len(shapes) != 1:
            raise ConfigError("every student must have the same architecture to be stacked into one wide model")
        cfg = students[0].config
        if getattr(cfg, "hidden_act", "gelu") != "gelu" or getattr(cfg, "model_type", "bert") != "bert":
            raise ConfigError("StudentEnsemble stacks BERT students with gelu activations")
        self.num_students = len(students)
        self.num_layers = cfg.num_hidden_layers
        self.heads = cfg.num_attention_heads
        self.eps = cfg.layer_norm_eps
        names = [n for n, _ in students[0].named_parameters()]
        params = [dict(s.named_parameters()) for s in students]
        for n in names:
            self.register_buffer(n.replace(".", "__"), torch.stack([p[n].detach() for p in params]))

    def _w(self, name: str, active: int) -> torch.Tensor:
        return getattr(self, name.replace(".", "__"))[:active]

    def _linear(self, x: torch.Tensor, name: str, active: int) -> torch.Tensor:
        w, b = self._w(name + ".weight", active), self._w(name + ".bias", active)
        # one [rows, in] x [in, out] GEMM per student (bmm over the student axis)
        flat = torch.baddbmm(b.unsqueeze(1), x.reshape(active, -1, x.shape[-1]), w.transpose(1, 2))
        return flat.reshape(*x.shape[:-1], w.shape[1])

    def _norm(self, x: torch.Tensor, name: str, active: int) -> torch.Tensor:
        x = torch.nn.functional.layer_norm(x, x.shape[-1:], eps=self.eps)
        return x * self._w(name + ".weight", active)[:, None, None] + self._w(name + ".bias", active)[:, None, None]

    @torch.no_grad()
    def each(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, active: Optional[int] = None) -> torch.Tensor:
        """Logits of the first ``active`` students, ``[active, batch, labels]``, in one batched pass."""
        k = self.num_students if active is None else check_int(active, "active", 1, self.num_students)
        b, length = input_ids.shape
        e = "bert.embeddings."
        x = (self._w(e + "word_embeddings.weight", k)[:, input_ids]
             + self._w(e + "position_embeddings.weight", k)[:, None, :length]
             + self._w(e + "token_type_embeddings.weight", k)[:, None, :1])
        x = self._norm(x, e + "LayerNorm", k)                                   # [k, B, L, H]
        hidden = x.shape[-1]
        dh = hidden // self.heads
        bias = (1.0 - attention_mask[None, :, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for i in range(self.num_layers):
            p = f"bert.encoder.layer.{i}."
            split = lambda t: t.reshape(k, b, length, self.heads, dh).transpose(2, 3)  # noqa: E731
            q = split(self._linear(x, p + "attention.self.query", k))
            kk = split(self._linear(x, p + "attention.self.key", k))
            v = split(self._linear(x, p + "attention.self.value", k))
            att = torch.softmax(q @ kk.transpose(-1, -2) / dh ** 0.5 + bias, dim=-1) @ v
            att = att.transpose(2, 3).reshape(k, b, length, hidden)
            x = self._norm(self._linear(att, p + "attention.output.dense", k) + x, p + "attention.output.LayerNorm", k)
            inter = torch.nn.functional.gelu(self._linear(x, p + "intermediate.dense", k))
            x = self._norm(self._linear(inter, p + "output.dense", k) + x, p + "output.LayerNorm", k)
        pooled = torch.tanh(self._linear(x[:, :, :1], "bert.pooler.dense", k))
        return self._linear(pooled, "classifier", k)[:, :, 0]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, active: Optional[int] = None):
        """The ensemble output ``Σ_{i<active} s_i(x)``."""
        return self.each(input_ids, attention_mask, active).sum(0)

    def __repr__(self) -> str:
        return f"StudentEnsemble(num_students={self.num_students}, layers={self.num_layers})"


def distil_students(teacher: Any, student_config: Any, ids: torch.Tensor, mask: torch.Tensor,
                    labels: np.ndarray, *, num_students: int = 4, steps: int = 300, batch_size: int = 32,
                    lr: float = 1e-3, ce_weight: float = 0.1, seed: int = 0) -> List[Any]:
    """Train ``num_students`` students one after another, each on the residual of the ones before."""
    from transformers import BertForSequenceClassification

    num_students = check_int(num_students, "num_students", minimum=1)
    steps = check_int(steps, "steps", minimum=1)
    ce_weight = check_real(ce_weight, "ce_weight", 0.0)
    y = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    target = batched_logits(lambda i, m: teacher(input_ids=i, attention_mask=m).logits, ids, mask)
    sofar = torch.zeros_like(target)
    students: List[Any] = []
    for k in range(num_students):
        torch.manual_seed(seed + 1000 * (k + 1))
        student = BertForSequenceClassification(student_config)
        if students:   # start from the previous student's embeddings: same text, faster fit
            student.bert.embeddings.load_state_dict(students[-1].bert.embeddings.state_dict())
        opt = torch.optim.AdamW(student.parameters(), lr=lr, weight_decay=0.01)
        sched = warmup_linear(opt, steps)
        student.train()
        for rows in _batches(len(y), batch_size, steps, seed + k):
            width = int(mask[rows].sum(1).max())
            out = student(input_ids=ids[rows, :width], attention_mask=mask[rows, :width]).logits
            loss = torch.nn.functional.mse_loss(out, target[rows] - sofar[rows])
            if ce_weight:
                loss = loss + ce_weight * torch.nn.functional.cross_entropy(out + sofar[rows], y[rows])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        student.eval()
        sofar = sofar + batched_logits(lambda i, m: student(input_ids=i, attention_mask=m).logits, ids, mask)
        students.append(student)
    return students
