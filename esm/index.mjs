// ESM entry: the CommonJS build re-exported under named exports.
import mhsa from '../dist/lib/index.js';

export const {
  tensor,
  matmul,
  matmulAsync,
  prepack,
  prepackAsync,
  PackedMatrix,
  softmax,
  softmaxAsync,
  attention,
  attentionAsync,
  KVCache,
  layerNorm,
  layerNormAsync,
  rmsNorm,
  rmsNormAsync,
  rope,
  ropeAsync,
  info,
  setNumThreads,
  getNumThreads,
  setAllocationLimit,
  setResultPoolLimit,
  getAllocationLimit,
  loadSafetensors,
  loadSafetensorsAsync,
  MultiHeadSelfAttention,
} = mhsa;
export default mhsa;
