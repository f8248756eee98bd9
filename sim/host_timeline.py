"""Host and GPU times of a run of decode iterations, exactly as the step-by-step engine
computes them, without a Python pass per iteration.

One overlap-loop iteration j of a decode stretch (``sim.loop``, executed by
``sim.engine``), with T_j the host time at the top of the loop and E_{j-1} the end of the
forward in flight:

1. schedule: t = T_j + hs_j
2. (speculative decoding with ``host_block`` only) publish wait: if E_{j-1} > t the host
   blocks: pw = (E_{j-1} - t) + wake, t = t + pw
3. launch: t = t + hl_j; the forward runs from S_j = max(t, E_{j-1}) to E_j = S_j + c_j;
   the rest of the launch call: t = t + ht_j (host.launch_tail_*; none when not given)
4. results of the previous forward: if E_{j-1} > t: rw = (E_{j-1} - t) + wake, t = t + rw
5. process: T_{j+1} = t + hp_j

The times are a chain of float additions, so the k iterations are computed by guessing
the whole chain with one cumulative sum (the GPU-bound or the host-bound regime), then
recomputing every iteration from its guessed inputs with the exact operations above,
elementwise. Where guess and recomputation agree the guess is the exact chain (by
induction from T_0); at the first disagreement the recomputed iteration is exact (its
inputs were), and guessing resumes from there. Results are bit-identical to the scalar
chain (tests/test_sim_speed_equivalence.py checks it against :func:`scalar_times`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Timeline:
    """Times (s) of k iterations.

    Attributes:
        T: host time at the top of each iteration and after the last, shape (k + 1,).
        S, E: GPU start and end of each iteration's forward, shape (k,).
        pw, rw: host blocked by the publish wait / the results wait (0 = no block), (k,).
    """

    T: np.ndarray
    S: np.ndarray
    E: np.ndarray
    pw: np.ndarray
    rw: np.ndarray


_ZEROS = np.zeros(4096)
_ZEROS.flags.writeable = False


def _iterate(T, Ep, hs, hl, hp, c, wake, publish_block, ht=None):
    """The exact operations of one iteration, elementwise (arrays of equal length)."""
    t = T + hs
    if publish_block:
        d = Ep - t
        pw = np.where(d > 0, d + wake, 0.0)
        t = np.where(d > 0, t + pw, t)
    else:
        pw = _ZEROS[: len(T)] if len(T) <= len(_ZEROS) else np.zeros(len(T))
    t = t + hl
    S = np.maximum(t, Ep)  # INV-6: a forward starts after the previous one ends
    E = S + c
    if ht is not None:
        t = t + ht
    d = Ep - t
    rw = np.where(d > 0, d + wake, 0.0)
    t = np.where(d > 0, t + rw, t)
    return t + hp, S, E, pw, rw


def scalar_times(T0, E0, hs, hl, hp, c, wake, publish_block, ht=None) -> Timeline:
    """Reference: the same chain one iteration at a time (Python floats)."""
    k = len(c)
    T, S, E, pw, rw = np.zeros(k + 1), np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k)
    t, ep = float(T0), float(E0)
    T[0] = t
    for j in range(k):
        t = t + float(hs[j])
        if publish_block and ep - t > 0:
            pw[j] = (ep - t) + wake
            t = t + pw[j]
        t = t + float(hl[j])
        s = max(t, ep)
        e = s + float(c[j])
        if ht is not None:
            t = t + float(ht[j])
        if ep - t > 0:
            rw[j] = (ep - t) + wake
            t = t + rw[j]
        t = t + float(hp[j])
        S[j], E[j], T[j + 1], ep = s, e, t, e
    return Timeline(T, S, E, pw, rw)


def _interleave(first: float, *cols: np.ndarray) -> np.ndarray:
    """Sequential partial sums of first, cols[0][0], cols[1][0], ..., cols[0][1], ...
    shape (k, len(cols)): row j holds the sums after each column's term of iteration j."""
    k = len(cols[0])
    terms = np.empty(1 + k * len(cols))
    terms[0] = first
    for i, col in enumerate(cols):
        terms[1 + i :: len(cols)] = col
    return np.cumsum(terms)[1:].reshape(k, len(cols))


def _guess(regime: str, T0, E0, hs, hl, hp, c, wake, publish_block, ht=None):
    """(T guess (k + 1,), E guess (k,)) for one regime.

    gpu: the GPU never waits for the host, the host waits for each forward;
    host: the host never waits, the GPU waits for each launch.
    """
    k = len(c)
    T = np.empty(k + 1)
    T[0] = T0
    wk = np.full(k, wake) if publish_block else None
    if regime == "gpu":
        if publish_block:
            p = _interleave(E0, wk, hl, c)           # E_j = ((E_{j-1} + wake) + hl) + c
            E = p[:, 2]
            T[1:] = (p[:, 1] if ht is None else p[:, 1] + ht) + hp
        else:
            Ep = np.empty(k + 1)                     # E_j = E_{j-1} + c_j
            Ep[0] = E0
            Ep[1:] = c
            np.cumsum(Ep, out=Ep)
            E = Ep[1:]
            T[1:] = (Ep[:-1] + wake) + hp
    elif ht is None:
        p = _interleave(T0, hs, hl, hp)               # T_{j+1} = ((T_j + hs) + hl) + hp
        T[1:] = p[:, 2]
        E = p[:, 1] + c
    else:
        p = _interleave(T0, hs, hl, ht, hp)           # T_{j+1} = (((T_j + hs) + hl) + ht) + hp
        T[1:] = p[:, 3]
        E = p[:, 1] + c
    return T, E


def run_times(T0: float, E0: float, hs: np.ndarray, hl: np.ndarray, hp: np.ndarray, c: np.ndarray,
              wake: float, publish_block: bool, max_passes: int = 64, ht: np.ndarray | None = None) -> Timeline:
    """Exact times of ``len(c)`` iterations (see the module docstring).

    Args:
        T0: host time (s) at the top of the first iteration.
        E0: end (s) of the forward in flight (and the GPU's last launch).
        hs, hl, hp: host seconds of schedule / launch / process per iteration, shape (k,).
        c: GPU seconds of each iteration's forward, shape (k,).
        wake: host wake-up seconds after a block that really waited.
        publish_block: speculative decoding with the ``host_block`` sync mode.
        max_passes: guess-and-check rounds before the rest is done one iteration at a time.
        ht: host seconds of each launch call after its forward is queued (launch tail),
            shape (k,); None: none.
    """
    k = len(c)
    # the usual case: one guess (GPU-bound) holds for the whole run
    Tg, Eg = _guess("gpu", T0, E0, hs, hl, hp, c, wake, publish_block, ht)
    Ep = np.empty(k)
    Ep[0], Ep[1:] = E0, Eg[:-1]
    Tn, Sx, Ex, pwx, rwx = _iterate(Tg[:-1], Ep, hs, hl, hp, c, wake, publish_block, ht)
    if not ((Tn != Tg[1:]).any() or (Ex != Eg).any()):
        return Timeline(Tg, Sx, Ex, pwx, rwx)
    T = np.empty(k + 1)
    S, E, pw, rw = np.empty(k), np.empty(k), np.empty(k), np.empty(k)
    T[0] = T0
    p, e_prev = 0, float(E0)
    regime = "gpu"
    passes = 0
    while p < k:
        passes += 1
        if passes > max_passes:
            tail = scalar_times(T[p], e_prev, hs[p:], hl[p:], hp[p:], c[p:], wake, publish_block,
                                None if ht is None else ht[p:])
            T[p:], S[p:], E[p:], pw[p:], rw[p:] = tail.T, tail.S, tail.E, tail.pw, tail.rw
            break
        sl = slice(p, k)
        hts = None if ht is None else ht[sl]
        Tg, Eg = _guess(regime, T[p], e_prev, hs[sl], hl[sl], hp[sl], c[sl], wake, publish_block, hts)
        Ep = np.empty(k - p)
        Ep[0], Ep[1:] = e_prev, Eg[:-1]
        Tn, Sx, Ex, pwx, rwx = _iterate(Tg[:-1], Ep, hs[sl], hl[sl], hp[sl], c[sl], wake, publish_block, hts)
        bad = np.flatnonzero((Tn != Tg[1:]) | (Ex != Eg))
        n = int(bad[0]) + 1 if bad.size else k - p   # iterations known exactly
        T[p + 1 : p + n + 1] = Tn[:n]
        S[p : p + n], E[p : p + n], pw[p : p + n], rw[p : p + n] = Sx[:n], Ex[:n], pwx[:n], rwx[:n]
        if bad.size and bad[0] == 0:
            regime = "host" if regime == "gpu" else "gpu"
        p += n
        e_prev = float(E[p - 1])
    return Timeline(T, S, E, pw, rw)
