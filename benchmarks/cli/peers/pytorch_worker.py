"""PyTorch side of mhsa-bench's `pytorch` peer (benchmarks/peers/pytorch.ts).

Runs in its own Python process and answers one JSON request per line on stdin
with one JSON line on stdout, carrying the request's "seq" back:

  {"op": "hello"}                      -> {"ok": true, "torch": ..., "python": ..., "blas": ..., "sdpa": ...}
  {"op": "prepare", "id", "problem", "threads", "inputs": {name: path}, "out": path, "size", "variant"?}
                                       -> {"ok": true, "rss", "maxrss"}
  {"op": "run", "id"}                  -> {"ok": true, "ms": <the call's time>, "rss", "maxrss"}
  {"op": "dispose", "id"}              -> {"ok": true}

Anything that fails answers {"error": "<one line>"}. Only replies go to the
real stdout: fd 1 is pointed at stderr, so a library's print cannot pass for
a reply. Inputs arrive as raw float32 files in native byte order, written by
the Node side (which deletes them once prepared); each run fills the
memory-mapped file `out` (`size` floats) with NaN, times one call with
perf_counter (so the pipe's round trip is not counted), then copies the
result there, untimed, for Node to verify. `rss` and `maxrss` are this process's resident set and its high-water
mark in bytes, for the benchmark's RSS column.
"""
import ctypes
import json
import math
import os
import platform
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_interop_threads(1)


def _openblas():
    """The OpenBLAS that Debian's torch calls (libblas.so.3 of an openblas-* alternative) and its path, or (None, None).

    Only Debian's alternative directories are looked in: a numpy wheel carries
    an OpenBLAS of its own (with suffixed symbols) that torch does not use.
    """
    try:
        with open('/proc/self/maps') as maps:
            paths = [line.split()[-1] for line in maps]
        path = next((p for p in paths if '/openblas-' in p and 'libopenblas' in p), None)
        lib = ctypes.CDLL(path) if path else None
        return (lib, path) if lib is not None and hasattr(lib, 'openblas_set_num_threads') else (None, None)
    except OSError:
        return None, None


OPENBLAS, OPENBLAS_PATH = _openblas()


def set_threads(n):
    torch.set_num_threads(n)
    if OPENBLAS is not None:
        OPENBLAS.openblas_set_num_threads(n)


# Scaled dot-product attention as a PyTorch user calls it: the public op of
# PyTorch 2.x (fused on CPU in later releases), its private forerunner in 1.13
# (the math path), else the textbook expression. Causal is bottom-right aligned,
# as the workloads define it; `is_causal` is top-left, so it serves only
# square problems and the others get an explicit mask (True = attend).
def causal_mask(nq, nkv):
    return torch.ones(nq, nkv, dtype=torch.bool).tril(nkv - nq)


if hasattr(F, 'scaled_dot_product_attention'):
    SDPA_NAME = 'F.scaled_dot_product_attention'

    def sdpa(q, k, v, mask, causal):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
elif hasattr(F, '_scaled_dot_product_attention'):
    SDPA_NAME = 'F._scaled_dot_product_attention'

    def sdpa(q, k, v, mask, causal):
        return F._scaled_dot_product_attention(q, k, v, mask, 0.0, False, causal)[0]
else:
    SDPA_NAME = 'softmax(q @ k^T / sqrt(d)) @ v'

    def sdpa(q, k, v, mask, causal):
        s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if causal:
            mask = causal_mask(s.shape[-2], s.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask, float('-inf'))
        return torch.matmul(torch.softmax(s, -1), v)


def window_mask(nq, nkv, left, causal):
    # Query i sits at key position i + nkv - nq and sees keys back to left before it.
    pos = torch.arange(nq).unsqueeze(1) + (nkv - nq)
    j = torch.arange(nkv).unsqueeze(0)
    allowed = j >= pos - left
    return allowed & (j <= pos) if causal else allowed


def generation_attention(q, k, v, mask, softcap):
    # What SDPA has no argument for (a softcap), written out as a model's own
    # attention does (Gemma 2's); grouped kv heads repeated to the query heads.
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    if softcap is None:
        return sdpa(q, k, v, mask, False)
    s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    s = torch.tanh(s / softcap) * softcap
    if mask is not None:
        s = s.masked_fill(~mask, float('-inf'))
    return torch.matmul(torch.softmax(s, -1), v)


class SeedAttention(torch.nn.Module):
    """Seed 004's ViT attention module: vit-pytorch's Attention at inference
    (no dropout), with SDPA in place of its explicit matmul, softmax, matmul."""

    def __init__(self, dim, heads, dim_head):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.norm = torch.nn.LayerNorm(dim)
        self.to_qkv = torch.nn.Linear(dim, inner * 3, bias=False)
        self.to_out = torch.nn.Linear(inner, dim)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.to_qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, n, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        o = sdpa(q, k, v, None, False)
        return self.to_out(o.transpose(1, 2).reshape(b, n, -1))


class LayerNormMha(torch.nn.Module):
    """The same block through nn.MultiheadAttention (after the LayerNorm), whose
    inference fast path (torch._native_multi_head_attention, PyTorch 1.12 on)
    runs the in-projection, attention and out-projection as one native op.
    It needs inner = dim, a bias on the in-projection (zeros here: the block
    has none) and the same tensor as query, key and value."""

    def __init__(self, dim, heads):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.mha = torch.nn.MultiheadAttention(dim, heads, bias=True, batch_first=True)

    def forward(self, x):
        h = self.norm(x)
        return self.mha(h, h, h, need_weights=False)[0]


class DecoderLayer(torch.nn.Module):
    """LLaMA's attention layer as Hugging Face transformers runs a decode step
    with its default DynamicCache: RMSNorm, the q/k/v projections (one fused
    Linear here), rotate-half RoPE, torch.cat of the step's k and v onto the
    cache, attention with the kv heads repeated to the query heads (its
    repeat_kv), o_proj."""

    def __init__(self, dim, heads, kv_heads, dim_head, theta, position):
        super().__init__()
        self.shape = (heads, kv_heads, dim_head)
        self.norm_weight = torch.nn.Parameter(torch.ones(dim))
        self.qkv = torch.nn.Linear(dim, (heads + 2 * kv_heads) * dim_head, bias=False)
        self.o = torch.nn.Linear(heads * dim_head, dim, bias=False)
        inv_freq = theta ** (-torch.arange(0, dim_head, 2, dtype=torch.float64) / dim_head)
        angles = (position * inv_freq).repeat(2)
        self.cos, self.sin = angles.cos().float(), angles.sin().float()

    def rope(self, t):
        half = t.shape[-1] // 2
        rotated = torch.cat((-t[..., half:], t[..., :half]), -1)
        return t * self.cos + rotated * self.sin

    def forward(self, x, past_k, past_v):
        heads, kv_heads, dim_head = self.shape
        b = x.shape[0]
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.norm_weight
        q, k, v = self.qkv(h).split([heads * dim_head, kv_heads * dim_head, kv_heads * dim_head], -1)
        q = self.rope(q.view(b, 1, heads, dim_head).transpose(1, 2))
        k = self.rope(k.view(b, 1, kv_heads, dim_head).transpose(1, 2))
        v = v.view(b, 1, kv_heads, dim_head).transpose(1, 2)
        k, v = torch.cat((past_k, k), 2), torch.cat((past_v, v), 2)
        o = generation_attention(q, k, v, None, None)
        return self.o(o.transpose(1, 2).reshape(b, 1, -1))


def fast_path_taken(module, x):
    """Whether a call of the module reaches torch._native_multi_head_attention."""
    native = torch._native_multi_head_attention
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return native(*args, **kwargs)

    torch._native_multi_head_attention = counted
    try:
        module(x)
    finally:
        torch._native_multi_head_attention = native
    return bool(calls)


def block_mha(problem, inputs):
    dim, heads, dim_head = problem['dim'], problem['heads'], problem['dimHead']
    if heads * dim_head != dim:
        raise ValueError(f'nn.MultiheadAttention needs heads * dimHead = dim, got {heads} * {dim_head} != {dim}')
    module = LayerNormMha(dim, heads).eval()
    with torch.no_grad():
        module.norm.weight.copy_(load(inputs['gamma'], (dim,)))
        module.norm.bias.copy_(load(inputs['beta'], (dim,)))
        module.mha.in_proj_weight.copy_(load(inputs['wqkv'], (3 * dim, dim)))
        module.mha.in_proj_bias.zero_()
        module.mha.out_proj.weight.copy_(load(inputs['wo'], (dim, dim)))
        module.mha.out_proj.bias.copy_(load(inputs['bo'], (dim,)))
    x = load(inputs['x'], (problem['B'], problem['N'], dim))
    # Checked on one token, so the check's memory peak stays below the RSS baseline's.
    if not fast_path_taken(module, x[:, :1].contiguous()):
        raise ValueError('nn.MultiheadAttention did not take its fast path')
    return lambda: module(x)


def load(path, shape):
    return torch.from_numpy(np.fromfile(path, dtype=np.float32).reshape(shape))


def build(problem, inputs):
    """The timed call for one problem, as a zero-argument function returning the output."""
    kind = problem['kind']
    if kind == 'gemm':
        m, k, n = problem['M'], problem['K'], problem['N']
        a, b, c = load(inputs['a'], (m, k)), load(inputs['b'], (k, n)), torch.empty(m, n)
        return lambda: torch.mm(a, b, out=c)
    if kind == 'softmax':
        x = load(inputs['x'], (problem['rows'], problem['cols']))
        return lambda: torch.softmax(x, -1)
    if kind == 'attention':
        bsz, h, nq, nkv, d = (problem[key] for key in ('B', 'H', 'Nq', 'Nkv', 'd'))
        hkv = problem.get('Hkv', h)
        q = load(inputs['q'], (bsz, h, nq, d))
        k, v = load(inputs['k'], (bsz, hkv, nkv, d)), load(inputs['v'], (bsz, hkv, nkv, d))
        if hkv != h or 'window' in problem or 'softcap' in problem:
            causal = bool(problem['causal'])
            if 'window' in problem:
                mask = window_mask(nq, nkv, problem['window'], causal)
            else:
                mask = causal_mask(nq, nkv) if causal else None
            softcap = problem.get('softcap')
            return lambda: generation_attention(q, k, v, mask, softcap)
        if problem['causal'] and nq != nkv:
            mask = causal_mask(nq, nkv)
            return lambda: sdpa(q, k, v, mask, False)
        causal = bool(problem['causal'])
        return lambda: sdpa(q, k, v, None, causal)
    if kind == 'block':
        dim, heads, dim_head = problem['dim'], problem['heads'], problem['dimHead']
        inner = heads * dim_head
        module = SeedAttention(dim, heads, dim_head).eval()
        with torch.no_grad():
            module.norm.weight.copy_(load(inputs['gamma'], (dim,)))
            module.norm.bias.copy_(load(inputs['beta'], (dim,)))
            module.to_qkv.weight.copy_(load(inputs['wqkv'], (3 * inner, dim)))
            module.to_out.weight.copy_(load(inputs['wo'], (dim, inner)))
            module.to_out.bias.copy_(load(inputs['bo'], (dim,)))
        x = load(inputs['x'], (problem['B'], problem['N'], dim))
        return lambda: module(x)
    if kind == 'decoder':
        bsz, past, dim = problem['B'], problem['past'], problem['dim']
        heads, kv_heads, dim_head = problem['heads'], problem['kvHeads'], problem['dimHead']
        module = DecoderLayer(dim, heads, kv_heads, dim_head, problem['theta'], past).eval()
        with torch.no_grad():
            module.norm_weight.copy_(load(inputs['gamma'], (dim,)))
            module.qkv.weight.copy_(load(inputs['wqkv'], ((heads + 2 * kv_heads) * dim_head, dim)))
            module.o.weight.copy_(load(inputs['wo'], (dim, heads * dim_head)))
        x = load(inputs['x'], (bsz, 1, dim))
        cache_shape = (bsz, kv_heads, past, dim_head)
        past_k, past_v = load(inputs['pastK'], cache_shape), load(inputs['pastV'], cache_shape)
        return lambda: module(x, past_k, past_v)
    raise ValueError(f'unknown problem kind {kind!r}')


prepared = {}
PAGE = os.sysconf('SC_PAGE_SIZE')


def memory():
    with open('/proc/self/statm') as statm:
        rss = int(statm.read().split()[1]) * PAGE
    return {'rss': rss, 'maxrss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def handle(req):
    op = req['op']
    if op == 'hello':
        return {
            'ok': True,
            'torch': torch.__version__,
            'python': platform.python_version(),
            'blas': ('OpenBLAS, ' + ('OpenMP' if 'openmp' in OPENBLAS_PATH else 'pthreads') + ' build')
            if OPENBLAS is not None else ('MKL' if torch.backends.mkl.is_available() else 'not OpenBLAS or MKL'),
            'sdpa': SDPA_NAME,
        }
    if op == 'prepare':
        set_threads(req['threads'])
        variant = req.get('variant')
        with torch.inference_mode():
            if variant == 'mha' and req['problem']['kind'] == 'block':
                fn = block_mha(req['problem'], req['inputs'])
            elif variant is None:
                fn = build(req['problem'], req['inputs'])
            else:
                raise ValueError(f'no variant {variant!r} for a {req["problem"]["kind"]} problem')
        out = np.memmap(req['out'], dtype=np.float32, mode='w+', shape=(req['size'],))
        out[:] = np.nan  # resident now, so the RSS growth of the runs is PyTorch's alone
        prepared[req['id']] = (fn, out, req['threads'])
        return {'ok': True, **memory()}
    if op == 'run':
        fn, out, threads = prepared[req['id']]
        if torch.get_num_threads() != threads:
            set_threads(threads)
        out[:] = np.nan
        with torch.inference_mode():
            t0 = time.perf_counter()
            y = fn()
            ms = (time.perf_counter() - t0) * 1e3
            out[:] = y.reshape(-1).numpy()
        return {'ok': True, 'ms': ms, **memory()}
    if op == 'dispose':
        prepared.pop(req['id'], None)
        return {'ok': True}
    raise ValueError(f'unknown op {op!r}')


def main():
    replies = os.fdopen(os.dup(1), 'w')
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        seq = None
        try:
            req = json.loads(line)
            seq = req.get('seq')
            reply = handle(req)
        except Exception as e:  # reported to the Node side, which shows it as the row's error
            reply = {'error': f'{type(e).__name__}: {e}'.splitlines()[0]}
        replies.write(json.dumps({**reply, 'seq': seq}) + '\n')
        replies.flush()


if __name__ == '__main__':
    main()
