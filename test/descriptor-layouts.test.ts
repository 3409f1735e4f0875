/**
 * The order of an op's numeric arguments is defined once, in
 * native/ops/descriptor_layouts.h, which the addon reads through and exports
 * as native.descriptorLayouts(). Here every descriptor lib/ builds, over every
 * public op, both forms and the block's stages, is recorded field by field
 * and compared with that layout: a field lib/ writes out of order, under
 * another name or of another kind fails, and so does an op or an optional
 * group that no call below reaches.
 */
import {
  attention,
  attentionAsync,
  KVCache,
  layerNorm,
  rope,
  ropeAsync,
  matmul,
  matmulAsync,
  MultiHeadSelfAttention,
  prepack,
  softmax,
  softmaxAsync,
  type Tensor,
} from '../lib';
import { native, recordDescriptors, type DescriptorField, type DescriptorOp, type RecordedDescriptor } from '../lib/native';

const layouts = native.descriptorLayouts();

function tensor(shape: number[]): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return { data: Float32Array.from({ length: n }, (_, i) => Math.sin(i) * 0.1), shape };
}

/** Runs `calls` with recording on and returns each descriptor they built. */
async function record(calls: () => unknown): Promise<RecordedDescriptor[]> {
  const seen: RecordedDescriptor[] = [];
  recordDescriptors(seen);
  try {
    await calls();
  } finally {
    recordDescriptors(null);
  }
  return seen;
}

function block(norm: boolean): MultiHeadSelfAttention {
  const dim = 8, heads = 2, dimHead = 4, inner = heads * dimHead;
  return new MultiHeadSelfAttention({
    dim,
    heads,
    dimHead,
    weights: {
      qkvWeight: tensor([3 * inner, dim]),
      qkvBias: tensor([3 * inner]),
      outWeight: tensor([dim, inner]),
      outBias: tensor([dim]),
    },
    norm: norm ? { weight: tensor([dim]), bias: tensor([dim]) } : undefined,
  });
}

async function everyOp(): Promise<void> {
  const a = tensor([3, 5]), b = tensor([5, 4]);
  matmul(a, b);
  matmul(a, tensor([4, 5]), { transposeB: true, c: tensor([4]), alpha: 2, beta: 0.5 });
  matmul(a, prepack(b));
  await matmulAsync(a, b);
  softmax(tensor([2, 7]), { scale: 0.5 });
  await softmaxAsync(tensor([2, 7]));
  layerNorm(tensor([3, 6]), { weight: tensor([6]), eps: 1e-3 });
  const q = tensor([1, 2, 5, 4]);
  for (const layout of ['bhsd', 'bshd', 'bhds'] as const) {
    const shape = layout === 'bshd' ? [1, 5, 2, 4] : layout === 'bhds' ? [1, 2, 4, 5] : [1, 2, 5, 4];
    const t = tensor(shape);
    attention(t, t, t, { layout, causal: true, scale: 0.3 });
  }
  attention(q, q, q, { mask: tensor([5, 5]), returnWeights: true });
  rope(q, { offset: 3 });
  await ropeAsync(tensor([2, 5, 8]), { heads: 2, positions: Int32Array.from([0, 1, 2, 3, 4]), interleaved: true });
  await attentionAsync(q, q, q);
  const cache = new KVCache({ batch: 1, kvHeads: 2, headDim: 4, maxLength: 8, dtype: 'bf16' });
  cache.append(q, q);
  attention(tensor([1, 2, 1, 4]), cache.keys, cache.values);
  const x = tensor([2, 3, 8]);
  block(true).forward(x);
  block(false).forward(x, { causal: true });
  await block(true).forwardAsync(x);
  // The decoder form: rope on a strided view and the cache append as stages.
  const decoder = new MultiHeadSelfAttention({
    dim: 8, heads: 2, kvHeads: 1, dimHead: 4,
    weights: { qkvWeight: tensor([16, 8]), outWeight: tensor([8, 8]) },
    norm: { type: 'rms', weight: tensor([8]) }, rope: {},
  });
  const kv = new KVCache({ batch: 2, kvHeads: 1, headDim: 4, maxLength: 8 });
  decoder.forward(x, { cache: kv, causal: true });
  await decoder.forwardAsync(tensor([2, 1, 8]), { cache: kv, causal: true });
}

function expectLayout(d: RecordedDescriptor): void {
  const layout = layouts[d.op];
  expect(layout).toBeDefined();
  const withOptional: DescriptorField[] = [...layout.fields, ...layout.optional];
  const want = d.fields.length === layout.fields.length ? layout.fields : withOptional;
  expect({ op: d.op, fields: d.fields }).toEqual({ op: d.op, fields: want });
}

test('the addon exports a layout for every op lib/ names, each field a shape, number or flag', () => {
  const ops: DescriptorOp[] = ['matmul', 'layerNormMatmul', 'softmax', 'attention', 'layerNorm', 'packedSize', 'packMatrix', 'rope', 'cacheAppend'];
  expect(Object.keys(layouts).sort()).toEqual([...ops].sort());
  for (const op of ops) {
    expect(layouts[op].fields.length).toBeGreaterThan(0);
    for (const [kind, name] of [...layouts[op].fields, ...layouts[op].optional]) {
      expect(['shape', 'number', 'flag']).toContain(kind);
      expect(name).toMatch(/\S/);
    }
  }
});

test('every descriptor lib/ builds has its op\'s fields, in order, by name and kind', async () => {
  const seen = await record(everyOp);
  expect(seen.length).toBeGreaterThan(10);
  for (const d of seen) expectLayout(d);
});

test('the calls above reach every op, and attention and rope both with and without their optional strides', async () => {
  const seen = await record(everyOp);
  expect(new Set(seen.map((d) => d.op))).toEqual(new Set(Object.keys(layouts)));
  for (const op of ['attention', 'rope'] as const) {
    const lengths = new Set(seen.filter((d) => d.op === op).map((d) => d.fields.length));
    const { fields, optional } = layouts[op];
    expect(optional.length).toBeGreaterThan(0);
    expect({ op, lengths }).toEqual({ op, lengths: new Set([fields.length, fields.length + optional.length]) });
  }
});

test("every native call lib/ makes passes its op's buffers in the addon's order, then the descriptor", async () => {
  const calls: Array<[string, unknown[]]> = [];
  const addon = native as unknown as Record<string, (...args: unknown[]) => unknown>;
  const ops = Object.keys(layouts).filter((op) => op !== 'packedSize');
  const saved = new Map(['sequence', ...ops].map((name) => [name, addon[name]]));
  for (const op of ops) addon[op] = (...args: unknown[]) => (calls.push([op, args]), saved.get(op)!(...args));
  addon.sequence = (stages: unknown, ...rest: unknown[]) => {
    for (const [kind, ...args] of stages as unknown[][]) calls.push([kind as string, args]);
    return saved.get('sequence')!(stages, ...rest);
  };
  try {
    await everyOp();
  } finally {
    for (const [name, fn] of saved) addon[name] = fn;
  }
  expect(new Set(calls.map(([op]) => op))).toEqual(new Set(ops));
  const isFloat64 = (x: unknown) => Object.prototype.toString.call(x) === '[object Float64Array]';
  for (const [op, args] of calls) {
    const buffers = layouts[op as DescriptorOp].args;
    // The buffers (typed arrays, or null for one left out), the descriptor, then at most a callback.
    const shape = args.map((a) => (isFloat64(a) ? 'descriptor' : a === null || ArrayBuffer.isView(a) ? 'buffer' : typeof a));
    const want = [...buffers.map(() => 'buffer'), 'descriptor'];
    expect({ op, shape: shape.slice(0, want.length) }).toEqual({ op, shape: want });
    expect(shape.slice(want.length).every((t) => t === 'function')).toBe(true);
  }
});

test('a descriptor out of order is caught', () => {
  const swapped = [...layouts.softmax.fields].reverse();
  expect(() => expectLayout({ op: 'softmax', fields: swapped })).toThrow();
});

test('the names in a layout are the names the addon\'s errors use', () => {
  // A NaN rank in the first shape of softmax's descriptor: the error names that field.
  const [kind, name] = layouts.softmax.fields[0];
  expect(kind).toBe('shape');
  const desc = Float64Array.from([NaN]);
  expect(() => native.softmax(new Float32Array(1), new Float32Array(1), desc)).toThrow(
    expect.objectContaining({ name: 'RangeError', message: expect.stringContaining(`softmax: ${name} must have`) }),
  );
});
