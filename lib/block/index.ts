/** The multi-head self-attention block: the class and its public types. */
export { MultiHeadSelfAttention } from './multi-head-self-attention';
export type {
  MultiHeadSelfAttentionConfig,
  MultiHeadSelfAttentionWeights,
  MultiHeadSelfAttentionForwardOptions,
  MultiHeadSelfAttentionWithWeights,
  MultiHeadSelfAttentionFromTorchOptions,
  StateDict,
} from './types';
