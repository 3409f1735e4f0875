/**
 * A reader for the safetensors format (https://github.com/huggingface/safetensors):
 * an 8-byte little-endian header length N, N bytes of UTF-8 JSON, then the raw
 * little-endian tensor bytes. F32 tensors come back as Float32Array views over
 * the file's bytes (no copy); F16 and BF16 are converted to F32, or BF16 kept
 * as Uint16Array views (options.bf16 'keep').
 */
import * as fs from 'node:fs';
import { types } from 'node:util';
import { detachedError, typeError } from './errors';
import { checkOptions, optEnum } from './validate';
import { native, type NativeCallback } from './native';
import { enqueue } from './queue';
import { bufferOf, byteLengthOf, byteOffsetOf, isDetached, type Bf16Tensor, type Int8Tensor, type Tensor } from './tensor';

/** The element types {@link loadSafetensors} returns as float32 tensors. */
export type SafetensorsFloatDtype = 'F32' | 'F16' | 'BF16';

/** Options of {@link loadSafetensors}. */
export interface LoadSafetensorsOptions {
  /**
   * Which tensors to decode, by name. Tensors it rejects are left out of the
   * result and their dtype is not checked (their offsets still are). Use it to
   * load one layer of a large model, or to skip integer buffers such as
   * `position_ids`. Default: every tensor.
   */
  filter?: (name: string) => boolean;
  /**
   * `'widen'` (the default) converts BF16 tensors to float32. `'keep'` returns
   * them as {@link Bf16Tensor}s, Uint16Array views over the source bytes (a
   * copy only when misaligned): no float32 copy of a bf16 checkpoint is ever
   * made. {@link prepack} and `MultiHeadSelfAttention.fromTorch` take them as
   * weights; pass the other ops float32.
   */
  bf16?: 'widen' | 'keep';
  /**
   * `'keep'` returns I8 tensors (a checkpoint's int8 weights) as
   * {@link Int8Tensor}s, Int8Array views over the source bytes, for
   * {@link prepack} with their scales. `'reject'` (the default) treats I8 as
   * any other integer dtype: a TypeError unless filtered out.
   */
  int8?: 'reject' | 'keep';
}

/** What {@link loadSafetensors} returns: T is Tensor, or Tensor | Bf16Tensor with options.bf16 'keep'. */
export interface SafetensorsFile<T = Tensor> {
  /** Every decoded tensor by name, as float32 (or bf16, kept). F32 and kept BF16 data are views over the source bytes. */
  tensors: Record<string, T>;
  /** The dtype each tensor had in the file. */
  dtypes: Record<string, SafetensorsFloatDtype | 'I8'>;
  /** The header's `__metadata__` (string to string), or {} when absent. */
  metadata: Record<string, string>;
}

/** record[key] = value as an own property even for "__proto__" (plain assignment would replace the prototype). */
function setOwn<T>(record: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
}
const KNOWN_OPTIONS = ['filter', 'bf16', 'int8'] as const;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const FLOAT_DTYPES: readonly string[] = ['F32', 'F16', 'BF16'];

/**
 * Reads a `.safetensors` file (a path) or image (a Buffer, Uint8Array or
 * ArrayBuffer) and returns its tensors as float32 {@link Tensor}s.
 *
 * - F32 data is a `Float32Array` view over the source bytes, not a copy (one
 *   copy is made only when a tensor's data does not start on a 4-byte
 *   boundary). Writing to the source therefore changes the tensors, and the
 *   tensors keep the whole source buffer alive.
 * - F16 and BF16 are converted exactly to F32 (±0, subnormals, ±Infinity and
 *   NaN included).
 * - Any other dtype among the selected tensors is a TypeError naming the
 *   tensor; leave such tensors out with `options.filter`.
 *
 * Every structural problem is reported before any tensor is decoded, and no
 * byte outside the source is ever read: a file shorter than 8 bytes, a header
 * length beyond the file, a header that is not a JSON object, a malformed
 * entry, data_offsets outside the data, two tensors whose bytes overlap, or a
 * shape whose element count disagrees with the byte count. The header is
 * parsed strictly, like the format's reference reader: a name given twice
 * or a `\u` escape of an unpaired UTF-16 surrogate is malformed (JSON.parse
 * would accept both). Malformed content
 * (wrong kinds of values) is a TypeError; inconsistent sizes and offsets are a
 * RangeError. Messages start with `loadSafetensors: <source>:`. Gaps between
 * tensors and trailing bytes are allowed.
 *
 * @example
 * import { loadSafetensors } from 'mhsa';
 * const { tensors, metadata } = loadSafetensors('model.safetensors');
 * const w = tensors['blocks.0.attn.to_qkv.weight']; // { data: Float32Array, shape: [2304, 768] }
 *
 * // Only one layer, skipping everything else (including non-float buffers):
 * const layer = loadSafetensors('model.safetensors', { filter: (n) => n.startsWith('blocks.0.') });
 *
 * // A bf16 checkpoint without widening it (its BF16 tensors as Uint16Array views):
 * const kept = loadSafetensors('model.safetensors', { bf16: 'keep' });
 * @throws TypeError for a wrong kind of argument or malformed content, RangeError for
 *   sizes and offsets that do not fit; fs errors (such as ENOENT) for a path that cannot be read.
 */
export function loadSafetensors(
  source: string | Uint8Array | ArrayBuffer,
  options: LoadSafetensorsOptions & { int8: 'keep' },
): SafetensorsFile<Tensor | Bf16Tensor | Int8Tensor>;
export function loadSafetensors(
  source: string | Uint8Array | ArrayBuffer,
  options: LoadSafetensorsOptions & { bf16: 'keep' },
): SafetensorsFile<Tensor | Bf16Tensor>;
export function loadSafetensors(
  source: string | Uint8Array | ArrayBuffer,
  options?: LoadSafetensorsOptions & { bf16?: 'widen' },
): SafetensorsFile;
export function loadSafetensors(
  source: string | Uint8Array | ArrayBuffer,
  options?: LoadSafetensorsOptions,
): SafetensorsFile<Tensor | Bf16Tensor | Int8Tensor>;
export function loadSafetensors(
  source: string | Uint8Array | ArrayBuffer,
  options?: LoadSafetensorsOptions,
): SafetensorsFile<Tensor | Bf16Tensor | Int8Tensor> {
  const fn = 'loadSafetensors';
  const opts = checkLoadOptions(fn, options);
  const { bytes, where } = typeof source === 'string' ? { bytes: fs.readFileSync(source), where: source } : sourceBytes(fn, source);
  const header = checkHeader(fn, bytes, where, opts);
  for (const h of header.halves) native.decodeHalf(h.bytes, h.data, h.bf16);
  return header.result;
}

/**
 * {@link loadSafetensors} without blocking the event loop: the file is read with `fs.promises`,
 * and the F16/BF16 conversions run on the package's async queue and compute threads, like every
 * other async op. Resolves to the same tensors, bit for bit.
 *
 * @example
 * import { loadSafetensorsAsync } from 'mhsa';
 * const { tensors } = await loadSafetensorsAsync('model.safetensors');
 * @returns A promise that rejects, never throws, with the errors {@link loadSafetensors} throws
 *   (messages start with `loadSafetensorsAsync:`).
 */
export async function loadSafetensorsAsync(
  source: string | Uint8Array | ArrayBuffer,
  options: LoadSafetensorsOptions & { int8: 'keep' },
): Promise<SafetensorsFile<Tensor | Bf16Tensor | Int8Tensor>>;
export async function loadSafetensorsAsync(
  source: string | Uint8Array | ArrayBuffer,
  options: LoadSafetensorsOptions & { bf16: 'keep' },
): Promise<SafetensorsFile<Tensor | Bf16Tensor>>;
export async function loadSafetensorsAsync(
  source: string | Uint8Array | ArrayBuffer,
  options?: LoadSafetensorsOptions & { bf16?: 'widen' },
): Promise<SafetensorsFile>;
export async function loadSafetensorsAsync(
  source: string | Uint8Array | ArrayBuffer,
  options?: LoadSafetensorsOptions,
): Promise<SafetensorsFile<Tensor | Bf16Tensor | Int8Tensor>>;
export async function loadSafetensorsAsync(
  source: string | Uint8Array | ArrayBuffer,
  options?: LoadSafetensorsOptions,
): Promise<SafetensorsFile<Tensor | Bf16Tensor | Int8Tensor>> {
  const fn = 'loadSafetensorsAsync';
  const opts = checkLoadOptions(fn, options);
  const { bytes, where } =
    typeof source === 'string' ? { bytes: await fs.promises.readFile(source), where: source } : sourceBytes(fn, source);
  const header = checkHeader(fn, bytes, where, opts);
  // Each conversion reads the source off the JS thread: enqueue refuses it if it is resizable.
  await Promise.all(
    header.halves.map((h) =>
      enqueue(fn, [['source', h.bytes], ['the decoded tensor', h.data, true]], () => [h.bytes, h.data, h.bf16], (a) =>
        native.decodeHalf(a[0] as Uint8Array, a[1] as Float32Array, a[2] as boolean, a[3] as NativeCallback),
      ),
    ),
  );
  return header.result;
}

function checkLoadOptions(fn: string, options: LoadSafetensorsOptions | undefined): LoadSafetensorsOptions {
  const opts = checkOptions<LoadSafetensorsOptions>(fn, options, KNOWN_OPTIONS);
  if (opts.filter !== undefined && typeof opts.filter !== 'function') {
    throw typeError(fn, 'options.filter', 'a function', opts.filter);
  }
  optEnum(fn, 'options.bf16', opts.bf16, ['widen', 'keep'] as const);
  optEnum(fn, 'options.int8', opts.int8, ['reject', 'keep'] as const);
  return opts;
}

/** The bytes of a source that is not a path. */
function sourceBytes(fn: string, source: unknown): { bytes: Uint8Array; where: string } {
  if (types.isUint8Array(source)) {
    if (isDetached(source)) throw detachedError(fn, 'source');
    // A plain view of the same bytes, made with the engine's accessors: a subclass's buffer or
    // byteOffset getter plays no part in where tensors are read from.
    return { bytes: new Uint8Array(bufferOf(source), byteOffsetOf(source), byteLengthOf(source)), where: '<buffer>' };
  }
  if (types.isArrayBuffer(source)) {
    try {
      return { bytes: new Uint8Array(source), where: '<buffer>' };
    } catch {
      throw new TypeError(`${fn}: source is a detached ArrayBuffer`); // the only ArrayBuffer a view cannot be made over
    }
  }
  throw typeError(fn, 'source', 'a file path, Buffer, Uint8Array or ArrayBuffer', source);
}

/** An F16 or BF16 tensor still to convert: its source bytes and its result array. */
interface HalfTensor {
  bytes: Uint8Array;
  data: Float32Array;
  bf16: boolean;
}

/**
 * Checks the header and every selected tensor's dtype, then builds the result: F32 tensors are
 * views (or aligned copies) of the source, F16/BF16 tensors zeroed arrays listed in `halves` for
 * the caller to convert into.
 */
function checkHeader(
  fn: string,
  bytes: Uint8Array,
  where: string,
  opts: LoadSafetensorsOptions,
): { result: SafetensorsFile<Tensor | Bf16Tensor | Int8Tensor>; halves: HalfTensor[] } {
  // The header is parsed and every entry checked against the data in native code
  // (native/formats/safetensors.cc, fuzzed with libFuzzer), before any tensor is decoded.
  const parsed = native.parseSafetensors(bytes);
  if ('errorKind' in parsed) {
    const message = `${fn}: ${where}: ${parsed.message}`;
    throw parsed.errorKind === 'TypeError' ? new TypeError(message) : new RangeError(message);
  }
  const metadata: Record<string, string> = {};
  for (const [key, value] of parsed.metadata) setOwn(metadata, key, value);
  const entries = parsed.entries.map(([name, dtype, shape, begin, end]) => ({ name, dtype, shape, begin, end }));
  const chosen = opts.filter ? entries.filter((e) => opts.filter!(e.name)) : entries;
  if (opts.filter && isDetached(bytes)) throw new TypeError(`${fn}: source was detached by options.filter`);
  const keepInt8 = opts.int8 === 'keep';
  for (const e of chosen) {
    if (!FLOAT_DTYPES.includes(e.dtype) && !(keepInt8 && e.dtype === 'I8')) {
      throw new TypeError(
        `${fn}: ${where}: tensor ${JSON.stringify(e.name)} has dtype ${e.dtype}; only F32, F16 and BF16 are supported` +
          " (I8 with options.int8 'keep'; leave it out with options.filter)",
      );
    }
  }
  const tensors: Record<string, Tensor | Bf16Tensor | Int8Tensor> = {};
  const keepBf16 = opts.bf16 === 'keep';
  const dtypes: Record<string, SafetensorsFloatDtype | 'I8'> = {};
  const halves: HalfTensor[] = [];
  for (const e of chosen) {
    const abs = bytes.byteOffset + parsed.dataStart + e.begin;
    let data: Float32Array;
    if (e.dtype === 'I8') {
      setOwn(tensors, e.name, { data: new Int8Array(bytes.buffer, abs, e.end - e.begin), shape: e.shape, dtype: 'int8' });
      setOwn(dtypes, e.name, 'I8');
      continue;
    }
    if (e.dtype === 'BF16' && keepBf16) {
      setOwn(tensors, e.name, { data: decodeKeptBf16(bytes.buffer, abs, (e.end - e.begin) / 2), shape: e.shape, dtype: 'bf16' });
      setOwn(dtypes, e.name, 'BF16');
      continue;
    }
    if (e.dtype === 'F32') {
      data = decodeF32(bytes.buffer, abs, (e.end - e.begin) / 4);
    } else {
      data = new Float32Array((e.end - e.begin) / 2);
      halves.push({ bytes: new Uint8Array(bytes.buffer, abs, e.end - e.begin), data, bf16: e.dtype === 'BF16' });
    }
    setOwn(tensors, e.name, { data, shape: e.shape });
    setOwn(dtypes, e.name, e.dtype as SafetensorsFloatDtype);
  }
  return { result: { tensors, dtypes, metadata }, halves };
}

/** BF16 values as they are: a view when aligned (and the host is little-endian), else a copy. */
function decodeKeptBf16(buffer: ArrayBufferLike, offset: number, count: number): Uint16Array {
  if (LITTLE_ENDIAN && offset % 2 === 0) return new Uint16Array(buffer, offset, count);
  const out = new Uint16Array(count);
  const dv = new DataView(buffer, offset, count * 2);
  for (let i = 0; i < count; i++) out[i] = dv.getUint16(2 * i, true);
  return out;
}

/** A view when aligned (and the host is little-endian), else a copy. */
function decodeF32(buffer: ArrayBufferLike, offset: number, count: number): Float32Array {
  if (LITTLE_ENDIAN && offset % 4 === 0) return new Float32Array(buffer, offset, count);
  const out = new Float32Array(count);
  if (LITTLE_ENDIAN) {
    new Uint8Array(out.buffer).set(new Uint8Array(buffer, offset, count * 4));
  } else {
    const dv = new DataView(buffer, offset, count * 4);
    for (let i = 0; i < count; i++) out[i] = dv.getFloat32(4 * i, true);
  }
  return out;
}
