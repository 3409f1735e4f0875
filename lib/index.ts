/**
 * mhsa: multi-head self-attention and the matrix kernels under it, computed
 * in native C++ on Float32Array buffers handed over without copies.
 *
 * @packageDocumentation
 */
export { tensor, type Tensor, type TensorLike, type StridedTensor, type Bf16Tensor, type Bf16StridedTensor, type Int8Tensor, type Int8StridedTensor } from './tensor';
export { matmul, matmulAsync, type MatmulOptions } from './matmul';
export { prepack, prepackAsync, PackedMatrix, type PrepackOptions, type PackedDtype, type PackedData } from './prepack';
export { softmax, softmaxAsync, type SoftmaxOptions } from './softmax';
export {
  attention,
  attentionAsync,
  type AttentionOptions,
  type AttentionLayout,
  type AttentionWithWeights,
  type AttentionWindow,
  type KeyValueInput,
} from './attention';
export { KVCache, type KVCacheOptions, type KVCacheAppendOptions, type KVCacheDtype, type KVCacheView } from './kv-cache';
export { layerNorm, layerNormAsync, rmsNorm, rmsNormAsync, type LayerNormOptions, type RmsNormOptions } from './layernorm';
export { rope, ropeAsync, type RopeOptions } from './rope';
export { info, setNumThreads, getNumThreads, type MhsaInfo } from './info';
export { setAllocationLimit, getAllocationLimit, setResultPoolLimit, type ResultPoolInfo } from './memory';
export {
  loadSafetensors,
  loadSafetensorsAsync,
  type LoadSafetensorsOptions,
  type SafetensorsFile,
  type SafetensorsFloatDtype,
} from './safetensors';
export {
  MultiHeadSelfAttention,
  type MultiHeadSelfAttentionConfig,
  type MultiHeadSelfAttentionWeights,
  type MultiHeadSelfAttentionForwardOptions,
  type MultiHeadSelfAttentionWithWeights,
  type MultiHeadSelfAttentionFromTorchOptions,
  type StateDict,
} from './block';
