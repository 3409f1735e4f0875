/**
 * The multi-head self-attention block (vit-pytorch's `Attention`, the ViT
 * attention module), composed from the native ops: optional pre-LayerNorm →
 * QKV projection → attention over heads → output projection, run as one
 * native.sequence call.
 * No math on tensor data runs in JS. This file holds the class; its config
 * checks are in config.ts, fromTorch's weight names in weight-names.ts, the
 * forward checks in forward-args.ts, the workspaces and plans in plan.ts.
 */
import { native, type NativeCallback } from '../native';
import { runAsync, type NamedBuffer } from '../queue';
import type { Tensor, TensorLike } from '../tensor';
import { CLASS, checkConfig, type BlockWeights } from './config';
import { decoderForward, decoderForwardAsync, takesDecoderPath, type DecoderPlan } from './decoder';
import { detachedBeforeFinished, prepareForward } from './forward-args';
import { acquireWorkspace, cachedStages, dropCallerBuffers, newStages, ownDescriptors, releaseWorkspace, type Workspace } from './plan';
import type {
  MultiHeadSelfAttentionConfig,
  MultiHeadSelfAttentionForwardOptions,
  MultiHeadSelfAttentionFromTorchOptions,
  MultiHeadSelfAttentionWithWeights,
  StateDict,
} from './types';
import { configFromStateDict } from './weight-names';

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
 * Multi-head self-attention with its projections: vit-pytorch's `Attention`
 * (the Vision Transformer's attention module) and `torch.nn.MultiheadAttention`
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
  /** Number of key/value heads (fewer than heads under grouped-query attention). */
  readonly kvHeads: number;
  /** Width of one head. */
  readonly dimHead: number;
  /** heads · dimHead: the width of q, k and v. */
  readonly innerDim: number;
  /** The input norm's epsilon, LayerNorm's or RMSNorm's (used only when {@link hasNorm}). */
  readonly eps: number;
  /** True when the input is normalized first: a LayerNorm, or an RMSNorm (config `norm.type: 'rms'`). */
  readonly hasNorm: boolean;
  /**
   * True when the output projection is applied (false only in the identity
   * case: heads = 1, dimHead = dim and no outWeight).
   */
  readonly projectOut: boolean;

  /** The dims and weights as the forward passes use them (the projections packed). */
  private readonly weights: BlockWeights;
  /** Idle workspaces; a call takes one (or makes one) and gives it back, so concurrent async calls never share. */
  private readonly pool: Workspace[] = [];
  /** The decoder form's workspaces (lib/block/decoder.ts). */
  private readonly decoderPool: Workspace<DecoderPlan>[] = [];

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
    const w = checkConfig(CLASS, config);
    this.dim = w.dim;
    this.heads = w.heads;
    this.kvHeads = w.kvHeads;
    this.dimHead = w.dimHead;
    this.innerDim = w.innerDim;
    this.eps = w.eps;
    this.hasNorm = w.hasNorm;
    this.projectOut = w.projectOut;
    this.weights = w;
  }

  /**
   * Builds the block from a PyTorch state dict (an object or a Map of tensors,
   * such as {@link loadSafetensors}`(file).tensors`). Recognized names, after `prefix`:
   *
   * - `torch.nn.MultiheadAttention`: `in_proj_weight`, `in_proj_bias`,
   *   `out_proj.weight`, `out_proj.bias` (or `q_proj_weight`, `k_proj_weight`,
   *   `v_proj_weight` when PyTorch stored them separately).
   * - vit-pytorch's `Attention`: `norm.weight`, `norm.bias`, `to_qkv.weight`
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
   * shapes. The projection weights are packed (copied) at construction; a
   * fused QKV bias, the output bias and the norm parameters are used by
   * reference (separate q/k/v biases are concatenated into a copy).
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
    return new MultiHeadSelfAttention(configFromStateDict(`${CLASS}.fromTorch`, stateDict, options));
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
    if (this.weights.decoder || takesDecoderPath(options)) {
      try {
        return decoderForward(fn, this.weights, this.decoderPool, x, options);
      } catch (e) {
        throw rename(e, fn);
      }
    }
    const p = prepareForward(fn, this.weights, this.pool, x, options, 'sync');
    const ws = acquireWorkspace(this.pool, this.weights, p.rows);
    try {
      const cached = cachedStages(p, ws);
      if (cached) {
        native.sequence(cached);
        return p.out.result;
      }
      const { stages, result, kept } = newStages(fn, this.weights, p, ws);
      native.sequence(stages);
      if (kept) ws.plan = kept;
      return result;
    } catch (e) {
      throw rename(e, fn);
    } finally {
      dropCallerBuffers(ws.plan);
      releaseWorkspace(this.pool, ws);
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
    if (this.weights.decoder || takesDecoderPath(options)) {
      try {
        return await decoderForwardAsync(fn, this.weights, this.decoderPool, x, options);
      } catch (e) {
        throw rename(e, fn);
      }
    }
    const p = prepareForward(fn, this.weights, this.pool, x, options, 'async'); // throws inside the async function: a rejection
    const ws = acquireWorkspace(this.pool, this.weights, p.rows);
    try {
      const cached = cachedStages(p, ws);
      const fresh = cached ? undefined : newStages(fn, this.weights, p, ws);
      // Owned descriptors: the job may start after other ops have reused the shared buffer.
      const stages = cached ?? fresh!.kept?.stages ?? ownDescriptors(fresh!.stages);
      const result = fresh ? fresh.result : p.out.result;
      // What the caller could detach while the job waits: its own buffers and the weights read in place;
      // and the head-averaged weights the job writes (returnWeights), for private copies (lib/async-copies.ts).
      const buffers: NamedBuffer[] = [...p.callerBuffers, ...this.weights.inPlaceWeights];
      if ('weights' in result) buffers.push(['the weights', result.weights.data, true]);
      await runAsync(
        () => ({ fn, args: () => [stages], result, buffers }),
        (a) => native.sequence(a[0] as unknown[][], a[1] as NativeCallback),
      );
      if (fresh?.kept) ws.plan = fresh.kept;
      return result;
    } catch (e) {
      throw detachedBeforeFinished(fn, [...p.callerBuffers, ...this.weights.inPlaceWeights]) ?? rename(e, fn);
    } finally {
      dropCallerBuffers(ws.plan);
      releaseWorkspace(this.pool, ws);
    }
  }

  /**
   * Bytes held by idle workspaces: at most two per form (encoder and decoder),
   * each sized for the largest input seen. {@link releaseWorkspaces} frees them.
   */
  get workspaceBytes(): number {
    return [...this.pool, ...this.decoderPool].reduce((sum, ws) => sum + ws.buffer.byteLength, 0);
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
    this.decoderPool.length = 0;
  }

  /** A short description, e.g. `MultiHeadSelfAttention(dim=768, heads=12, dimHead=64, norm, out)`. */
  toString(): string {
    const kv = this.kvHeads !== this.heads ? `, kvHeads=${this.kvHeads}` : '';
    return `${CLASS}(dim=${this.dim}, heads=${this.heads}${kv}, dimHead=${this.dimHead}` +
      `${this.hasNorm ? ', norm' : ''}${this.projectOut ? ', out' : ''})`;
  }
}
