"""Independent float64 references the package tests compare against, and their inputs."""

import math

import torch


def attention_float64(q, k, v, mask=None, scale=None):
    """softmax(q k^T * scale + mask) v in float64, written independently; zeros for empty rows."""
    q, k, v = q.double(), k.double(), v.double()
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.einsum("...id,...jd->...ij", q, k) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask.double()
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    weights = weights / weights.sum(-1, keepdim=True)
    weights = torch.nan_to_num(weights, nan=0.0)  # rows with every key masked
    return torch.einsum("...ij,...jd->...id", weights, v), weights


def qkv(shape_q, shape_k, d_v, dtype=torch.float32, seed=0):
    """Seeded random query (shape_q), key (shape_k) and value (shape_k[:-1] + (d_v,)) in dtype.

    Drawn in float64 and rounded, so that every dtype gets the same numbers."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(shape_q, generator=g, dtype=torch.float64)
    k = torch.randn(shape_k, generator=g, dtype=torch.float64)
    v = torch.randn(shape_k[:-1] + (d_v,), generator=g, dtype=torch.float64)
    return q.to(dtype), k.to(dtype), v.to(dtype)
