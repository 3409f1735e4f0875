/**
 * MultiHeadSelfAttention in float64, composed from the reference kernels
 * (shared by the fuzz and concurrency tests): optional LayerNorm, the q, k, v
 * rows of the fused weight, attention over heads, optional output projection,
 * and the attention weights averaged over heads.
 */
import { absValues, refAttention, refLayerNorm, refMatmul, refMatmulMagnitude } from '../helpers/reference';

export interface RefBlockParams {
  dim: number;
  heads: number;
  dimHead: number;
  /** [3·heads·dimHead, dim] */
  qkvWeight: Float32Array;
  qkvBias?: Float32Array;
  /** [dim, heads·dimHead]; absent for the identity case. */
  outWeight?: Float32Array;
  outBias?: Float32Array;
  normWeight?: Float32Array;
  normBias?: Float32Array;
  eps?: number;
}

export interface RefBlockOptions {
  causal?: boolean;
  mask?: ArrayLike<number>;
  maskShape?: readonly number[];
  keyPaddingMask?: ArrayLike<number>;
}

/**
 * The block on x [batch, tokens, dim]: output [batch, tokens, dim] and weights [batch, tokens, tokens].
 * outputMagnitude is the output projection on absolute values, |attention|·|outWeight|ᵀ + |outBias|
 * (|attention| without one): the size of the terms each output element sums, the scale of its
 * rounding error when they cancel (see dotProductScale in helpers/random.ts).
 */
export function refBlock(
  x: ArrayLike<number>,
  batch: number,
  tokens: number,
  p: RefBlockParams,
  o: RefBlockOptions = {},
): { output: Float64Array; weights: Float64Array; outputMagnitude: Float64Array } {
  const inner = p.heads * p.dimHead;
  const rows3 = (width: number) => [batch, tokens, width];
  const y = p.normWeight ? refLayerNorm(x, rows3(p.dim), p.normWeight, p.normBias, p.eps ?? 1e-5) : x;
  const project = (part: number) =>
    refMatmul(y, rows3(p.dim), p.qkvWeight.subarray(part * inner * p.dim, (part + 1) * inner * p.dim), [inner, p.dim], {
      transposeB: true,
      ...(p.qkvBias ? { c: p.qkvBias.subarray(part * inner, (part + 1) * inner), cShape: [inner] } : {}),
    }).data;
  const attn = refAttention(project(0), rows3(inner), project(1), rows3(inner), project(2), rows3(inner), {
    heads: p.heads,
    causal: o.causal,
    mask: o.mask,
    maskShape: o.maskShape,
    keyPaddingMask: o.keyPaddingMask,
  });
  const output = p.outWeight
    ? refMatmul(attn.output.data, rows3(inner), p.outWeight, [p.dim, inner], {
        transposeB: true,
        ...(p.outBias ? { c: p.outBias, cShape: [p.dim] } : {}),
      }).data
    : attn.output.data;
  const outputMagnitude = p.outWeight
    ? refMatmulMagnitude(attn.output.data, rows3(inner), p.outWeight, [p.dim, inner], {
        transposeB: true,
        ...(p.outBias ? { c: p.outBias, cShape: [p.dim] } : {}),
      }).data
    : absValues(attn.output.data);
  const perBatch = tokens * tokens;
  const weights = new Float64Array(batch * perBatch);
  attn.weights.data.forEach((w, i) => {
    const b = Math.floor(i / (p.heads * perBatch));
    weights[b * perBatch + (i % perBatch)] += w / p.heads;
  });
  return { output, weights, outputMagnitude };
}
