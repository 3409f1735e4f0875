/**
 * The public types of {@link MultiHeadSelfAttention}: its config and weights,
 * forward options and result, and fromTorch's options and state dict.
 */
import type { AttentionWindow } from '../attention';
import type { KVCache, KVCacheDtype } from '../kv-cache';
import type { Bf16Tensor, Tensor, TensorLike } from '../tensor';

/** Weights of a {@link MultiHeadSelfAttention}, in PyTorch's `nn.Linear` layout [out, in]. */
export interface MultiHeadSelfAttentionWeights {
  /**
   * The fused Q, K, V projection [3·inner, dim]: rows [0, inner) make q, then k, then v.
   * With kvHeads < heads, [(heads + 2·kvHeads)·dimHead, dim]: q's heads·dimHead rows, then k's and v's kvHeads·dimHead each.
   */
  qkvWeight: TensorLike | Bf16Tensor;
  /** Its bias ([3·inner], or as many as qkvWeight's rows). Default none. */
  qkvBias?: TensorLike;
  /** The output projection [dim, inner]. Required unless heads = 1 and dimHead = dim. */
  outWeight?: TensorLike | Bf16Tensor;
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
  /**
   * The weights. The projection weights are packed (copied) at construction;
   * the biases are kept by reference.
   */
  weights: MultiHeadSelfAttentionWeights;
  /**
   * A norm over dim applied to the input first: a LayerNorm (vit-pytorch's `Attention.norm`; `type: 'layer'`,
   * the default) with weight [dim] and optional bias [dim], or LLaMA's RMSNorm (`type: 'rms'`), weight only.
   */
  norm?: { type?: 'layer' | 'rms'; weight: TensorLike; bias?: TensorLike };
  /** The norm's epsilon. Default 1e-5 (a LayerNorm's), 1e-6 for RMSNorm. */
  eps?: number;
  /** Key/value heads (grouped-query attention: LLaMA 3, Mistral, Qwen); heads must be a multiple. Default heads. */
  kvHeads?: number;
  /** Rotary position embedding of q and k after the projection (see {@link rope}); positions continue a cache's. */
  rope?: { theta?: number; rotaryDim?: number; interleaved?: boolean };
  /** Attention's softcap (Gemma 2). */
  softcap?: number;
  /** Attention's sliding window (Mistral, Gemma). */
  window?: AttentionWindow;
  /** Attention's sink logits, one per head (gpt-oss). */
  sinks?: Float32Array;
  /**
   * The projections' weight type: `'bf16'` packs qkvWeight and outWeight in
   * bfloat16 (see {@link prepack}): half their memory, and the projections run
   * on the CPU's bf16 instructions (`info().bf16`) with the activations
   * rounded to bf16 and float32 sums. The norm, attention and the biases stay
   * float32. Default `'float32'`, or `'bf16'` when qkvWeight is a {@link Bf16Tensor}.
   *
   * `'int8'` quantizes them per output feature instead (a quarter of the
   * memory; see prepack's `dtype`), and each projection quantizes its input
   * rows as it runs: about 1 % from float32 (docs/api.md, "int8 weights").
   */
  dtype?: 'float32' | 'bf16' | 'int8';
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
  /**
   * A KV cache for this block's kvHeads and dimHead: x's tokens are projected, rotated (with `rope`)
   * at positions from `cache.length` on, appended to the cache, and attend over the whole cache: a
   * prefill with many tokens, then decode steps with one. The mask, if any, then broadcasts to
   * [batch, heads, tokens, cache.length + tokens]; returnWeights is not available. One call at a
   * time per cache. Each batch entry continues from its own length (`cache.lengths`).
   */
  cache?: KVCache<KVCacheDtype>;
  /**
   * With a cache, for a batch of prompts of different lengths: the real tokens of each batch
   * entry (one integer in [0, tokens] per entry), which are x's last lengths[b] tokens (prompts
   * padded on the left, as decoder-only generation batches them). Only those are appended;
   * each entry's rows attend over its own keys. The padding rows' outputs are meaningless.
   */
  lengths?: Int32Array | readonly number[];
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
  /** Rotary position embedding, as the config's `rope`. */
  rope?: { theta?: number; rotaryDim?: number; interleaved?: boolean };
  /** Attention's softcap and sliding window, as the config's. */
  softcap?: number;
  window?: AttentionWindow;
  /**
   * The projections' weight type, as the config's `dtype`. Default `'bf16'`
   * when the q/k/v weights are {@link Bf16Tensor}s (a checkpoint loaded with
   * `loadSafetensors(..., { bf16: 'keep' })`), else `'float32'`. Kept bf16
   * biases and norm weights are widened to float32. `'int8'` quantizes the
   * projections (kept bf16 weights are widened first).
   */
  dtype?: 'float32' | 'bf16' | 'int8';
}

/** A state dict: parameter name → tensor, as `torch.nn.Module.state_dict()` or {@link loadSafetensors} gives (an object or a Map). */
export type StateDict = Readonly<Record<string, TensorLike | Bf16Tensor>> | ReadonlyMap<string, TensorLike | Bf16Tensor>;
