// The addon's raw entry points (found by lib/load-addon.ts) and the descriptor that packs their numeric arguments.
import { loadAddon } from './load-addon';

/** Completion callback of an async native call. */
export type NativeCallback = (error: Error | null) => void;

/** The addon's raw entry points (positional, already validated by lib/). */
export interface NativeAddon {
  matmul(...args: unknown[]): void;
  layerNormMatmul(...args: unknown[]): void;
  softmax(...args: unknown[]): void;
  attention(...args: unknown[]): void;
  layerNorm(...args: unknown[]): void;
  rope(...args: unknown[]): void;
  /** New positions' keys and values copied into a KVCache's storage, rounded there if it is bf16. */
  cacheAppend(...args: unknown[]): void;
  /** Runs the stages in order as one call (one async job with done): [kind, ...that op's arguments] each. */
  sequence(stages: unknown[][], done?: NativeCallback): void;
  packedSize(desc: Float64Array): number;
  /** Elements from the view's start to its first 64-byte boundary. */
  alignedOffset(view: Float32Array | Uint16Array | Int8Array): number;
  /**
   * Each op's buffer arguments by name, in order (the descriptor follows them), and its descriptor's
   * fields in order, [kind, name] (native/ops/descriptor_layouts.h).
   */
  descriptorLayouts(): Record<DescriptorOp, DescriptorLayout>;
  /** The checked header of a safetensors image, or the error to throw (native/formats/safetensors.h). */
  parseSafetensors(bytes: Uint8Array):
    | { dataStart: number; entries: [string, string, number[], number, number][]; metadata: [string, string][] }
    | { errorKind: 'TypeError' | 'RangeError'; message: string };
  /** out = the little-endian F16 (bf16 false) or BF16 values in bytes; queued when done is given. */
  decodeHalf(bytes: Uint8Array, out: Float32Array, bf16: boolean, done?: NativeCallback): void;
  packMatrix(...args: unknown[]): void;
  /** Measured FMA peak (GFLOP/s) and read bandwidth (GB/s); blocks while measuring. */
  calibrate(threads: number, fmaIterations: number, bandwidthBytes: number): { gflops: number; bf16Gflops: number; gbs: number };
  info(): {
    backend: 'native' | 'wasm32';
    isa: string;
    bf16: string;
    int8: string;
    threads: number;
    activeThreads: number;
    peakActiveThreads: number;
    scratchBytes: number;
    blas: string | null;
    pendingAsync: number;
    pinsAsyncBuffers: boolean;
  };
  setNumThreads(n: number): void;
  /** A result of n floats from the result pool, or null when the pool cannot serve it (native/runtime/result_pool.h). */
  pooledResult(n: number): Float32Array | null;
  resultPool(): {
    unavailable: string | null;
    minBytes: number;
    limitBytes: number;
    heldBytes: number;
    heldBlocks: number;
    liveBytes: number;
    hits: number;
    misses: number;
    countedFreeBytes: number;
    /** V8's count of external memory, which starts collections as it grows (tests only). */
    engineExternalBytes: number;
  };
  setResultPoolLimit(bytes: number): void;
  /** Holds async calls' buffers with a buffer-pinning module's `pinning` export (native/binding/buffer_pinning.h). */
  setBufferPinning(pinning: unknown): void;
  defaultNumThreads: number;
  /** Widest row layerNormMatmul takes (kGemmMaxLayerNormK, native/kernels/gemm.h). */
  layerNormMatmulMaxK: number;
}

export const native: NativeAddon = loadAddon().native;

/**
 * The addon reads MHSA_ISA and MHSA_NUM_THREADS and falls back to its defaults on a value it does
 * not know; a typo there should not pass in silence, so it is named once, as a process warning.
 */
function warnAboutEnvironment(env: NodeJS.ProcessEnv): void {
  const isa = env.MHSA_ISA;
  if (isa !== undefined && isa !== '' && !['avx512', 'avx2', 'portable'].includes(isa)) {
    process.emitWarning(`MHSA_ISA=${JSON.stringify(isa)} is not avx512, avx2 or portable; using the best the CPU has`, 'MhsaWarning');
  }
  const threads = env.MHSA_NUM_THREADS;
  if (threads !== undefined && threads !== '' && !(/^\s*\+?[0-9]+$/.test(threads) && Number(threads) >= 1 && Number(threads) <= 1024)) {
    process.emitWarning(`MHSA_NUM_THREADS=${JSON.stringify(threads)} is not a whole number from 1 to 1024; using one thread per core`, 'MhsaWarning');
  }
}
warnAboutEnvironment(process.env);

/** An op whose numeric arguments travel in a Descriptor (native/ops/descriptor_layouts.h lists their order). */
export type DescriptorOp =
  | 'matmul'
  | 'layerNormMatmul'
  | 'softmax'
  | 'attention'
  | 'layerNorm'
  | 'packedSize'
  | 'packMatrix'
  | 'rope'
  | 'cacheAppend';

/** One field of a descriptor: how it is packed, and the name the addon's errors use. */
export type DescriptorField = [kind: 'shape' | 'number' | 'flag', name: string];

/** An op's native arguments: its buffers in order, then a descriptor of these fields, then the optional group. */
export interface DescriptorLayout {
  args: string[];
  fields: DescriptorField[];
  optional: DescriptorField[];
}

let layouts: Record<DescriptorOp, DescriptorLayout> | undefined;

/** Where the buffer named `arg` goes among op's native arguments. */
export function argIndex(op: DescriptorOp, arg: string): number {
  const i = (layouts ??= native.descriptorLayouts())[op].args.indexOf(arg);
  if (i < 0) throw new Error(`mhsa: internal error: ${op} has no argument ${arg}`);
  return i;
}

/** Where the field `name` starts in a descriptor of op (a shape's rank, or the value), read from the layout over its values. */
export function fieldIndex(op: DescriptorOp, desc: Float64Array, name: string): number {
  const layout = (layouts ??= native.descriptorLayouts())[op];
  let at = 0;
  for (const [kind, field] of [...layout.fields, ...layout.optional]) {
    if (field === name) return at;
    at += kind === 'shape' ? 1 + desc[at] : 1;
  }
  throw new Error(`mhsa: internal error: ${op}'s descriptor has no field ${name}`);
}

/** A descriptor as written, field by field (see recordDescriptors). */
export interface RecordedDescriptor {
  op: DescriptorOp;
  fields: DescriptorField[];
}

let recorded: RecordedDescriptor[] | null = null;
let recording: RecordedDescriptor | null = null;

/**
 * Starts (a list) or stops (null) recording each descriptor's field names as
 * it is built, so a test can check them against the addon's layouts.
 */
export function recordDescriptors(into: RecordedDescriptor[] | null): void {
  recorded = into;
  recording = null;
}

/** Floats of the shared descriptor buffer that each stage of one native.sequence call gets (at most 8 stages). */
const STAGE_REGION = 128;

/**
 * Packs the numeric arguments of one native call (shapes as rank + dims,
 * flags as 0/1, scalars) into a Float64Array: one N-API round trip instead of
 * one per dim. Fields go in the order native/ops/descriptor_layouts.h gives
 * for the op, under the names it gives (test/descriptor-layouts.test.ts). The buffer is reused: the addon reads it before returning.
 * A stage of native.sequence passes its index, and gets a region of the buffer
 * that the other stages' descriptors, built before the same call, do not touch.
 */
export class Descriptor {
  private static readonly buffer = new Float64Array(8 * STAGE_REGION);
  /** views[start][n] = buffer.subarray(start, n), made once: a subarray per call was a measurable share of a small op. */
  private static readonly views: Float64Array[][] = [];
  private readonly start: number;
  private readonly end: number;
  private pos: number;

  constructor(op: DescriptorOp, stage?: number) {
    this.start = stage === undefined ? 0 : stage * STAGE_REGION;
    this.end = stage === undefined ? Descriptor.buffer.length : this.start + STAGE_REGION;
    if (this.end > Descriptor.buffer.length) throw new Error(`mhsa: internal error: no descriptor region for stage ${stage}`);
    this.pos = this.start;
    if (recorded) recorded.push((recording = { op, fields: [] }));
  }

  shape(name: string, dims: readonly number[] | null): this {
    if (recording) recording.fields.push(['shape', name]);
    const b = Descriptor.buffer;
    if (dims === null) {
      b[this.pos++] = 0;
      return this;
    }
    b[this.pos++] = dims.length;
    for (let i = 0; i < dims.length; i++) b[this.pos++] = dims[i];
    return this;
  }

  number(name: string, x: number): this {
    if (recording) recording.fields.push(['number', name]);
    Descriptor.buffer[this.pos++] = x;
    return this;
  }

  flag(name: string, x: boolean): this {
    if (recording) recording.fields.push(['flag', name]);
    Descriptor.buffer[this.pos++] = x ? 1 : 0;
    return this;
  }

  /** The packed values; valid until the next Descriptor of the same region is built. */
  done(): Float64Array {
    // Only a bug can overrun (a stage's shapes are checked, and short): fail before any native call.
    if (this.pos > this.end) throw new Error(`mhsa: internal error: a descriptor overran its region (${this.pos - this.start} floats)`);
    const views = (Descriptor.views[this.start] ??= []);
    return (views[this.pos] ??= Descriptor.buffer.subarray(this.start, this.pos));
  }
}

/**
 * One op of native.sequence, checked and ready: its kind and its native
 * arguments (the descriptor built in stage `index`'s region).
 */
export interface NativeStage {
  kind: 'matmul' | 'layerNormMatmul' | 'attention' | 'layerNorm' | 'rope' | 'cacheAppend';
  args(index: number): unknown[];
}

/** native.sequence's first argument for these stages. */
export function sequenceArgs(stages: readonly NativeStage[]): unknown[][] {
  return stages.map((s, i) => [s.kind, ...s.args(i)]);
}
