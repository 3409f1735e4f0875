/**
 * The multi-head self-attention block of seed 004 (the ViT attention module),
 * composed from the native ops: optional pre-LayerNorm → QKV projection →
 * attention over heads → output projection, run as one native.sequence call.
 * No math on tensor data runs in JS.
 */
import { types } from 'node:util';
import { attentionOnFusedQkvStage, type AttentionOptions, type AttentionWithWeights } from './attention';
import { broadcastsTo } from './broadcast';
import { formatShape, rangeError, typeError } from './errors';
import { layerNormStage } from './layernorm';
import { allocateFloats, checkAllocation, fitsAllocationLimit } from './memory';
import { LAYER_NORM_MATMUL_MAX_K, layerNormMatmulStage, matmulStage, type RowLayerNorm } from './matmul';
import { native, sequenceArgs, type NativeCallback, type NativeStage } from './native';
import { runAsync, type NamedBuffer } from './queue';
import { prepack, type PackedMatrix } from './prepack';
import { checkOptions, isRecordLike, optBoolean } from './options';
import {
  checkNoAlias,
  checkShape,
  checkTensor,
  isDetached,
  isResizable,
  resultTensor,
  type CheckedTensor,
  type ResultTensor,
  type Tensor,
  type TensorLike,
} from './tensor';

/** Weights of a {@link MultiHeadSelfAttention}, in PyTorch's `nn.Linear` layout [out, in]. */
export interface MultiHeadSelfAttentionWeights {
  /** The fused Q, K, V projection [3·inner, dim]: rows [0, inner) make q, then k, then v. */
  qkvWeight: TensorLike;
  /** Its bias [3·inner]. Default none. */
  qkvBias?: TensorLike;
  /** The output projection [dim, inner]. Required unless heads = 1 and dimHead = dim. */
  outWeight?: TensorLike;
  /** Its bias [dim]; needs outWeight. Default none. */
  outBias?: TensorLike;
}

/** Construction parameters of a {@link MultiHeadSelfAttention}. */
export interface MultiHeadSelfAttentionConfig {
  /** Width of the input and output tokens. */
  dim: number;
  /** Number of attention heads. */
  heads: number;
  /** Width of one head. Default dim / heads (which must then divide evenly). inner = heads · dimHead. */
  dimHead?: number;
  /** The projection weights (kept by reference, not copied). */
  weights: MultiHeadSelfAttentionWeights;
  /** A LayerNorm over dim applied to the input first (seed 004's `norm`): weight [dim], optional bias [dim]. */
  norm?: { weight: TensorLike; bias?: TensorLike };
  /** The LayerNorm's epsilon. Default 1e-5. */
  eps?: number;
}

/** Options of {@link MultiHeadSelfAttention.forward} and {@link MultiHeadSelfAttention.forwardAsync}. */
export interface MultiHeadSelfAttentionForwardOptions {
  /** Token i attends only tokens j ≤ i. Default false. */
  causal?: boolean;
  /**
   * Additive float mask broadcastable to [batch, heads, tokens, tokens]; −Infinity blocks a key.
   * A large finite value such as −3.4e38 (`torch.finfo(torch.float32).min`) blocks it too, but
   * a row masked entirely with it gets uniform weights, as in PyTorch (with −Infinity: zeros).
   */
  mask?: TensorLike;
  /**
   * Keys to ignore: a Uint8Array of batch·tokens bytes (or `{ data, shape: [batch, tokens] }`),
   * nonzero = ignore, as PyTorch's `key_padding_mask`.
   */
  keyPaddingMask?: Uint8Array | { data: Uint8Array; shape: readonly number[] };
  /**
   * Also return the attention probabilities averaged over heads,
   * [batch, tokens, tokens] ([tokens, tokens] for a 2-D input), as PyTorch's
   * `need_weights=True, average_attn_weights=True`. Default false.
   */
  returnWeights?: boolean;
  /** Where to write the output (x's shape); must share no memory with x, the weights or the masks. */
  out?: Tensor;
}

/** The result of a forward pass with `returnWeights: true`. */
export interface MultiHeadSelfAttentionWithWeights {
  output: Tensor;
  /** Head-averaged attention probabilities, [batch, tokens, tokens] (or [tokens, tokens]). */
  weights: Tensor;
}

/** Options of {@link MultiHeadSelfAttention.fromTorch}. */
export interface MultiHeadSelfAttentionFromTorchOptions {
  /** Number of heads (a state dict does not record it). */
  heads: number;
  /**
   * Selects one layer's keys in a whole model's state dict, e.g.
   * `'encoder.layers.3.self_attn'`; a `.` is appended unless it ends with one. Default ''.
   */
  prefix?: string;
  /** The LayerNorm's epsilon (when the state dict has `norm.weight`). Default 1e-5. */
  eps?: number;
}

/** A state dict: parameter name → tensor, as `torch.nn.Module.state_dict()` or {@link loadSafetensors} gives (an object or a Map). */
export type StateDict = Readonly<Record<string, TensorLike>> | ReadonlyMap<string, TensorLike>;

/** Scratch buffers of one forward pass, reused across calls. */
interface Workspace {
  rows: number;
  buffer: Float32Array;
  /** The last forward's checked stages over this buffer, for the next call of the same shapes (CachedPlan). */
  plan?: CachedPlan;
}

/** Where a caller's buffer goes in native.sequence's arguments: stages[stage][1 + arg]. */
type Slot = readonly [stage: number, arg: number];

/**
 * A forward pass's checked native arguments, kept by its workspace. Only the
 * caller's buffers differ from one call of the same shapes and options to
 * the next; the rest (the workspace's views, the weights, the descriptors)
 * would be rebuilt and checked again identically. Building them took 50-100 µs
 * of a 5 ms block (RESULTS.md, entry 101).
 */
interface CachedPlan {
  /** Shapes and options it was made for (planKey). */
  key: string;
  /** native.sequence's argument, its descriptors copied out of the shared buffer. */
  stages: unknown[][];
  x: Slot;
  out: Slot;
  mask?: Slot;
  pad?: Slot;
}

interface Prepared {
  x: Tensor;
  rows: number;
  batch: number;
  tokens: number;
  twoD: boolean;
  out: ResultTensor;
  out3: Tensor;
  attnOptions: AttentionOptions;
  returnWeights: boolean;
  /** The caller's buffers by the names its errors use (x, options.out, the masks). */
  callerBuffers: Array<[string, ArrayBufferView]>;
}

const CLASS = 'MultiHeadSelfAttention';
/** Idle workspaces a block keeps: the native side computes at most two async calls at once. */
const MAX_IDLE_WORKSPACES = 2;

const CONFIG_KEYS = ['dim', 'heads', 'dimHead', 'weights', 'norm', 'eps'] as const;
const WEIGHT_KEYS = ['qkvWeight', 'qkvBias', 'outWeight', 'outBias'] as const;
const NORM_KEYS = ['weight', 'bias'] as const;
const FORWARD_KEYS = ['causal', 'mask', 'keyPaddingMask', 'returnWeights', 'out'] as const;
const FROM_TORCH_KEYS = ['heads', 'prefix', 'eps'] as const;

/** Checks that value is a plain object whose defined keys are all known. */
function checkObject(fn: string, arg: string, value: unknown, known: readonly string[]): Record<string, unknown> {
  if (!isRecordLike(value)) throw typeError(fn, arg, 'an object', value);
  for (const key of Object.keys(value)) {
    if ((value as Record<string, unknown>)[key] !== undefined && !known.includes(key)) {
      throw new TypeError(`${fn}: unknown key "${key}" in ${arg}; expected one of ${known.join(', ')}`);
    }
  }
  return value as Record<string, unknown>;
}

/** A required positive integer field. */
function positiveInteger(fn: string, arg: string, value: unknown): number {
  if (typeof value !== 'number') throw typeError(fn, arg, 'a number', value);
  if (!Number.isSafeInteger(value) || value < 1) throw rangeError(fn, `${arg} must be a positive integer, received ${value}`);
  return value;
}

/** A tensor argument with an exact shape. */
function shapedTensor(fn: string, arg: string, value: unknown, shape: readonly number[], what: string): CheckedTensor {
  const t = checkTensor(fn, arg, value);
  if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    throw rangeError(fn, `${arg} must have shape ${what} = ${formatShape(shape)}, received ${formatShape(t.shape)}`);
  }
  return t;
}

/** The LayerNorm epsilon: a finite float32 number ≥ 0, default 1e-5. */
function checkEps(fn: string, arg: string, value: unknown): number {
  if (value === undefined) return 1e-5;
  if (typeof value !== 'number') throw typeError(fn, arg, 'a number', value);
  if (!(value >= 0) || !Number.isFinite(Math.fround(value))) {
    throw rangeError(fn, `${arg} must be a finite number >= 0, received ${value}`);
  }
  return value;
}

/** Prefixes an inner op's error with the block method that called it. */
function rename(e: unknown, fn: string): unknown {
  // Not `instanceof Error`: errors made by the addon belong to Node's main context, which may not be this one.
  const err = e as Error;
  if (typeof e === 'object' && e !== null && typeof err.message === 'string' && !err.message.startsWith(`${fn}: `)) {
    err.message = `${fn}: ${err.message}`;
  }
  return e;
}

/**
 * Multi-head self-attention with its projections, the block of seed 004 (the
 * Vision Transformer's attention module) and of `torch.nn.MultiheadAttention`
 * used as self-attention:
 *
 *     y = LayerNorm(x)                          (optional)
 *     q, k, v = y·Wqᵀ + bq, y·Wkᵀ + bk, y·Wvᵀ + bv   (rows of the fused [3·inner, dim] weight)
 *     o = softmax(q·kᵀ / √dimHead + mask) · v   per head
 *     out = o·Woᵀ + bo                          (none when heads = 1 and dimHead = dim, unless Wo is given)
 *
 * Every step runs natively: the projections are `matmul`s against the
 * weights prepacked once at construction (the fused [3·inner, dim] QKV weight
 * as one matrix, and Wo, each packed transposed for x·Wᵀ; biases are added
 * through matmul's `c`). One GEMM computes q, k and v side by side as
 * [batch, tokens, 3·inner], and attention reads them in place from there
 * (a token stride of 3·inner); the head split and merge are strides too (no
 * permute copies). The LayerNorm is applied to x's rows as the QKV GEMM
 * packs them (for dim up to 1024), so the normalized input is never written
 * out. The scratch buffers (qkv, merged heads; the normalized input when
 * dim > 1024) live in a workspace that is reused across calls, so a call
 * allocates only its output (nothing with `out`). The projection weights are copied
 * when packed; the biases and norm parameters are kept by reference: do not
 * modify them while the block is in use.
 *
 * @example
 * import { MultiHeadSelfAttention, tensor } from 'mhsa';
 * const dim = 64, heads = 4;
 * const block = new MultiHeadSelfAttention({
 *   dim, heads,
 *   weights: {
 *     qkvWeight: tensor(new Float32Array(3 * dim * dim).fill(0.01), [3 * dim, dim]),
 *     outWeight: tensor(new Float32Array(dim * dim).fill(0.01), [dim, dim]),
 *   },
 * });
 * const y = block.forward(tensor(new Float32Array(2 * 10 * dim).fill(1), [2, 10, dim])); // shape [2, 10, 64]
 */
export class MultiHeadSelfAttention {
  /** Width of the input and output tokens. */
  readonly dim: number;
  /** Number of heads. */
  readonly heads: number;
  /** Width of one head. */
  readonly dimHead: number;
  /** heads · dimHead: the width of q, k and v. */
  readonly innerDim: number;
  /** The LayerNorm's epsilon (used only when {@link hasNorm}). */
  readonly eps: number;
  /** True when a LayerNorm is applied to the input first. */
  readonly hasNorm: boolean;
  /** True when the output projection is applied (false only for seed 004's identity case). */
  readonly projectOut: boolean;

  /** The fused QKV bias [3·inner], when given. */
  private readonly bqkv?: Tensor;
  private readonly wo?: Tensor;
  private readonly bo?: Tensor;
  private readonly normWeight?: Tensor;
  private readonly normBias?: Tensor;
  /**
   * The projection weights packed once for the GEMM (x·Wᵀ needs no transpose per
   * call). Q, K and V stay one [dim → 3·inner] product: one pass over x and one
   * GEMM wide enough to keep both cores busy, and attention reads q, k and v
   * straight out of its [batch, tokens, 3·inner] result.
   */
  private readonly packedQkv: PackedMatrix;
  private readonly packedOut?: PackedMatrix;
  /** Every weight buffer, for the `out` aliasing check. */
  private readonly weightViews: Array<[string, Float32Array]> = [];
  /** The caller's arrays the block reads in place: the biases and the LayerNorm's (the projection weights were copied when packed). */
  private readonly inPlaceWeights: ReadonlyArray<readonly [string, Float32Array]>;
  /** [1, heads] of 1s: the head average is one matmul with it (alpha = 1/heads). */
  private readonly onesHeads: Tensor;
  /**
   * The LayerNorm, when the QKV projection applies it to x's rows as it packs
   * them (dim up to LAYER_NORM_MATMUL_MAX_K): the normalized input is then
   * never written out, and the workspace has no room for it.
   */
  private readonly fusedNorm?: RowLayerNorm;
  /** Idle workspaces; a call takes one (or makes one) and gives it back, so concurrent async calls never share. */
  private readonly pool: Workspace[] = [];

  /**
   * Builds the block from weights in PyTorch layout. The projection weights
   * are packed once here into the GEMM's panel layout (see {@link prepack}), so
   * later changes to the weight tensors do not reach the block.
   *
   * @example
   * const dim = 32;
   * const block = new MultiHeadSelfAttention({
   *   dim, heads: 1, dimHead: dim,                 // identity rule: no output projection
   *   weights: { qkvWeight: tensor(new Float32Array(3 * dim * dim), [3 * dim, dim]) },
   *   norm: { weight: tensor(new Float32Array(dim).fill(1), [dim]) },
   * });
   * block.projectOut; // false
   * @throws TypeError for a wrong kind of argument (a non-tensor weight, an unknown key),
   *   RangeError for a missing or mis-shaped weight or an invalid dim, naming it.
   */
  constructor(config: MultiHeadSelfAttentionConfig) {
    const fn = CLASS;
    const c = checkObject(fn, 'config', config, CONFIG_KEYS);
    this.dim = positiveInteger(fn, 'config.dim', c.dim);
    this.heads = positiveInteger(fn, 'config.heads', c.heads);
    if (c.dimHead === undefined) {
      if (this.dim % this.heads !== 0) {
        throw rangeError(fn, `config.dimHead is required when config.heads = ${this.heads} does not divide config.dim = ${this.dim}`);
      }
      this.dimHead = this.dim / this.heads;
    } else {
      this.dimHead = positiveInteger(fn, 'config.dimHead', c.dimHead);
    }
    this.innerDim = this.heads * this.dimHead;
    this.eps = checkEps(fn, 'config.eps', c.eps);

    const dim = this.dim;
    const inner = this.innerDim;
    const w = checkObject(fn, 'config.weights', c.weights, WEIGHT_KEYS);
    if (w.qkvWeight === undefined) throw rangeError(fn, 'config.weights.qkvWeight ([3·inner, dim]) is required, received undefined');
    const qkv = shapedTensor(fn, 'config.weights.qkvWeight', w.qkvWeight, [3 * inner, dim], '[3·heads·dimHead, dim]');
    this.weightViews.push(['the weight config.weights.qkvWeight', qkv.data]);
    if (w.qkvBias !== undefined) {
      const b = shapedTensor(fn, 'config.weights.qkvBias', w.qkvBias, [3 * inner], '[3·heads·dimHead]');
      this.bqkv = { data: b.data, shape: b.shape };
      this.weightViews.push(['the weight config.weights.qkvBias', b.data]);
    }

    const identity = this.heads === 1 && this.dimHead === dim;
    if (w.outWeight !== undefined) {
      const wo = shapedTensor(fn, 'config.weights.outWeight', w.outWeight, [dim, inner], '[dim, heads·dimHead]');
      this.wo = { data: wo.data, shape: wo.shape };
      this.weightViews.push(['the weight config.weights.outWeight', wo.data]);
    } else if (!identity) {
      throw rangeError(
        fn,
        `config.weights.outWeight ([dim, heads·dimHead] = ${formatShape([dim, inner])}) is required ` +
          `unless heads = 1 and dimHead = dim, received undefined`,
      );
    }
    if (w.outBias !== undefined) {
      if (!this.wo) throw rangeError(fn, 'config.weights.outBias needs config.weights.outWeight, received outBias without outWeight');
      const bo = shapedTensor(fn, 'config.weights.outBias', w.outBias, [dim], '[dim]');
      this.bo = { data: bo.data, shape: bo.shape };
      this.weightViews.push(['the weight config.weights.outBias', bo.data]);
    }
    this.projectOut = this.wo !== undefined;
    this.packedQkv = prepack({ data: qkv.data, shape: qkv.shape }, { transpose: true });
    if (this.wo) this.packedOut = prepack(this.wo, { transpose: true });

    if (c.norm !== undefined) {
      const n = checkObject(fn, 'config.norm', c.norm, NORM_KEYS);
      if (n.weight === undefined) throw rangeError(fn, 'config.norm.weight ([dim]) is required with config.norm, received undefined');
      const nw = shapedTensor(fn, 'config.norm.weight', n.weight, [dim], '[dim]');
      this.normWeight = { data: nw.data, shape: nw.shape };
      this.weightViews.push(['the weight config.norm.weight', nw.data]);
      if (n.bias !== undefined) {
        const nb = shapedTensor(fn, 'config.norm.bias', n.bias, [dim], '[dim]');
        this.normBias = { data: nb.data, shape: nb.shape };
        this.weightViews.push(['the weight config.norm.bias', nb.data]);
      }
    }
    this.hasNorm = this.normWeight !== undefined;
    if (this.hasNorm && dim <= LAYER_NORM_MATMUL_MAX_K) {
      this.fusedNorm = { weight: this.normWeight, bias: this.normBias, eps: this.eps };
    }
    this.onesHeads = { data: new Float32Array(this.heads).fill(1), shape: [1, this.heads] };
    const inPlace: Array<[string, Float32Array | undefined]> = [
      ['config.weights.qkvBias', this.bqkv?.data],
      ['config.weights.outBias', this.bo?.data],
      ['config.norm.weight', this.normWeight?.data],
      ['config.norm.bias', this.normBias?.data],
    ];
    this.inPlaceWeights = inPlace.filter((e): e is [string, Float32Array] => e[1] !== undefined);
  }

  /**
   * Builds the block from a PyTorch state dict (an object or a Map of tensors,
   * such as {@link loadSafetensors}`(file).tensors`). Recognized names, after `prefix`:
   *
   * - `torch.nn.MultiheadAttention`: `in_proj_weight`, `in_proj_bias`,
   *   `out_proj.weight`, `out_proj.bias` (or `q_proj_weight`, `k_proj_weight`,
   *   `v_proj_weight` when PyTorch stored them separately).
   * - seed 004's ViT `Attention`: `norm.weight`, `norm.bias`, `to_qkv.weight`
   *   (and `to_qkv.bias` if present), `to_out.0.weight`, `to_out.0.bias`.
   * - Hugging Face separate projections: `query`/`key`/`value` (also under
   *   `self.` or `attention.`, as BERT and ViT name them) or
   *   `q_proj`/`k_proj`/`v_proj`, each with `.weight` and optional `.bias` (a
   *   missing bias, like Whisper's k_proj, counts as zeros); the output as
   *   `out_proj`, `o_proj` or `output.dense`. The three are concatenated once
   *   into the fused weight. Only the attention itself is built: a residual or
   *   a post-LayerNorm such as BERT's `output.LayerNorm` is not applied.
   *
   * Unknown keys are ignored. dim and dimHead are read from the weights'
   * shapes. The F32 tensors are used by reference (not copied).
   *
   * @example
   * import { loadSafetensors, MultiHeadSelfAttention } from 'mhsa';
   * const { tensors } = loadSafetensors('vit.safetensors');
   * const block = MultiHeadSelfAttention.fromTorch(tensors, { heads: 12, prefix: 'transformer.layers.0.0' });
   * const y = block.forward(x); // x: [batch, 197, 768]
   * @throws TypeError for a wrong kind of argument, RangeError for missing, ambiguous or
   *   mis-shaped weights, naming the state-dict key.
   */
  static fromTorch(stateDict: StateDict, options: MultiHeadSelfAttentionFromTorchOptions): MultiHeadSelfAttention {
    const fn = `${CLASS}.fromTorch`;
    if (!types.isMap(stateDict) && !isRecordLike(stateDict)) {
      throw typeError(fn, 'stateDict', 'an object or a Map of tensors', stateDict);
    }
    if (options === undefined) throw rangeError(fn, 'options.heads is required, received no options');
    const opts = checkOptions<MultiHeadSelfAttentionFromTorchOptions>(fn, options, FROM_TORCH_KEYS);
    const heads = positiveInteger(fn, 'options.heads', opts.heads);
    let prefix = '';
    if (opts.prefix !== undefined) {
      if (typeof opts.prefix !== 'string') throw typeError(fn, 'options.prefix', 'a string', opts.prefix);
      prefix = opts.prefix === '' || opts.prefix.endsWith('.') ? opts.prefix : `${opts.prefix}.`;
    }
    const eps = checkEps(fn, 'options.eps', opts.eps);

    const sd: Record<string, unknown> = types.isMap(stateDict) ? Object.fromEntries(stateDict) : (stateDict as Record<string, unknown>);
    const raw = (name: string): unknown =>
      Object.prototype.hasOwnProperty.call(sd, prefix + name) ? sd[prefix + name] : undefined;
    const has = (name: string): boolean => raw(name) !== undefined;
    const get = (name: string): CheckedTensor | undefined => {
      const v = raw(name);
      return v === undefined ? undefined : checkTensor(fn, `stateDict["${prefix + name}"]`, v);
    };
    const key = (name: string) => `stateDict["${prefix + name}"]`;
    const need = (name: string, what: string): CheckedTensor => {
      const t = get(name);
      if (!t) throw rangeError(fn, `${key(name)} (${what}) is missing`);
      return t;
    };
    const expectShape = (name: string, t: CheckedTensor, shape: number[], what: string): void => {
      if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
        throw rangeError(fn, `${key(name)} must have shape ${what} = ${formatShape(shape)}, received ${formatShape(t.shape)}`);
      }
    };
    const matrix = (name: string, t: Tensor): [number, number] => {
      if (t.shape.length !== 2) throw rangeError(fn, `${key(name)} must be a 2-D [out, in] weight, received shape ${formatShape(t.shape)}`);
      if (t.shape[0] === 0 || t.shape[1] === 0) {
        throw rangeError(fn, `${key(name)} must be an [out, in] weight with no zero dim, received shape ${formatShape(t.shape)}`);
      }
      return [t.shape[0], t.shape[1]];
    };

    // Which naming scheme: exactly one must be present under the prefix.
    const HF_TRIPLES = [
      ['query', 'key', 'value'],
      ['self.query', 'self.key', 'self.value'],
      ['attention.query', 'attention.key', 'attention.value'],
      ['q_proj', 'k_proj', 'v_proj'],
    ];
    const found: string[] = [];
    if (has('in_proj_weight') || has('q_proj_weight')) found.push('torch');
    if (has('to_qkv.weight')) found.push('vit');
    const triples = HF_TRIPLES.filter((t) => t.some((n) => has(`${n}.weight`)));
    if (triples.length > 0) found.push('hf');
    const describeScheme = (s: string) =>
      s === 'torch'
        ? `${prefix}${has('in_proj_weight') ? 'in_proj_weight' : 'q_proj_weight'}`
        : s === 'vit'
          ? `${prefix}to_qkv.weight`
          : triples.map((t) => `${prefix}${t[0]}.weight`).join(', ');
    if (found.length === 0 || triples.length > 1) {
      if (triples.length > 1) {
        throw rangeError(fn, `ambiguous state dict: found ${describeScheme('hf')}; choose one with options.prefix`);
      }
      throw rangeError(fn, `no attention weights under prefix ${JSON.stringify(prefix)}: expected in_proj_weight ` +
        `(torch.nn.MultiheadAttention), to_qkv.weight (ViT) or query/key/value.weight, q_proj/k_proj/v_proj.weight ` +
        `(Hugging Face)${suggestPrefixes(Object.keys(sd))}`);
    }
    if (found.length > 1) {
      throw rangeError(fn, `ambiguous state dict: found ${found.map(describeScheme).join(' and ')}; choose one with options.prefix`);
    }
    const scheme = found[0];

    let qkvWeight: Tensor;
    let qkvBias: Tensor | undefined;
    let qkvName: string;
    let outNames: string[];
    let outRequired: boolean;
    let norm: { weight: Tensor; bias?: Tensor } | undefined;

    if (scheme === 'torch' || scheme === 'hf') {
      if (scheme === 'torch') {
        for (const n of ['bias_k', 'bias_v']) {
          if (has(n)) throw rangeError(fn, `${key(n)} is present: add_bias_kv is not supported`);
        }
      }
      let names: string[];
      if (scheme === 'torch' && has('in_proj_weight')) {
        names = [];
        qkvName = 'in_proj_weight';
        qkvWeight = need('in_proj_weight', '[3·embed_dim, embed_dim]');
        const [rows] = matrix(qkvName, qkvWeight);
        if (rows % 3 !== 0) throw rangeError(fn, `${key(qkvName)}.shape[0] must be a multiple of 3 (q, k, v), received ${rows}`);
      } else {
        names = scheme === 'torch' ? ['q_proj_weight', 'k_proj_weight', 'v_proj_weight'] : triples[0].map((n) => `${n}.weight`);
        qkvName = names[0];
        const parts = names.map((n) => need(n, 'a [inner, dim] projection weight'));
        const [inner, dim] = matrix(names[0], parts[0]);
        parts.forEach((t, i) => expectShape(names[i], t, [inner, dim], `${key(names[0])}'s shape`));
        const fused = new Float32Array(3 * inner * dim);
        parts.forEach((t, i) => fused.set(t.data, i * inner * dim));
        qkvWeight = { data: fused, shape: [3 * inner, dim] };
      }
      const inner = qkvWeight.shape[0] / 3;
      if (scheme === 'torch') {
        const b = get('in_proj_bias');
        if (b) {
          expectShape('in_proj_bias', b, [3 * inner], '[3·embed_dim]');
          qkvBias = b;
        }
        outNames = ['out_proj'];
        outRequired = true;
      } else {
        const biasNames = triples[0].map((n) => `${n}.bias`);
        const biases = biasNames.map((n) => get(n));
        if (biases.some((b) => b)) {
          const fused = new Float32Array(3 * inner);
          biases.forEach((b, i) => {
            if (!b) return; // absent: zeros
            expectShape(biasNames[i], b, [inner], '[inner]');
            fused.set(b.data, i * inner);
          });
          qkvBias = { data: fused, shape: [3 * inner] };
        }
        outNames = ['out_proj', 'o_proj', 'output.dense'];
        outRequired = false;
      }
    } else {
      qkvName = 'to_qkv.weight';
      qkvWeight = need(qkvName, '[3·inner, dim]');
      const [rows] = matrix(qkvName, qkvWeight);
      if (rows % 3 !== 0) throw rangeError(fn, `${key(qkvName)}.shape[0] must be a multiple of 3 (q, k, v), received ${rows}`);
      const b = get('to_qkv.bias');
      if (b) {
        expectShape('to_qkv.bias', b, [rows], '[3·inner]');
        qkvBias = b;
      }
      outNames = ['to_out.0'];
      outRequired = false;
      const nw = get('norm.weight');
      const nb = get('norm.bias');
      const dim = qkvWeight.shape[1];
      if (nb && !nw) throw rangeError(fn, `${key('norm.bias')} is present but ${key('norm.weight')} is missing`);
      if (nw) {
        expectShape('norm.weight', nw, [dim], '[dim]');
        if (nb) expectShape('norm.bias', nb, [dim], '[dim]');
        norm = nb ? { weight: nw, bias: nb } : { weight: nw };
      }
    }

    const [rows, dim] = matrix(qkvName, qkvWeight);
    const inner = rows / 3;
    if (inner % heads !== 0) {
      throw rangeError(fn, `options.heads = ${heads} must divide the projection width ${inner} (${key(qkvName)}.shape[0] / 3)`);
    }
    const dimHead = inner / heads;

    const outFound = outNames.filter((n) => has(`${n}.weight`));
    if (outFound.length > 1) {
      throw rangeError(fn, `ambiguous output projection: found ${outFound.map((n) => key(`${n}.weight`)).join(' and ')}`);
    }
    let outWeight: Tensor | undefined;
    let outBias: Tensor | undefined;
    if (outFound.length === 1) {
      const n = outFound[0];
      const ow = need(`${n}.weight`, '[dim, inner]');
      expectShape(`${n}.weight`, ow, [dim, inner], '[dim, inner]');
      outWeight = ow;
      const ob = get(`${n}.bias`);
      if (ob) {
        expectShape(`${n}.bias`, ob, [dim], '[dim]');
        outBias = ob;
      }
    } else {
      const stray = outNames.find((n) => has(`${n}.bias`));
      if (stray) throw rangeError(fn, `${key(`${stray}.bias`)} is present but ${key(`${stray}.weight`)} is missing`);
      if (outRequired || !(heads === 1 && dimHead === dim)) {
        throw rangeError(
          fn,
          `${outNames.map((n) => key(`${n}.weight`)).join(' or ')} (the output projection [dim, inner] = ` +
            `${formatShape([dim, inner])}) is missing`,
        );
      }
    }

    return new MultiHeadSelfAttention({
      dim,
      heads,
      dimHead,
      weights: { qkvWeight, qkvBias, outWeight, outBias },
      norm,
      eps,
    });
  }

  /**
   * Runs the block on x [batch, tokens, dim] (or [tokens, dim]) and returns
   * [batch, tokens, dim] (x's shape), or `{ output, weights }` with
   * `returnWeights: true`. Allocates only the result (nothing but the weights
   * with `out`); the intermediate buffers are a workspace reused across calls.
   *
   * @example
   * const x = tensor(new Float32Array(2 * 10 * block.dim).fill(0.5), [2, 10, block.dim]);
   * const y = block.forward(x);                                  // [2, 10, dim]
   * const { output, weights } = block.forward(x, { causal: true, returnWeights: true });
   * weights.shape;                                                // [2, 10, 10], averaged over heads
   * block.forward(x, { keyPaddingMask: new Uint8Array(20), out: y }); // into an existing buffer
   * @throws TypeError for a wrong kind of argument, RangeError for mismatched shapes or invalid values.
   */
  forward(x: TensorLike, options: MultiHeadSelfAttentionForwardOptions & { returnWeights: true }): MultiHeadSelfAttentionWithWeights;
  forward(x: TensorLike, options?: MultiHeadSelfAttentionForwardOptions & { returnWeights?: false }): Tensor;
  forward(x: TensorLike, options?: MultiHeadSelfAttentionForwardOptions): Tensor | MultiHeadSelfAttentionWithWeights;
  forward(x: TensorLike, options?: MultiHeadSelfAttentionForwardOptions): Tensor | MultiHeadSelfAttentionWithWeights {
    const fn = `${CLASS}.forward`;
    const p = this.prepare(fn, x, options, 'sync');
    const ws = this.acquire(p.rows);
    try {
      const cached = this.cachedStages(p, ws);
      if (cached) {
        native.sequence(cached);
        return p.out.result;
      }
      const { stages, result, kept } = this.newStages(fn, p, ws);
      native.sequence(stages);
      if (kept) ws.plan = kept;
      return result;
    } catch (e) {
      throw rename(e, fn);
    } finally {
      dropCallerBuffers(ws.plan);
      this.release(ws);
    }
  }

  /**
   * {@link forward} computed off the JS thread (each op runs on the package's
   * native dispatcher). Concurrent calls on one block are safe: each uses its
   * own workspace. Do not modify x, the masks or `out` until the promise
   * settles. Invalid arguments reject the promise; nothing throws synchronously.
   *
   * @example
   * const y = await block.forwardAsync(x);
   * const [a, b] = await Promise.all([block.forwardAsync(x1), block.forwardAsync(x2)]);
   * const { weights } = await block.forwardAsync(x, { returnWeights: true });
   */
  forwardAsync(
    x: TensorLike,
    options: MultiHeadSelfAttentionForwardOptions & { returnWeights: true },
  ): Promise<MultiHeadSelfAttentionWithWeights>;
  forwardAsync(x: TensorLike, options?: MultiHeadSelfAttentionForwardOptions & { returnWeights?: false }): Promise<Tensor>;
  forwardAsync(x: TensorLike, options?: MultiHeadSelfAttentionForwardOptions): Promise<Tensor | MultiHeadSelfAttentionWithWeights>;
  async forwardAsync(
    x: TensorLike,
    options?: MultiHeadSelfAttentionForwardOptions,
  ): Promise<Tensor | MultiHeadSelfAttentionWithWeights> {
    const fn = `${CLASS}.forwardAsync`;
    const p = this.prepare(fn, x, options, 'async'); // throws inside the async function: a rejection
    const ws = this.acquire(p.rows);
    try {
      const cached = this.cachedStages(p, ws);
      const fresh = cached ? undefined : this.newStages(fn, p, ws);
      // Owned descriptors: the job may start after other ops have reused the shared buffer.
      const stages = cached ?? fresh!.kept?.stages ?? ownDescriptors(fresh!.stages);
      const result = fresh ? fresh.result : p.out.result;
      // What the caller could detach while the job waits: its own buffers and the weights read in place.
      const buffers: NamedBuffer[] = [...p.callerBuffers, ...this.inPlaceWeights];
      await runAsync(
        () => ({ fn, args: () => [stages], result, buffers }),
        (a) => native.sequence(a[0] as unknown[][], a[1] as NativeCallback),
      );
      if (fresh?.kept) ws.plan = fresh.kept;
      return result;
    } catch (e) {
      // An inner op names its own arguments ("a", "options.c.data"): name the caller's buffer instead.
      const lost = [...p.callerBuffers, ...this.inPlaceWeights].find(([, view]) => isDetached(view));
      if (lost) throw new TypeError(`${fn}: ${lost[0]} was detached before the call finished; its result is not defined`);
      throw rename(e, fn);
    } finally {
      dropCallerBuffers(ws.plan);
      this.release(ws);
    }
  }

  /** Validates x, the options and the stored weights; allocates (or checks) the output. */
  private prepare(
    fn: string,
    x: TensorLike,
    options: MultiHeadSelfAttentionForwardOptions | undefined,
    mode: 'sync' | 'async',
  ): Prepared {
    const opts = checkOptions<MultiHeadSelfAttentionForwardOptions>(fn, options, FORWARD_KEYS);
    const tx = checkTensor(fn, 'x', x);
    const rank = tx.shape.length;
    if (rank !== 2 && rank !== 3) {
      throw rangeError(fn, `x must be [batch, tokens, dim] or [tokens, dim], received shape ${formatShape(tx.shape)}`);
    }
    if (tx.shape[rank - 1] !== this.dim) {
      throw rangeError(fn, `x.shape[${rank - 1}] (dim) must equal the block's dim = ${this.dim}, received ${tx.shape[rank - 1]}`);
    }
    const twoD = rank === 2;
    const batch = twoD ? 1 : tx.shape[0];
    const tokens = tx.shape[rank - 2];
    const causal = optBoolean(fn, 'causal', opts.causal, false);
    const returnWeights = optBoolean(fn, 'returnWeights', opts.returnWeights, false);
    let mask: CheckedTensor | undefined;
    if (opts.mask !== undefined) {
      const full = [batch, this.heads, tokens, tokens];
      mask = checkTensor(fn, 'options.mask', opts.mask);
      if (!broadcastsTo(mask.shape, full)) {
        throw rangeError(
          fn,
          `options.mask.shape ${formatShape(mask.shape)} must broadcast to [batch, heads, tokens, tokens] = ${formatShape(full)}`,
        );
      }
    }
    let pad: Uint8Array | undefined;
    const kpm = opts.keyPaddingMask as unknown;
    if (kpm !== undefined) {
      let shape: number[] | undefined;
      if (types.isUint8Array(kpm)) {
        pad = kpm;
      } else if (typeof kpm === 'object' && kpm !== null) {
        const data: unknown = (kpm as { data?: unknown }).data; // read once, checked and used
        if (!types.isUint8Array(data)) throw typeError(fn, 'options.keyPaddingMask', 'a Uint8Array of batch·tokens bytes', kpm);
        pad = data;
        shape = checkShape(fn, 'options.keyPaddingMask.shape', (kpm as { shape?: unknown }).shape);
      } else {
        throw typeError(fn, 'options.keyPaddingMask', 'a Uint8Array of batch·tokens bytes', kpm);
      }
      if (isDetached(pad)) throw new TypeError(`${fn}: options.keyPaddingMask is backed by a detached ArrayBuffer`);
      if (shape) {
        const ok = twoD
          ? (shape.length === 1 && shape[0] === tokens) || (shape.length === 2 && shape[0] === 1 && shape[1] === tokens)
          : shape.length === 2 && shape[0] === batch && shape[1] === tokens;
        if (!ok) {
          throw rangeError(
            fn,
            `options.keyPaddingMask.shape must be ${twoD ? `[tokens] = [${tokens}]` : `[batch, tokens] = ${formatShape([batch, tokens])}`}, ` +
              `received ${formatShape(shape)}`,
          );
        }
      }
      if (pad.length !== batch * tokens) {
        throw rangeError(fn, `options.keyPaddingMask.length must be batch·tokens = ${batch * tokens}, received ${pad.length}`);
      }
    }

    // Everything this call may allocate, checked before any of it is. The list
    // for the error is built only past the limit: between two forwards, JS runs
    // several times slower than hot, and every allocation here costs (entry 122).
    const resultFloats = opts.out === undefined ? batch * tokens * this.dim : 0;
    const workspaceFloats = this.workspaceGrowth(batch * tokens);
    const weightFloats = returnWeights ? batch * tokens * tokens * (this.heads + 1) : 0;
    if (!fitsAllocationLimit(resultFloats + workspaceFloats + weightFloats)) {
      checkAllocation(fn, [
        ['the result', resultFloats],
        ['the workspace', workspaceFloats],
        ['the weights', weightFloats],
      ]);
    }
    const out = resultTensor(fn, opts.out, tx.shape);
    checkNoAlias(fn, 'options.out', out.data, 'x', tx.data);
    for (const [name, data] of this.weightViews) checkNoAlias(fn, 'options.out', out.data, name, data);
    checkNoAlias(fn, 'options.out', out.data, 'options.mask', mask?.data);
    checkNoAlias(fn, 'options.out', out.data, 'options.keyPaddingMask', pad);
    // One of the caller's weight arrays the block reads in place, transferred away since the
    // constructor: named here, not by the stage that meets it.
    for (const [name, data] of this.inPlaceWeights) {
      if (isDetached(data)) throw new TypeError(`${fn}: ${name} is backed by a detached ArrayBuffer`);
    }
    const callerBuffers: Array<[string, ArrayBufferView]> = [['x', tx.data], ['options.out', out.data]];
    if (mask) callerBuffers.push(['options.mask', mask.data]);
    if (pad) callerBuffers.push(['options.keyPaddingMask', pad]);
    if (mode === 'async') {
      // Checked here, before any stage runs, rather than by the stage that first meets the buffer.
      const resizable = callerBuffers.find(([, view]) => isResizable(view));
      if (resizable) {
        throw new TypeError(`${fn}: ${resizable[0]} is backed by a resizable ArrayBuffer; async ops need fixed-length buffers`);
      }
    }

    const attnOptions: AttentionOptions = { heads: this.heads, causal };
    if (mask) attnOptions.mask = mask;
    if (pad) attnOptions.keyPaddingMask = pad;
    return {
      x: { data: tx.data, shape: [batch, tokens, this.dim] },
      rows: batch * tokens,
      batch,
      tokens,
      twoD,
      out,
      out3: { data: out.data, shape: [batch, tokens, this.dim] },
      attnOptions,
      returnWeights,
      callerBuffers,
    };
  }

  /**
   * The stages of one forward pass, each checked, none run: LayerNorm and the
   * QKV projection (one stage when the LayerNorm is fused into it), attention
   * on the fused QKV output, the output projection, and with returnWeights the
   * average of the heads' weights. One native.sequence call then runs them
   * all, with no return to JS in between: between two calls, a block at batch 1
   * spent 80-180 µs re-entering JS (RESULTS.md, entry 101).
   */
  private plan(
    fn: string,
    p: Prepared,
    ws: Workspace,
  ): { stages: NativeStage[]; result: Tensor | MultiHeadSelfAttentionWithWeights; slots: Pick<CachedPlan, 'x' | 'out' | 'mask' | 'pad'> } {
    const [xn, qkv, o] = this.views(ws, p);
    const stages: NativeStage[] = [];
    if (this.fusedNorm) {
      stages.push(layerNormMatmulStage(p.x, this.packedQkv, this.fusedNorm, { c: this.bqkv, out: qkv }));
    } else {
      if (xn) stages.push(layerNormStage(p.x, { weight: this.normWeight, bias: this.normBias, eps: this.eps, out: xn }));
      stages.push(matmulStage(xn ?? p.x, this.packedQkv, { c: this.bqkv, out: qkv }));
    }
    const attended = attentionOnFusedQkvStage(fn, qkv, { ...p.attnOptions, out: o ?? p.out3, returnWeights: p.returnWeights });
    const att = stages.push(attended.stage) - 1;
    if (o) stages.push(matmulStage(o, this.packedOut!, { c: this.bo, out: p.out3 }));
    // Argument positions as in native/binding/bindings.h: a or x first, out fourth or second; attention's mask and keyPaddingMask fifth and sixth.
    const slots = {
      x: [0, 0] as const,
      out: o ? ([stages.length - 1, 3] as const) : ([att, 3] as const),
      mask: p.attnOptions.mask ? ([att, 4] as const) : undefined,
      pad: p.attnOptions.keyPaddingMask ? ([att, 5] as const) : undefined,
    };
    if (!p.returnWeights) return { stages, result: p.out.result, slots };
    const perHead = (attended.result as AttentionWithWeights).weights;
    const weights = this.averageHeads(perHead, p, (a, b, opts) => {
      stages.push(matmulStage(a, b, opts));
      return opts.out;
    });
    return { stages, result: { output: p.out.result, weights }, slots };
  }

  /** The workspace's kept stages with this call's buffers put in, if they were made for p's shapes and options. */
  private cachedStages(p: Prepared, ws: Workspace): unknown[][] | undefined {
    const plan = ws.plan;
    if (plan === undefined || p.returnWeights || plan.key !== planKey(p)) return undefined;
    const mask = p.attnOptions.mask as CheckedTensor | undefined;
    setCallerBuffers(plan, p.x.data, p.out.data, mask?.data, p.attnOptions.keyPaddingMask as Uint8Array | undefined);
    return plan.stages;
  }

  /**
   * New stages for this call (descriptors in the shared buffer: pass them at
   * once), and the plan to keep once the call succeeds (descriptors copied;
   * none with returnWeights, whose weights are allocated per call).
   */
  private newStages(
    fn: string,
    p: Prepared,
    ws: Workspace,
  ): { stages: unknown[][]; result: Tensor | MultiHeadSelfAttentionWithWeights; kept?: CachedPlan } {
    const planned = this.plan(fn, p, ws);
    const stages = sequenceArgs(planned.stages);
    const kept = p.returnWeights ? undefined : { key: planKey(p), stages: ownDescriptors(stages), ...planned.slots };
    return { stages, result: planned.result, kept };
  }

  /** Head-averaged weights [batch, tokens, tokens]: (1/H)·ones[1, H] · W viewed as [batch, H, tokens²]. */
  private averageHeads(
    perHead: Tensor,
    p: Prepared,
    mm: (a: Tensor, b: Tensor, opts: { alpha: number; out: Tensor }) => Tensor,
  ): Tensor {
    const T = p.tokens;
    const shape = p.twoD ? [T, T] : [p.batch, T, T];
    // Nothing to average (and [batch, H, T²] below may not be a valid shape when batch is 0).
    if (p.batch === 0 || T === 0) return { data: new Float32Array(0), shape };
    if (this.heads === 1) return { data: perHead.data, shape };
    const data = allocateFloats(`${CLASS}.forward`, 'the weights', p.batch * T * T);
    mm(this.onesHeads, { data: perHead.data, shape: [p.batch, this.heads, T * T] }, {
      alpha: 1 / this.heads,
      out: { data, shape: [p.batch, 1, T * T] },
    });
    return { data, shape };
  }

  /** A workspace with room for `rows` token rows: an idle one, grown if needed, or a new one. */
  private acquire(rows: number): Workspace {
    const ws = this.pool.pop() ?? { rows: 0, buffer: new Float32Array(0) };
    if (ws.rows < rows) {
      ws.buffer = allocateFloats(`${CLASS}.forward`, 'the workspace', rows * this.rowFloats());
      ws.rows = rows;
      ws.plan = undefined;
    }
    return ws;
  }

  /** Floats the next acquire(rows) allocates: none if the idle workspace it would pop is big enough. */
  private workspaceGrowth(rows: number): number {
    const idle = this.pool[this.pool.length - 1];
    return idle !== undefined && idle.rows >= rows ? 0 : rows * this.rowFloats();
  }

  private release(ws: Workspace): void {
    // A burst of concurrent forwardAsync calls makes one workspace each; once
    // it is over, keep only as many as can compute at once.
    if (this.pool.length < MAX_IDLE_WORKSPACES) this.pool.push(ws);
  }

  /**
   * Bytes held by idle workspaces: at most two, each sized for the largest
   * input seen. {@link releaseWorkspaces} frees them.
   */
  get workspaceBytes(): number {
    return this.pool.reduce((sum, ws) => sum + ws.buffer.byteLength, 0);
  }

  /**
   * Drops the idle workspaces (after an unusually large input, say), so the
   * garbage collector can free them; the next call makes one of its size.
   *
   * @example
   * block.forward(hugeBatch);
   * block.releaseWorkspaces(); // do not keep hugeBatch-sized buffers around
   */
  releaseWorkspaces(): void {
    this.pool.length = 0;
  }

  /** Whether the LayerNorm runs as a pass of its own (dim above what the projection fuses), into the workspace. */
  private get normPass(): boolean {
    return this.hasNorm && !this.fusedNorm;
  }

  /**
   * Floats per token row: the normalized input (with a norm the projection
   * does not apply itself), q, k and v side by side, and the merged heads (with projection).
   */
  private rowFloats(): number {
    return (this.normPass ? this.dim : 0) + (this.projectOut ? 4 : 3) * this.innerDim;
  }

  /** Views of a workspace for this call: [xn?, qkv, o?] as [batch, tokens, ·] tensors. */
  private views(ws: Workspace, p: Prepared): [Tensor | undefined, Tensor, Tensor | undefined] {
    // Region i starts at (sum of the widths before it) · capacity rows; a call uses the first p.rows rows of each.
    const base = ws.rows;
    let at = 0;
    const region = (width: number): Tensor => {
      const t = { data: ws.buffer.subarray(at * base, at * base + p.rows * width), shape: [p.batch, p.tokens, width] };
      at += width;
      return t;
    };
    const xn = this.normPass ? region(this.dim) : undefined;
    const qkv = region(3 * this.innerDim);
    const o = this.projectOut ? region(this.innerDim) : undefined;
    return [xn, qkv, o];
  }

  /** A short description, e.g. `MultiHeadSelfAttention(dim=768, heads=12, dimHead=64, norm, out)`. */
  toString(): string {
    return `${CLASS}(dim=${this.dim}, heads=${this.heads}, dimHead=${this.dimHead}` +
      `${this.hasNorm ? ', norm' : ''}${this.projectOut ? ', out' : ''})`;
  }
}

/** What a cached plan depends on besides the workspace: the shapes, and the options that reach a descriptor. */
function planKey(p: Prepared): string {
  const mask = p.attnOptions.mask as CheckedTensor | undefined;
  return `${p.batch},${p.tokens},${p.attnOptions.causal ? 1 : 0},${mask ? mask.shape.join('x') : '-'},${p.attnOptions.keyPaddingMask ? 1 : 0}`;
}

/** Puts a call's buffers into a kept plan's slots (null: none). */
function setCallerBuffers(
  plan: CachedPlan,
  x: ArrayBufferView | null,
  out: ArrayBufferView | null,
  mask: ArrayBufferView | null | undefined,
  pad: ArrayBufferView | null | undefined,
): void {
  const put = (slot: Slot | undefined, buffer: ArrayBufferView | null | undefined) => {
    if (slot) plan.stages[slot[0]][1 + slot[1]] = buffer ?? null;
  };
  put(plan.x, x);
  put(plan.out, out);
  put(plan.mask, mask);
  put(plan.pad, pad);
}

/**
 * Empties a kept plan's slots once its call is over: the caller's buffers
 * (x may view a whole dataset) must not stay reachable from an idle workspace.
 */
function dropCallerBuffers(plan: CachedPlan | undefined): void {
  if (plan) setCallerBuffers(plan, null, null, null, null);
}

/** sequenceArgs' stages with each descriptor copied out of the shared buffer, so they can be passed again later. */
function ownDescriptors(stages: unknown[][]): unknown[][] {
  return stages.map((stage) => stage.map((arg) => (arg instanceof Float64Array ? arg.slice() : arg)));
}

/** For an error message: prefixes under which some key names a known QKV weight. */
function suggestPrefixes(keys: string[]): string {
  const endings = ['in_proj_weight', 'to_qkv.weight', 'query.weight', 'q_proj.weight'];
  const prefixes = new Set<string>();
  for (const k of keys) {
    for (const e of endings) {
      if (k.endsWith(e) && (k.length === e.length || k[k.length - e.length - 1] === '.')) {
        let p = k.slice(0, k.length - e.length);
        if (e === 'query.weight' && (p.endsWith('self.') || p.endsWith('attention.'))) p = p.slice(0, p.lastIndexOf('.', p.length - 2) + 1);
        prefixes.add(p);
      }
    }
  }
  if (prefixes.size === 0) return '';
  const list = [...prefixes].slice(0, 5).map((p) => JSON.stringify(p)).join(', ');
  return `; keys found under ${list}${prefixes.size > 5 ? ', …' : ''} (pass one as options.prefix)`;
}
