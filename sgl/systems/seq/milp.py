"""One MILP entry point for the sequence planners: HiGHS (``highspy``) with a time limit and a warm start.

``minimise c·x  s.t.  row_lo <= A x <= row_hi,  col_lo <= x <= col_hi,  x_j integer where integrality[j]``.

The result says whether the optimum was proven (``status == "optimal"``), whether the time
limit stopped the search (``"time_limit"``, with the best incumbent, possibly the warm start),
or that there is no feasible point (``"infeasible"``).  Planners compare the incumbent with their
heuristic and fall back to the heuristic with a warning when the solver gives nothing better.

>>> import numpy as np, scipy.sparse as sp
>>> r = solve_milp(np.array([-1.0, -1.0]), sp.csr_matrix([[2.0, 1.0]]), [-np.inf], [3.0],
...                np.zeros(2), np.full(2, 5.0), np.array([True, True]))
>>> r.status, r.objective
('optimal', -3.0)
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from sgl.errors import PlanError

__all__ = ["MilpResult", "solve_milp", "quiet_highs"]

_BANNER_SHOWN = False


def quiet_highs():
    """A ``Highs`` instance; the first one is built with stdout muted (HiGHS prints a banner once)."""
    global _BANNER_SHOWN
    import highspy

    if _BANNER_SHOWN:
        return highspy.Highs()
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    _BANNER_SHOWN = True
    return h


@dataclass
class MilpResult:
    status: str                    # "optimal" | "time_limit" | "infeasible" | "error"
    x: Optional[np.ndarray]
    objective: float
    seconds: float


def solve_milp(c, A, row_lo: Sequence[float], row_hi: Sequence[float], col_lo, col_hi, integrality,
               *, time_limit: float = 1.0, start: Optional[np.ndarray] = None, gap: float = 1e-3) -> MilpResult:
    try:
        import highspy
    except ImportError as err:  # pragma: no cover - highspy is a declared dependency
        raise PlanError("the MILP planners need highspy (pip install highspy)") from err
    import scipy.sparse as sp

    t0 = time.perf_counter()
    A = sp.csc_matrix(A, dtype=np.float64)
    n_rows, n_cols = A.shape
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n_cols, n_rows
    lp.col_cost_ = np.asarray(c, dtype=np.float64)
    lp.col_lower_ = np.nan_to_num(np.asarray(col_lo, dtype=np.float64), neginf=-inf, posinf=inf)
    lp.col_upper_ = np.nan_to_num(np.asarray(col_hi, dtype=np.float64), neginf=-inf, posinf=inf)
    lp.row_lower_ = np.nan_to_num(np.asarray(row_lo, dtype=np.float64), neginf=-inf, posinf=inf)
    lp.row_upper_ = np.nan_to_num(np.asarray(row_hi, dtype=np.float64), neginf=-inf, posinf=inf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n_cols, n_rows
    lp.integrality_ = [highspy.HighsVarType.kInteger if flag else highspy.HighsVarType.kContinuous
                       for flag in np.asarray(integrality, dtype=bool)]
    h = quiet_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(max(time_limit, 1e-3)))
    h.setOptionValue("mip_rel_gap", float(gap))
    h.setOptionValue("threads", 1)
    h.setOptionValue("random_seed", 0)
    h.passModel(lp)
    if start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = [float(v) for v in start]
        sol.value_valid = True
        h.setSolution(sol)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    has_point = info.primal_solution_status == 2
    x = np.asarray(h.getSolution().col_value, dtype=np.float64) if has_point else None
    objective = float(info.objective_function_value) if has_point else float("inf")
    if status == highspy.HighsModelStatus.kOptimal:
        name = "optimal"
    elif status == highspy.HighsModelStatus.kTimeLimit:
        name = "time_limit"
    elif status == highspy.HighsModelStatus.kInfeasible:
        name = "infeasible"
    else:
        name = "error" if x is None else "time_limit"
    return MilpResult(name, x, objective, time.perf_counter() - t0)
