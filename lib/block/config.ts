/**
 * A MultiHeadSelfAttention's config, checked, and turned into what its forward
 * passes use: the dims, the projection weights packed once, the biases and the
 * LayerNorm's parameters by reference.
 */
import { formatShape, rangeError } from '../errors';
import { LAYER_NORM_MATMUL_MAX_K, type RowLayerNorm } from '../matmul';
import { widenBf16 } from '../bf16';
import { prepack, type PackedMatrix } from '../prepack';
import { checkBf16Tensor, checkExactShape, checkTensor, isBf16Tensor, type Bf16Tensor, type CheckedTensor, type Tensor } from '../tensor';
import { checkEps, checkObject, optBoolean, optEnum, optFiniteNumber, optNonNegativeInteger, optPositiveInteger, positiveInteger } from '../validate';
import { checkFloat32Array } from '../tensor';

/** The class name, which every message of the block starts with. */
export const CLASS = 'MultiHeadSelfAttention';

const CONFIG_KEYS = ['dim', 'heads', 'dimHead', 'weights', 'norm', 'eps', 'kvHeads', 'rope', 'softcap', 'window', 'sinks', 'dtype'] as const;
const WEIGHT_KEYS = ['qkvWeight', 'qkvBias', 'outWeight', 'outBias'] as const;
const NORM_KEYS = ['type', 'weight', 'bias'] as const;
const ROPE_KEYS = ['theta', 'rotaryDim', 'interleaved'] as const;

/** What the decoder path adds to a block: grouped heads, RoPE, RMSNorm, attention's generation options. */
export interface DecoderSettings {
  rope?: { theta?: number; rotaryDim?: number; interleaved?: boolean };
  softcap?: number;
  window?: { left?: number; right?: number };
  sinks?: Float32Array;
}

/** A block's dims and weights, as its forward passes use them. */
export interface BlockWeights {
  dim: number;
  heads: number;
  dimHead: number;
  /** heads · dimHead: the width of q (and of k and v without grouped heads). */
  innerDim: number;
  /** Key/value heads, and kvHeads · dimHead: the width of k and of v. */
  kvHeads: number;
  kvInner: number;
  /** 'layer' (LayerNorm) or 'rms' (RMSNorm), when hasNorm. */
  normType: 'layer' | 'rms';
  /**
   * Whether forward takes the decoder path (lib/block/decoder.ts): grouped
   * heads, RoPE, RMSNorm or an attention option of a decoder. It always does with a cache.
   */
  decoder: boolean;
  decoderSettings: DecoderSettings;
  /** The input norm's epsilon, LayerNorm's or RMSNorm's (used only when hasNorm). */
  eps: number;
  /** Whether the input is normalized first (normType says how). */
  hasNorm: boolean;
  /** False only for seed 004's identity case (heads = 1, dimHead = dim, no outWeight). */
  projectOut: boolean;
  /** The fused QKV bias [3·inner], when given. */
  bqkv?: Tensor;
  bo?: Tensor;
  normWeight?: Tensor;
  normBias?: Tensor;
  /**
   * The projection weights packed once for the GEMM (x·Wᵀ needs no transpose per
   * call). Q, K and V stay one [dim → 3·inner] product: one pass over x and one
   * GEMM wide enough to keep both cores busy, and attention reads q, k and v
   * straight out of its [batch, tokens, 3·inner] result.
   */
  packedQkv: PackedMatrix;
  packedOut?: PackedMatrix;
  /**
   * The LayerNorm, when the QKV projection applies it to x's rows as it packs
   * them (dim up to LAYER_NORM_MATMUL_MAX_K): the normalized input is then
   * never written out, and the workspace has no room for it.
   */
  fusedNorm?: RowLayerNorm;
  /** [1, heads] of 1s: the head average is one matmul with it (alpha = 1/heads). */
  onesHeads: Tensor;
  /** Every weight buffer, for the `out` aliasing check. */
  weightViews: ReadonlyArray<readonly [string, Float32Array]>;
  /** The caller's arrays the block reads in place: the biases and the LayerNorm's (the projection weights were copied when packed). */
  inPlaceWeights: ReadonlyArray<readonly [string, Float32Array]>;
}

/** A tensor argument with an exact shape. */
function shapedTensor(fn: string, arg: string, value: unknown, shape: readonly number[], what: string): CheckedTensor {
  const t = checkTensor(fn, arg, value);
  checkExactShape(fn, arg, t.shape, shape, what);
  return t;
}

/** A projection weight with an exact shape: float32, or a bf16 tensor kept from a checkpoint. */
function shapedWeight(fn: string, arg: string, value: unknown, shape: readonly number[], what: string): CheckedTensor | Bf16Tensor {
  if (!isBf16Tensor(value)) return shapedTensor(fn, arg, value, shape, what);
  const t = checkBf16Tensor(fn, arg, value);
  checkExactShape(fn, arg, t.shape, shape, what);
  return t;
}

/**
 * Checks a config (see MultiHeadSelfAttentionConfig) and packs its projection
 * weights. TypeError for a wrong kind of argument, RangeError for a missing or
 * mis-shaped weight or an invalid dim, naming it.
 */
export function checkConfig(fn: string, config: unknown): BlockWeights {
  const c = checkObject(fn, 'config', config, CONFIG_KEYS);
  const dim = positiveInteger(fn, 'config.dim', c.dim);
  const heads = positiveInteger(fn, 'config.heads', c.heads);
  let dimHead: number;
  if (c.dimHead === undefined) {
    if (dim % heads !== 0) {
      throw rangeError(fn, `config.dimHead is required when config.heads = ${heads} does not divide config.dim = ${dim}`);
    }
    dimHead = dim / heads;
  } else {
    dimHead = positiveInteger(fn, 'config.dimHead', c.dimHead);
  }
  const inner = heads * dimHead;
  const kvHeads = optPositiveInteger(fn, 'config.kvHeads', c.kvHeads) ?? heads;
  if (heads % kvHeads !== 0) throw rangeError(fn, `config.heads = ${heads} must be a multiple of config.kvHeads, received ${kvHeads}`);
  const kvInner = kvHeads * dimHead;
  const rows = inner + 2 * kvInner;
  const grouped = kvHeads !== heads;
  const rowsWhat = grouped ? '[(heads + 2·kvHeads)·dimHead, dim]' : '[3·heads·dimHead, dim]';

  let normType: 'layer' | 'rms' = 'layer';
  if (c.norm !== undefined) {
    const n = checkObject(fn, 'config.norm', c.norm, NORM_KEYS);
    normType = optEnum(fn, 'config.norm.type', n.type, ['layer', 'rms'] as const) ?? 'layer';
    if (normType === 'rms' && n.bias !== undefined) throw rangeError(fn, "config.norm.bias is not used by type 'rms' (RMSNorm has none), received a bias");
  }
  const eps = c.eps === undefined && normType === 'rms' ? 1e-6 : checkEps(fn, 'config.eps', c.eps);
  const weightViews: Array<[string, Float32Array]> = [];
  const decoderSettings: DecoderSettings = {};
  if (c.rope !== undefined) {
    const r = checkObject(fn, 'config.rope', c.rope, ROPE_KEYS);
    decoderSettings.rope = {
      theta: optFiniteNumber(fn, 'config.rope.theta', r.theta),
      rotaryDim: optPositiveInteger(fn, 'config.rope.rotaryDim', r.rotaryDim),
      interleaved: optBoolean(fn, 'config.rope.interleaved', r.interleaved, false),
    };
    const { theta, rotaryDim } = decoderSettings.rope;
    if (theta !== undefined && !(theta > 0)) throw rangeError(fn, `config.rope.theta must be above 0, received ${theta}`);
    if ((rotaryDim ?? dimHead) % 2 !== 0 || (rotaryDim ?? dimHead) > dimHead) {
      const given = rotaryDim === undefined ? `none (so dimHead = ${dimHead})` : String(rotaryDim);
      throw rangeError(fn, `config.rope.rotaryDim must be even and at most dimHead = ${dimHead}, received ${given}`);
    }
  }
  if (c.softcap !== undefined) decoderSettings.softcap = optFiniteNumber(fn, 'config.softcap', c.softcap);
  if (c.window !== undefined) {
    const wn = checkObject(fn, 'config.window', c.window, ['left', 'right']);
    decoderSettings.window = {
      left: optNonNegativeInteger(fn, 'config.window.left', wn.left),
      right: optNonNegativeInteger(fn, 'config.window.right', wn.right),
    };
  }
  if (c.sinks !== undefined) {
    const sinks = checkFloat32Array(fn, 'config.sinks', c.sinks);
    if (sinks.length !== heads) throw rangeError(fn, `config.sinks must hold one logit per head (${heads}), received ${sinks.length}`);
    decoderSettings.sinks = sinks;
    weightViews.push(['config.sinks', sinks]);
  }
  const decoder = grouped || normType === 'rms' || Object.keys(decoderSettings).length > 0;

  const w = checkObject(fn, 'config.weights', c.weights, WEIGHT_KEYS);
  if (w.qkvWeight === undefined) {
    throw rangeError(fn, `config.weights.qkvWeight (${grouped ? rowsWhat : '[3·inner, dim]'}) is required, received undefined`);
  }
  const qkv = shapedWeight(fn, 'config.weights.qkvWeight', w.qkvWeight, [rows, dim], rowsWhat);
  if (!isBf16Tensor(qkv)) weightViews.push(['the weight config.weights.qkvWeight', qkv.data as Float32Array]);
  let bqkv: Tensor | undefined;
  if (w.qkvBias !== undefined) {
    const b = shapedTensor(fn, 'config.weights.qkvBias', w.qkvBias, [rows], grouped ? '[(heads + 2·kvHeads)·dimHead]' : '[3·heads·dimHead]');
    bqkv = { data: b.data, shape: b.shape };
    weightViews.push(['the weight config.weights.qkvBias', b.data]);
  }

  const identity = heads === 1 && dimHead === dim;
  let wo: Tensor | Bf16Tensor | undefined;
  if (w.outWeight !== undefined) {
    wo = shapedWeight(fn, 'config.weights.outWeight', w.outWeight, [dim, inner], '[dim, heads·dimHead]');
    if (!isBf16Tensor(wo)) weightViews.push(['the weight config.weights.outWeight', wo.data as Float32Array]);
  } else if (!identity) {
    throw rangeError(
      fn,
      `config.weights.outWeight ([dim, heads·dimHead] = ${formatShape([dim, inner])}) is required ` +
        `unless heads = 1 and dimHead = dim, received undefined`,
    );
  }
  let bo: Tensor | undefined;
  if (w.outBias !== undefined) {
    if (!wo) throw rangeError(fn, 'config.weights.outBias needs config.weights.outWeight, received outBias without outWeight');
    const t = shapedTensor(fn, 'config.weights.outBias', w.outBias, [dim], '[dim]');
    bo = { data: t.data, shape: t.shape };
    weightViews.push(['the weight config.weights.outBias', t.data]);
  }
  const dtype = optEnum(fn, 'config.dtype', c.dtype, ['float32', 'bf16', 'int8'] as const) ?? (isBf16Tensor(qkv) || isBf16Tensor(wo) ? 'bf16' : 'float32');
  for (const [name, t] of [['qkvWeight', qkv], ['outWeight', wo]] as const) {
    if (dtype === 'float32' && isBf16Tensor(t)) {
      throw rangeError(fn, `config.weights.${name} is a bf16 tensor, which packs only with config.dtype 'bf16', received dtype 'float32'`);
    }
  }
  // int8 quantizes from float32: a kept bf16 weight is widened first.
  const packed = (t: Tensor | Bf16Tensor) =>
    dtype === 'int8' ? prepack(isBf16Tensor(t) ? widenBf16(t) : t, { transpose: true, dtype }) : prepack(t, { transpose: true, dtype });
  const packedQkv = packed(qkv);
  const packedOut = wo ? packed(wo) : undefined;

  let normWeight: Tensor | undefined;
  let normBias: Tensor | undefined;
  if (c.norm !== undefined) {
    const n = c.norm as Record<string, unknown>;
    if (n.weight === undefined) throw rangeError(fn, 'config.norm.weight ([dim]) is required with config.norm, received undefined');
    const nw = shapedTensor(fn, 'config.norm.weight', n.weight, [dim], '[dim]');
    normWeight = { data: nw.data, shape: nw.shape };
    weightViews.push(['the weight config.norm.weight', nw.data]);
    if (n.bias !== undefined) {
      const nb = shapedTensor(fn, 'config.norm.bias', n.bias, [dim], '[dim]');
      normBias = { data: nb.data, shape: nb.shape };
      weightViews.push(['the weight config.norm.bias', nb.data]);
    }
  }
  const hasNorm = normWeight !== undefined;
  // The LayerNorm fuses into the QKV product's packing of A, which int8 quantizes instead.
  const fusedNorm =
    hasNorm && normType === 'layer' && dim <= LAYER_NORM_MATMUL_MAX_K && dtype !== 'int8'
      ? { weight: normWeight, bias: normBias, eps }
      : undefined;
  const inPlace: Array<[string, Float32Array | undefined]> = [
    ['config.weights.qkvBias', bqkv?.data],
    ['config.weights.outBias', bo?.data],
    ['config.norm.weight', normWeight?.data],
    ['config.norm.bias', normBias?.data],
    ['config.sinks', decoderSettings.sinks],
  ];
  return {
    dim,
    heads,
    dimHead,
    innerDim: inner,
    kvHeads,
    kvInner,
    normType,
    decoder,
    decoderSettings,
    eps,
    hasNorm,
    projectOut: wo !== undefined,
    bqkv,
    bo,
    normWeight,
    normBias,
    packedQkv,
    packedOut,
    fusedNorm,
    onesHeads: { data: new Float32Array(heads).fill(1), shape: [1, heads] },
    weightViews,
    inPlaceWeights: inPlace.filter((e): e is [string, Float32Array] => e[1] !== undefined),
  };
}
