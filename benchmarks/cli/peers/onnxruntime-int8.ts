/**
 * onnxruntime-node on the int8 workloads (*_int8), as onnxruntime's
 * quantize_dynamic writes a model: each MatMul against a weight becomes
 * DynamicQuantizeLinear (the activations to uint8, per tensor, with a zero
 * point) → MatMulInteger against the weight quantized to int8 (per tensor,
 * symmetric: quantize_dynamic's defaults) → Cast → Mul by the two scales,
 * which onnxruntime fuses into com.microsoft DynamicQuantizeMatMul on its MLAS
 * int8 kernels. Both sides then multiply in int8.
 */
import type { Inputs } from '../data';
import { precisionOf, type Problem } from '../workloads';
import { FLOAT, floatAttr, floatInit, floatTensor, int64Init, intAttr, loadOrt, model, ortVersion, session, transpose, type Graph, type NodeSpec } from './onnxruntime';
import type { Impl, Prepared } from './types';

const INT8 = 3; // TensorProto.DataType

/** w [K, N] quantized as quantize_dynamic does for QInt8 weights: one symmetric scale. */
function quantizeWeight(w: Float32Array): { q: Int8Array; scale: number } {
  let most = 0;
  for (const v of w) most = Math.max(most, Math.abs(v));
  const scale = most === 0 ? 1 : most / 127;
  return { q: Int8Array.from(w, (v) => Math.max(-127, Math.min(127, Math.round(v / scale)))), scale };
}

/**
 * The nodes and initializers of `output = input · w` in quantize_dynamic's
 * form; names are prefixed by `name`.
 */
function quantizedMatMul(name: string, input: string, output: string, w: Float32Array, K: number, N: number): { nodes: NodeSpec[]; inits: unknown[] } {
  const { q, scale } = quantizeWeight(w);
  const n = (s: string) => `${name}_${s}`;
  return {
    nodes: [
      { opType: 'DynamicQuantizeLinear', input: [input], output: [n('xq'), n('xs'), n('xz')] },
      { opType: 'MatMulInteger', input: [n('xq'), n('w'), n('xz'), n('wz')], output: [n('acc')] },
      { opType: 'Cast', input: [n('acc')], output: [n('accf')], attribute: [intAttr('to', FLOAT)] },
      { opType: 'Mul', input: [n('xs'), n('ws')], output: [n('s')] },
      { opType: 'Mul', input: [n('accf'), n('s')], output: [output] },
    ],
    inits: [
      { name: n('w'), dims: [K, N], dataType: INT8, rawData: new Uint8Array(q.buffer).slice() },
      { name: n('wz'), dims: [], dataType: INT8, rawData: new Uint8Array(1) },
      floatInit(n('ws'), [], Float32Array.of(scale)),
    ],
  };
}

function buildGraph(p: Problem, x: Inputs): Graph {
  const T = floatTensor;
  if (p.kind === 'gemm' && x.kind === 'gemm') {
    const { M, K, N } = p;
    const mm = quantizedMatMul('b', 'a', 'c', x.b, K, N);
    return { bytes: model(mm.nodes, [['a', [M, K]]], [['c', [M, N]]], [['', 17]], mm.inits), feeds: { a: T(x.a, [M, K]) }, output: 'c' };
  }
  if (p.kind === 'block' && x.kind === 'block') {
    const { B, N, dim, heads } = p;
    const inner = heads * p.dimHead;
    const qkv = quantizedMatMul('qkv', 'ln', 'qkv', transpose(x.wqkv, 3 * inner, dim), dim, 3 * inner);
    const out = quantizedMatMul('out', 'o', 'y0', transpose(x.wo, dim, inner), inner, dim);
    const nodes: NodeSpec[] = [
      { opType: 'LayerNormalization', input: ['x', 'gamma', 'beta'], output: ['ln'], attribute: [intAttr('axis', -1), floatAttr('epsilon', 1e-5)] },
      ...qkv.nodes,
      { opType: 'Split', input: ['qkv', 'split'], output: ['q', 'k', 'v'], attribute: [intAttr('axis', 2)] },
      { opType: 'MultiHeadAttention', domain: 'com.microsoft', input: ['q', 'k', 'v'], output: ['o'], attribute: [intAttr('num_heads', heads)] },
      ...out.nodes,
      { opType: 'Add', input: ['y0', 'bo'], output: ['y'] },
    ];
    const inits = [
      floatInit('gamma', [dim], x.gamma),
      floatInit('beta', [dim], x.beta),
      int64Init('split', [inner, inner, inner]),
      floatInit('bo', [dim], x.bo),
      ...qkv.inits,
      ...out.inits,
    ];
    return {
      bytes: model(nodes, [['x', [B, N, dim]]], [['y', [B, N, dim]]], [['', 17], ['com.microsoft', 1]], inits),
      feeds: { x: T(x.x, [B, N, dim]) },
      output: 'y',
    };
  }
  throw new Error(`onnxruntime-int8: no graph for a ${p.kind} problem`);
}

export const onnxruntimeInt8Impl: Impl = {
  name: 'onnxruntime-int8',
  label: 'onnxruntime-node int8 (quantize_dynamic)',
  maxThreads: 1024,
  timed: {
    gemm: 'session.run of DynamicQuantizeLinear → MatMulInteger (weight int8, an initializer) → Cast → Mul, fused by onnxruntime to DynamicQuantizeMatMul',
    block: 'session.run of the block graph with each MatMul in that quantize_dynamic form',
  },
  async load() {
    const reason = await loadOrt();
    if (reason === null) this.label = `onnxruntime-node ${ortVersion()} int8 (quantize_dynamic)`;
    return reason;
  },
  supports(p: Problem) {
    if (precisionOf(p) !== 'int8' || (p.kind !== 'gemm' && p.kind !== 'block')) return 'onnxruntime-int8 runs the int8 GEMM and block workloads only';
    return null;
  },
  async prepare(p: Problem, x: Inputs, threads: number): Promise<Prepared> {
    return session(buildGraph(p, x), threads);
  },
};
