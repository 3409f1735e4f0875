/**
 * onnxruntime-node (CPU execution provider), on ONNX models built in memory
 * with onnx-proto: MatMul, Softmax, the opset-23 Attention op for SDPA, and
 * the seed-004 block as a graph (LayerNormalization → MatMul → Split →
 * com.microsoft MultiHeadAttention → MatMul → Add). Every tensor but the
 * block's weights is a graph input (no constant folding or prepacking of a
 * GEMM operand); the block's weights, and the GEMM's B in the workloads with
 * a packed weight, are initializers, as an exported model has them. intra-op threads = the row's thread count, inter-op threads 1,
 * sequential execution, all graph optimizations.
 *
 * Both packages are loaded with require() at run time: when either is missing
 * this peer is skipped with a note.
 */
import type { AttentionInputs, DecoderInputs, Inputs } from '../data';
import { decoderRows, plainAttentionOnly, type AttentionProblem, type DecoderProblem, type Problem } from '../workloads';
import type { Impl, Prepared } from './types';

interface OrtTensor {
  data: unknown;
  dims: readonly number[];
}
interface OrtSession {
  run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
  release(): Promise<void>;
  endProfiling(): void;
}
interface OrtModule {
  Tensor: new (type: 'float32' | 'int32' | 'int64', data: Float32Array | Int32Array | BigInt64Array, dims: readonly number[]) => OrtTensor;
  InferenceSession: { create(model: Uint8Array, options: Record<string, unknown>): Promise<OrtSession> };
  env: { versions?: { node?: string; common?: string } };
}
interface OnnxProto {
  onnx: { ModelProto: { encode(message: unknown): { finish(): Uint8Array } } };
}

export const FLOAT = 1; // TensorProto.DataType.FLOAT
const INT32 = 6;
const INT64 = 7;
const ATTR_INT = 2; // AttributeProto.AttributeType.INT
const ATTR_FLOAT = 1;

let ort: OrtModule | undefined;
let proto: OnnxProto | undefined;

export interface NodeSpec {
  opType: string;
  domain?: string;
  input: string[];
  output: string[];
  attribute?: unknown[];
}

function valueInfo(name: string, dims: readonly number[], elemType = FLOAT) {
  return { name, type: { tensorType: { elemType, shape: { dim: dims.map((d) => ({ dimValue: d })) } } } };
}

export function intAttr(name: string, i: number) {
  return { name, type: ATTR_INT, i };
}

export function floatAttr(name: string, f: number) {
  return { name, type: ATTR_FLOAT, f };
}

export function floatInit(name: string, dims: number[], data: Float32Array) {
  return { name, dims, dataType: FLOAT, rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice() };
}

export function int64Init(name: string, values: number[]) {
  const b = BigInt64Array.from(values.map((v) => BigInt(v)));
  return { name, dims: [values.length], dataType: INT64, rawData: new Uint8Array(b.buffer) };
}

/** Serializes a one-graph model. */
export function model(
  nodes: NodeSpec[],
  inputs: [string, readonly number[], number?][],
  outputs: [string, readonly number[]][],
  opsets: [string, number][],
  initializers: unknown[] = [],
): Uint8Array {
  const m = {
    irVersion: 10,
    producerName: 'mhsa-bench',
    opsetImport: opsets.map(([domain, version]) => ({ domain, version })),
    graph: {
      name: 'bench',
      node: nodes,
      input: inputs.map(([n, d, t]) => valueInfo(n, d, t)),
      output: outputs.map(([n, d]) => valueInfo(n, d)),
      initializer: initializers,
    },
  };
  return proto!.onnx.ModelProto.encode(m).finish();
}

/** A float32 feed (onnxruntime loaded). */
export function floatTensor(data: Float32Array, dims: readonly number[]): OrtTensor {
  return new ort!.Tensor('float32', data, dims);
}

/** b [rows, cols] → bᵀ [cols, rows]. */
export function transpose(b: Float32Array, rows: number, cols: number): Float32Array {
  const t = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = b[r * cols + c];
  return t;
}

export interface Graph {
  bytes: Uint8Array;
  feeds: Record<string, OrtTensor>;
  output: string;
  /** Re-lays the output out into the canonical layout, for the check only (untimed). */
  canonical?: (y: Float32Array) => Float32Array;
}

/** [B, H, N, d] → [B, N, H·d] (for MultiHeadAttention's packed inputs). */
function bhsdToBshd(x: Float32Array, B: number, H: number, N: number, d: number): Float32Array {
  const y = new Float32Array(x.length);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let n = 0; n < N; n++) {
        const src = ((b * H + h) * N + n) * d;
        y.set(x.subarray(src, src + d), ((b * N + n) * H + h) * d);
      }
  return y;
}

/** [B, N, H·d] → [B, H, N, d]. */
function bshdToBhsd(x: Float32Array, B: number, H: number, N: number, d: number): Float32Array {
  const y = new Float32Array(x.length);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let n = 0; n < N; n++) {
        const dst = ((b * H + h) * N + n) * d;
        y.set(x.subarray(((b * N + n) * H + h) * d, ((b * N + n) * H + h) * d + d), dst);
      }
  return y;
}

/** Rows [0, split) and [split, n) of each of `heads` [n, d] blocks of x, as two tensors. */
function splitPositions(x: Float32Array, heads: number, n: number, split: number, d: number): [Float32Array, Float32Array] {
  const a = new Float32Array(heads * split * d), b = new Float32Array(heads * (n - split) * d);
  for (let h = 0; h < heads; h++) {
    a.set(x.subarray(h * n * d, (h * n + split) * d), h * split * d);
    b.set(x.subarray((h * n + split) * d, (h + 1) * n * d), h * (n - split) * d);
  }
  return [a, b];
}

/**
 * Causal SDPA as one com.microsoft GroupQueryAttention node: q, k, v packed
 * [B, N, heads·d]; with a cache, its first Nkv − Nq positions as
 * past_key/past_value [B, Hkv, past, d] (the op copies them into its present
 * outputs); seqlens_k and total_sequence_length as int32 inputs;
 * local_window_size for a window, softcap for a softcap.
 */
function gqaGraph(p: AttentionProblem, x: AttentionInputs): Graph {
  const { B, H, Nq, Nkv, d } = p;
  const Hkv = p.Hkv ?? H;
  const past = p.Nkv - p.Nq;
  const T = (data: Float32Array, dims: number[]) => new ort!.Tensor('float32', data, dims);
  const [pastK, newK] = splitPositions(x.k, B * Hkv, Nkv, past, d);
  const [pastV, newV] = splitPositions(x.v, B * Hkv, Nkv, past, d);
  const attrs = [
    intAttr('num_heads', H),
    intAttr('kv_num_heads', Hkv),
    ...(p.window !== undefined ? [intAttr('local_window_size', p.window + 1)] : []),
    ...(p.softcap !== undefined ? [floatAttr('softcap', p.softcap)] : []),
  ];
  const inputs: [string, readonly number[], number?][] = [['q', [B, Nq, H * d]], ['k', [B, Nq, Hkv * d]], ['v', [B, Nq, Hkv * d]]];
  const feeds: Record<string, OrtTensor> = {
    q: T(bhsdToBshd(x.q, B, H, Nq, d), [B, Nq, H * d]),
    k: T(bhsdToBshd(newK, B, Hkv, Nq, d), [B, Nq, Hkv * d]),
    v: T(bhsdToBshd(newV, B, Hkv, Nq, d), [B, Nq, Hkv * d]),
  };
  if (past > 0) {
    inputs.push(['past_key', [B, Hkv, past, d]], ['past_value', [B, Hkv, past, d]]);
    feeds.past_key = T(pastK, [B, Hkv, past, d]);
    feeds.past_value = T(pastV, [B, Hkv, past, d]);
  }
  inputs.push(['seqlens_k', [B], INT32], ['total_sequence_length', [1], INT32]);
  feeds.seqlens_k = new ort!.Tensor('int32', new Int32Array(B).fill(Nkv - 1), [B]);
  feeds.total_sequence_length = new ort!.Tensor('int32', Int32Array.of(Nkv), [1]);
  const pastNames = past > 0 ? ['past_key', 'past_value'] : ['', ''];
  return {
    bytes: model(
      [{ opType: 'GroupQueryAttention', domain: 'com.microsoft', input: ['q', 'k', 'v', ...pastNames, 'seqlens_k', 'total_sequence_length'], output: ['y', 'present_key', 'present_value'], attribute: attrs }],
      inputs,
      [['y', [B, Nq, H * d]], ['present_key', [B, Hkv, Nkv, d]], ['present_value', [B, Hkv, Nkv, d]]],
      [['', 17], ['com.microsoft', 1]],
    ),
    feeds,
    output: 'y',
    canonical: (y) => bshdToBhsd(y, B, H, Nq, d),
  };
}

/** SDPA as one com.microsoft MultiHeadAttention node on packed [B, N, H·d] q, k, v. */
function mhaGraph(p: AttentionProblem, x: AttentionInputs): Graph {
  const { B, H, Nq, Nkv, d } = p;
  const T = (data: Float32Array, dims: number[]) => new ort!.Tensor('float32', data, dims);
  const attrs = [intAttr('num_heads', H), ...(p.causal ? [intAttr('unidirectional', 1)] : [])];
  return {
    bytes: model(
      [{ opType: 'MultiHeadAttention', domain: 'com.microsoft', input: ['q', 'k', 'v'], output: ['y'], attribute: attrs }],
      [['q', [B, Nq, H * d]], ['k', [B, Nkv, H * d]], ['v', [B, Nkv, H * d]]],
      [['y', [B, Nq, H * d]]],
      [['', 17], ['com.microsoft', 1]],
    ),
    feeds: {
      q: T(bhsdToBshd(x.q, B, H, Nq, d), [B, Nq, H * d]),
      k: T(bhsdToBshd(x.k, B, H, Nkv, d), [B, Nkv, H * d]),
      v: T(bhsdToBshd(x.v, B, H, Nkv, d), [B, Nkv, H * d]),
    },
    output: 'y',
    canonical: (y) => bshdToBhsd(y, B, H, Nq, d),
  };
}

/** RoPE's cos and sin tables [positions, dimHead/2] (rotate-half, base theta), as initializers. */
function ropeTables(positions: number, dimHead: number, theta: number) {
  const half = dimHead / 2;
  const cos = new Float32Array(positions * half), sin = new Float32Array(positions * half);
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p * Math.pow(theta, (-2 * i) / dimHead);
      cos[p * half + i] = Math.cos(angle);
      sin[p * half + i] = Math.sin(angle);
    }
  }
  return [floatInit('cos', [positions, half], cos), floatInit('sin', [positions, half], sin)];
}

/**
 * A decoder step's graph around its attention node: RMSNormalization →
 * MatMul(x, Wqkvᵀ) → [attention, the caller's nodes from 'qkv' to 'o'] →
 * MatMul(o, Woᵀ), the weights and RoPE tables as initializers, the cache as
 * past_key/past_value inputs (the attention op copies them into its present
 * outputs, which a decoder loop feeds back).
 */
function decoderGraph(
  p: DecoderProblem, x: DecoderInputs, attentionNodes: NodeSpec[], extraInits: unknown[],
  extraInputs: [string, readonly number[], number][], extraFeeds: Record<string, OrtTensor>,
): Graph {
  const { B, past, dim, heads, kvHeads, dimHead } = p;
  const T = (data: Float32Array, dims: number[]) => new ort!.Tensor('float32', data, dims);
  const rows = decoderRows(p), inner = heads * dimHead;
  const pd = [B, kvHeads, past, dimHead], td = [B, kvHeads, past + 1, dimHead];
  const nodes: NodeSpec[] = [
    { opType: 'RMSNormalization', input: ['x', 'gamma'], output: ['h'], attribute: [intAttr('axis', -1), floatAttr('epsilon', 1e-5)] },
    { opType: 'MatMul', input: ['h', 'wqkv_t'], output: ['qkv'] },
    ...attentionNodes,
    { opType: 'MatMul', input: ['o', 'wo_t'], output: ['y'] },
  ];
  const inits = [
    floatInit('gamma', [dim], x.gamma),
    floatInit('wqkv_t', [dim, rows], transpose(x.wqkv, rows, dim)),
    floatInit('wo_t', [inner, dim], transpose(x.wo, dim, inner)),
    ...ropeTables(past + 1, dimHead, p.theta),
    ...extraInits,
  ];
  return {
    bytes: model(
      nodes,
      [['x', [B, 1, dim]], ['past_key', pd], ['past_value', pd], ...extraInputs],
      [['y', [B, 1, dim]], ['present_key', td], ['present_value', td]],
      [['', 23], ['com.microsoft', 1]],
      inits,
    ),
    feeds: { x: T(x.x, [B, 1, dim]), past_key: T(x.pastK, pd), past_value: T(x.pastV, pd), ...extraFeeds },
    output: 'y',
  };
}

/** The decoder step through opset-23 ops: Split → RotaryEmbedding on q and k → Attention with past_key/past_value. */
function decoderAttentionGraph(p: DecoderProblem, x: DecoderInputs): Graph {
  const { B, heads, kvHeads, dimHead } = p;
  const rope = (name: string, n: number): NodeSpec => ({
    opType: 'RotaryEmbedding', input: [name, 'cos', 'sin', 'position_ids'], output: [`${name}_rot`], attribute: [intAttr('num_heads', n)],
  });
  const nodes: NodeSpec[] = [
    { opType: 'Split', input: ['qkv', 'split'], output: ['q', 'k', 'v'], attribute: [intAttr('axis', 2)] },
    rope('q', heads),
    rope('k', kvHeads),
    {
      opType: 'Attention', input: ['q_rot', 'k_rot', 'v', '', 'past_key', 'past_value'], output: ['o', 'present_key', 'present_value'],
      attribute: [intAttr('q_num_heads', heads), intAttr('kv_num_heads', kvHeads)],
    },
  ];
  const positions = new BigInt64Array(B).fill(BigInt(p.past));
  return decoderGraph(
    p, x, nodes,
    [int64Init('split', [heads * dimHead, kvHeads * dimHead, kvHeads * dimHead])],
    [['position_ids', [B, 1], INT64]],
    { position_ids: new ort!.Tensor('int64', positions, [B, 1]) },
  );
}

/** The decoder step through com.microsoft GroupQueryAttention on the packed qkv, with do_rotary. */
function decoderGqaGraph(p: DecoderProblem, x: DecoderInputs): Graph {
  const { B, past, heads, kvHeads } = p;
  const nodes: NodeSpec[] = [{
    opType: 'GroupQueryAttention', domain: 'com.microsoft',
    input: ['qkv', '', '', 'past_key', 'past_value', 'seqlens_k', 'total_sequence_length', 'cos', 'sin'],
    output: ['o', 'present_key', 'present_value'],
    attribute: [intAttr('num_heads', heads), intAttr('kv_num_heads', kvHeads), intAttr('do_rotary', 1)],
  }];
  return decoderGraph(
    p, x, nodes, [],
    [['seqlens_k', [B], INT32], ['total_sequence_length', [1], INT32]],
    {
      seqlens_k: new ort!.Tensor('int32', new Int32Array(B).fill(past), [B]),
      total_sequence_length: new ort!.Tensor('int32', Int32Array.of(past + 1), [1]),
    },
  );
}

function buildGraph(p: Problem, x: Inputs): Graph {
  const T = (data: Float32Array, dims: number[]) => new ort!.Tensor('float32', data, dims);
  if (p.kind === 'gemm' && x.kind === 'gemm') {
    const { M, K, N } = p;
    if (p.weight) {
      // A weight: an initializer, which onnxruntime prepacks when the session loads (float32 for bf16 rows too).
      return {
        bytes: model([{ opType: 'MatMul', input: ['a', 'b'], output: ['c'] }], [['a', [M, K]]], [['c', [M, N]]], [['', 17]], [floatInit('b', [K, N], x.b)]),
        feeds: { a: T(x.a, [M, K]) },
        output: 'c',
      };
    }
    return {
      bytes: model([{ opType: 'MatMul', input: ['a', 'b'], output: ['c'] }], [['a', [M, K]], ['b', [K, N]]], [['c', [M, N]]], [['', 17]]),
      feeds: { a: T(x.a, [M, K]), b: T(x.b, [K, N]) },
      output: 'c',
    };
  }
  if (p.kind === 'softmax' && x.kind === 'softmax') {
    const dims = [p.rows, p.cols];
    return {
      bytes: model([{ opType: 'Softmax', input: ['x'], output: ['y'], attribute: [intAttr('axis', -1)] }], [['x', dims]], [['y', dims]], [['', 17]]),
      feeds: { x: T(x.x, dims) },
      output: 'y',
    };
  }
  if (p.kind === 'attention' && x.kind === 'attention') {
    const Hkv = p.Hkv ?? p.H;
    const qd = [p.B, p.H, p.Nq, p.d];
    const attrs = [...(p.causal ? [intAttr('is_causal', 1)] : []), ...(p.softcap !== undefined ? [floatAttr('softcap', p.softcap)] : [])];
    if (p.cache) {
      // A decoder's step: the cache as past_key/past_value, the step's own keys as K and V;
      // the op returns the present (past + new) too, as a decoder loop feeds it back.
      const past = p.Nkv - p.Nq;
      const [pastK, newK] = splitPositions(x.k, p.B * Hkv, p.Nkv, past, p.d);
      const [pastV, newV] = splitPositions(x.v, p.B * Hkv, p.Nkv, past, p.d);
      const nd = [p.B, Hkv, p.Nq, p.d], pd = [p.B, Hkv, past, p.d], td = [p.B, Hkv, p.Nkv, p.d];
      return {
        bytes: model(
          [{ opType: 'Attention', input: ['q', 'k', 'v', '', 'past_key', 'past_value'], output: ['y', 'present_key', 'present_value'], attribute: attrs }],
          [['q', qd], ['k', nd], ['v', nd], ['past_key', pd], ['past_value', pd]],
          [['y', qd], ['present_key', td], ['present_value', td]],
          [['', 23]],
        ),
        feeds: { q: T(x.q, qd), k: T(newK, nd), v: T(newV, nd), past_key: T(pastK, pd), past_value: T(pastV, pd) },
        output: 'y',
      };
    }
    const kd = [p.B, Hkv, p.Nkv, p.d];
    return {
      bytes: model(
        [{ opType: 'Attention', input: ['q', 'k', 'v'], output: ['y'], attribute: attrs }],
        [['q', qd], ['k', kd], ['v', kd]],
        [['y', qd]],
        [['', 23]],
      ),
      feeds: { q: T(x.q, qd), k: T(x.k, kd), v: T(x.v, kd) },
      output: 'y',
    };
  }
  if (p.kind === 'block' && x.kind === 'block') {
    const { B, N, dim, heads } = p;
    const inner = heads * p.dimHead;
    const nodes: NodeSpec[] = [
      { opType: 'LayerNormalization', input: ['x', 'gamma', 'beta'], output: ['ln'], attribute: [intAttr('axis', -1), floatAttr('epsilon', 1e-5)] },
      { opType: 'MatMul', input: ['ln', 'wqkv_t'], output: ['qkv'] },
      { opType: 'Split', input: ['qkv', 'split'], output: ['q', 'k', 'v'], attribute: [intAttr('axis', 2)] },
      { opType: 'MultiHeadAttention', domain: 'com.microsoft', input: ['q', 'k', 'v'], output: ['o'], attribute: [intAttr('num_heads', heads)] },
      { opType: 'MatMul', input: ['o', 'wo_t'], output: ['y0'] },
      { opType: 'Add', input: ['y0', 'bo'], output: ['y'] },
    ];
    const inits = [
      floatInit('gamma', [dim], x.gamma),
      floatInit('beta', [dim], x.beta),
      floatInit('wqkv_t', [dim, 3 * inner], transpose(x.wqkv, 3 * inner, dim)),
      int64Init('split', [inner, inner, inner]),
      floatInit('wo_t', [inner, dim], transpose(x.wo, dim, inner)),
      floatInit('bo', [dim], x.bo),
    ];
    return {
      bytes: model(nodes, [['x', [B, N, dim]]], [['y', [B, N, dim]]], [['', 17], ['com.microsoft', 1]], inits),
      feeds: { x: T(x.x, [B, N, dim]) },
      output: 'y',
    };
  }
  if (p.kind === 'decoder' && x.kind === 'decoder') return decoderAttentionGraph(p, x);
  throw new Error(`onnxruntime: inputs of kind ${x.kind} do not match a ${p.kind} problem`);
}

/** Its postinstall downloads CUDA libraries unless told to skip, and fails offline. */
const ORT_INSTALL_HINT =
  'install both with `npm_config_onnxruntime_node_install=skip npm i onnxruntime-node onnx-proto`';

/** Loads both packages once; null when ready, else why not. */
let loaded: Promise<string | null> | undefined;
export function loadOrt(): Promise<string | null> {
  loaded ??= (async () => {
    try {
      ort = require('onnxruntime-node') as OrtModule;
    } catch (e) {
      return `onnxruntime-node is not installed (${firstLine(e)}); ${ORT_INSTALL_HINT}`;
    }
    try {
      proto = require('onnx-proto') as OnnxProto;
    } catch (e) {
      return `onnx-proto is not installed, needed to build the models (${firstLine(e)}); ${ORT_INSTALL_HINT}`;
    }
    return null;
  })();
  return loaded;
}

export function ortVersion(): string {
  return ort?.env.versions?.node ?? ort?.env.versions?.common ?? '?';
}

export async function session(g: Graph, threads: number): Promise<Prepared> {
  // MHSA_BENCH_ORT_PROFILE=prefix: onnxruntime's own per-node profile of every
  // session, written as <prefix>_<date>.json when the session is disposed
  // (summarize with benchmarks/tools/ort-profile.js). For analysis runs only: the
  // profiler adds time to every node.
  const profilePrefix = process.env.MHSA_BENCH_ORT_PROFILE;
  const s = await ort!.InferenceSession.create(g.bytes, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    logSeverityLevel: 3,
    ...(profilePrefix ? { enableProfiling: true, profileFilePrefix: profilePrefix } : {}),
  });
  return {
    run: async () => {
      const r = await s.run(g.feeds);
      return r[g.output].data as Float32Array;
    },
    canonical: g.canonical,
    dispose: async () => {
      if (profilePrefix) s.endProfiling();
      await s.release();
    },
  };
}

export const onnxruntimeImpl: Impl = {
  name: 'onnxruntime',
  label: 'onnxruntime-node',
  maxThreads: 1024,
  timed: {
    gemm: 'session.run of a MatMul model (a, b as inputs), output copied to JS',
    softmax: 'session.run of a Softmax(axis=-1) model',
    attention: 'session.run of an opset-23 Attention model on [B, H, N, d] q, k, v (is_causal for causal)',
    block: 'session.run of LayerNormalization → MatMul → Split → com.microsoft MultiHeadAttention → MatMul → Add (weights as initializers)',
    decoder:
      'session.run of RMSNormalization → MatMul → Split → RotaryEmbedding (q, k) → opset-23 Attention with past_key/past_value → MatMul ' +
      '(weights as initializers; the cache as inputs, the present as outputs)',
  },
  async load() {
    const reason = await loadOrt();
    if (reason === null) this.label = `onnxruntime-node ${ortVersion()} (CPU EP)`;
    return reason;
  },
  supports(p: Problem) {
    if (p.kind === 'attention' && p.window !== undefined) {
      return "sliding windows are the opset-25 Attention's; onnxruntime-node 1.30 implements opset 23 (see onnxruntime-gqa)";
    }
    return null;
  },
  async prepare(p: Problem, x: Inputs, threads: number): Promise<Prepared> {
    return session(buildGraph(p, x), threads);
  },
};

/**
 * Causal attention through com.microsoft GroupQueryAttention, the op
 * onnxruntime's decoder models use: grouped heads, a KV cache as past_key and
 * past_value, sliding windows (local_window_size) and softcap.
 */
export const onnxruntimeGqaImpl: Impl = {
  name: 'onnxruntime-gqa',
  label: 'onnxruntime-node GroupQueryAttention',
  maxThreads: 1024,
  timed: {
    attention: 'session.run of a com.microsoft GroupQueryAttention model on packed q, k, v (a cache as past_key/past_value)',
    decoder:
      'session.run of RMSNormalization → MatMul → com.microsoft GroupQueryAttention (packed qkv, do_rotary, past_key/past_value) → MatMul ' +
      "(onnxruntime's LLaMA export; weights as initializers)",
  },
  async load() {
    const reason = await loadOrt();
    if (reason === null) this.label = `onnxruntime-node ${ortVersion()} com.microsoft GroupQueryAttention`;
    return reason;
  },
  supports(p: Problem) {
    if (p.kind === 'decoder') return null;
    if (p.kind !== 'attention') return 'onnxruntime-gqa runs the attention and decoder workloads only';
    if (!p.causal) return 'GroupQueryAttention is causal only';
    return p.Hkv === undefined && p.window === undefined && p.cache === undefined ? 'onnxruntime-gqa runs the GQA, cache and window workloads' : null;
  },
  async prepare(p: Problem, x: Inputs, threads: number): Promise<Prepared> {
    if (p.kind === 'decoder' && x.kind === 'decoder') return session(decoderGqaGraph(p, x), threads);
    if (p.kind !== 'attention' || x.kind !== 'attention') throw new Error('onnxruntime-gqa: attention and decoder workloads only');
    return session(gqaGraph(p, x), threads);
  },
};

/**
 * The attention workloads through com.microsoft MultiHeadAttention instead:
 * q, k, v re-laid out once (untimed) to its packed [B, N, H·d] inputs;
 * `unidirectional` for causal. The output is re-laid out for the check only.
 */
export const onnxruntimeMhaImpl: Impl = {
  name: 'onnxruntime-mha',
  label: 'onnxruntime-node MultiHeadAttention',
  maxThreads: 1024,
  timed: {
    attention: 'session.run of a com.microsoft MultiHeadAttention model on packed [B, N, H·d] q, k, v (unidirectional for causal)',
  },
  async load() {
    const reason = await loadOrt();
    if (reason === null) this.label = `onnxruntime-node ${ortVersion()} com.microsoft MultiHeadAttention`;
    return reason;
  },
  supports(p: Problem) {
    if (p.kind !== 'attention') return 'onnxruntime-mha runs the attention workloads only';
    return plainAttentionOnly(p);
  },
  async prepare(p: Problem, x: Inputs, threads: number): Promise<Prepared> {
    if (p.kind !== 'attention' || x.kind !== 'attention') throw new Error('onnxruntime-mha: attention workloads only');
    return session(mhaGraph(p, x), threads);
  },
};

function firstLine(e: unknown): string {
  return String(e instanceof Error ? e.message : e).split('\n')[0];
}
