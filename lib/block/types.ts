/**
 * The public types of {@link MultiHeadSelfAttention}: its config and weights,
 * forward options and result, and fromTorch's options and state dict.
 */
import type { Tensor, TensorLike } from '../tensor';

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
  /**
   * The weights. The projection weights are packed (copied) at construction;
   * the biases are kept by reference.
   */
  weights: MultiHeadSelfAttentionWeights;
  /** A LayerNorm over dim applied to the input first (vit-pytorch's `Attention.norm`): weight [dim], optional bias [dim]. */
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
