/**
 * A reader for the safetensors format (https://github.com/huggingface/safetensors):
 * an 8-byte little-endian header length N, N bytes of UTF-8 JSON, then the raw
 * little-endian tensor bytes. F32 tensors come back as Float32Array views over
 * the file's bytes (no copy); F16 and BF16 are converted to F32.
 */
import * as fs from 'node:fs';
import { describe } from './errors';
import { checkOptions } from './options';
import type { Tensor } from './tensor';

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
}

/** What {@link loadSafetensors} returns. */
export interface SafetensorsFile {
  /** Every decoded tensor by name, as float32. F32 data is a view over the source bytes. */
  tensors: Record<string, Tensor>;
  /** The dtype each tensor had in the file. */
  dtypes: Record<string, SafetensorsFloatDtype>;
  /** The header's `__metadata__` (string to string), or {} when absent. */
  metadata: Record<string, string>;
}

/** Bytes per element of every dtype the format defines (used to check byte counts). */
const DTYPE_BYTES: Record<string, number> = {
  BOOL: 1, U8: 1, I8: 1, F8_E5M2: 1, F8_E4M3: 1,
  I16: 2, U16: 2, F16: 2, BF16: 2,
  I32: 4, U32: 4, F32: 4,
  I64: 8, U64: 8, F64: 8,
};

const FLOAT_DTYPES: readonly string[] = ['F32', 'F16', 'BF16'];

/** Bytes per element of a dtype, or undefined: own keys only, so "constructor" or "toString" is not a dtype. */
function dtypeBytes(dtype: string): number | undefined {
  return Object.hasOwn(DTYPE_BYTES, dtype) ? DTYPE_BYTES[dtype] : undefined;
}

/** record[key] = value as an own property even for "__proto__" (plain assignment would replace the prototype). */
function setOwn<T>(record: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
}
const KNOWN_OPTIONS = ['filter'] as const;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

interface Entry {
  name: string;
  dtype: string;
  shape: number[];
  begin: number;
  end: number;
}

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
 * shape whose element count disagrees with the byte count. Malformed content
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
 * @throws TypeError for a wrong kind of argument or malformed content, RangeError for
 *   sizes and offsets that do not fit; fs errors (such as ENOENT) for a path that cannot be read.
 */
export function loadSafetensors(
  source: string | Uint8Array | ArrayBuffer,
  options?: LoadSafetensorsOptions,
): SafetensorsFile {
  const fn = 'loadSafetensors';
  const opts = checkOptions<LoadSafetensorsOptions>(fn, options, KNOWN_OPTIONS);
  if (opts.filter !== undefined && typeof opts.filter !== 'function') {
    throw new TypeError(`${fn}: expected a function for options.filter but received ${describe(opts.filter)}`);
  }
  let bytes: Uint8Array;
  let where: string;
  if (typeof source === 'string') {
    bytes = fs.readFileSync(source);
    where = source;
  } else if (source instanceof Uint8Array) {
    bytes = source;
    where = '<buffer>';
  } else if (source instanceof ArrayBuffer) {
    bytes = new Uint8Array(source);
    where = '<buffer>';
  } else {
    throw new TypeError(
      `${fn}: expected a file path, Buffer, Uint8Array or ArrayBuffer for source but received ${describe(source)}`,
    );
  }
  const prefix = `${fn}: ${where}:`;
  const typeErr = (msg: string) => new TypeError(`${prefix} ${msg}`);
  const rangeErr = (msg: string) => new RangeError(`${prefix} ${msg}`);

  // --- header
  if (bytes.length < 8) {
    throw rangeErr(`truncated: ${bytes.length} bytes, shorter than the 8-byte header length`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLen = view.getBigUint64(0, true);
  if (headerLen > BigInt(bytes.length - 8)) {
    throw rangeErr(`header length ${headerLen} exceeds the ${bytes.length - 8} bytes after the 8-byte prefix`);
  }
  const n = Number(headerLen);
  const dataStart = 8 + n;
  const dataLen = bytes.length - dataStart;
  let header: unknown;
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, dataStart));
    header = JSON.parse(text);
  } catch (e) {
    throw typeErr(`the ${n}-byte header is not valid UTF-8 JSON (${(e as Error).message})`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) {
    throw typeErr(`the header must be a JSON object, received ${Array.isArray(header) ? 'an array' : JSON.stringify(header)}`);
  }

  // --- metadata
  const metadata: Record<string, string> = {};
  const meta = (header as Record<string, unknown>).__metadata__;
  if (meta !== undefined) {
    if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) {
      throw typeErr(`__metadata__ must be an object of strings, received ${JSON.stringify(meta)}`);
    }
    for (const [k, v] of Object.entries(meta as Record<string, unknown>)) {
      if (typeof v !== 'string') throw typeErr(`__metadata__[${JSON.stringify(k)}] must be a string, received ${JSON.stringify(v)}`);
      setOwn(metadata, k, v);
    }
  }

  // --- entries: checked in full before anything is decoded
  const entries: Entry[] = [];
  for (const [name, raw] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') continue;
    const t = `tensor ${JSON.stringify(name)}`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      throw typeErr(`${t}: expected an object { dtype, shape, data_offsets }, received ${JSON.stringify(raw)}`);
    }
    const e = raw as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof e.dtype !== 'string') throw typeErr(`${t}: dtype must be a string, received ${JSON.stringify(e.dtype)}`);
    if (!Array.isArray(e.shape)) throw typeErr(`${t}: shape must be an array of dims, received ${JSON.stringify(e.shape)}`);
    const shape: number[] = [];
    for (const d of e.shape as unknown[]) {
      if (typeof d !== 'number') throw typeErr(`${t}: shape must hold numbers, received ${JSON.stringify(e.shape)}`);
      if (!Number.isSafeInteger(d) || d < 0) {
        throw rangeErr(`${t}: shape dims must be non-negative integers, received ${JSON.stringify(e.shape)}`);
      }
      shape.push(d);
    }
    const offs = e.data_offsets;
    if (!Array.isArray(offs) || offs.length !== 2 || offs.some((o) => typeof o !== 'number')) {
      throw typeErr(`${t}: data_offsets must be [begin, end], received ${JSON.stringify(offs)}`);
    }
    const [begin, end] = offs as [number, number];
    if (!Number.isSafeInteger(begin) || !Number.isSafeInteger(end) || begin < 0 || begin > end) {
      throw rangeErr(`${t}: data_offsets must be integers with 0 <= begin <= end, received [${begin}, ${end}]`);
    }
    if (end > dataLen) {
      throw rangeErr(`${t}: data_offsets [${begin}, ${end}] fall outside the ${dataLen} data bytes`);
    }
    const size = dtypeBytes(e.dtype);
    if (size !== undefined) {
      // The element count is bounded by the byte count before it can lose precision.
      let count = 1;
      for (const d of shape) count = Math.min(count * d, Number.MAX_SAFE_INTEGER);
      if (count * size !== end - begin) {
        throw rangeErr(
          `${t}: shape [${shape.join(', ')}] of ${e.dtype} needs ${count * size} bytes, data_offsets [${begin}, ${end}] hold ${end - begin}`,
        );
      }
    }
    entries.push({ name, dtype: e.dtype, shape, begin, end });
  }
  const sorted = entries.filter((e) => e.end > e.begin).sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < sorted.length; i++) {
    const a = sorted[i - 1];
    const b = sorted[i];
    if (b.begin < a.end) {
      throw rangeErr(
        `tensors ${JSON.stringify(a.name)} [${a.begin}, ${a.end}] and ${JSON.stringify(b.name)} [${b.begin}, ${b.end}] overlap`,
      );
    }
  }

  // --- decode the selected tensors
  const selected = opts.filter ? entries.filter((e) => opts.filter!(e.name)) : entries;
  for (const e of selected) {
    if (!FLOAT_DTYPES.includes(e.dtype)) {
      throw typeErr(
        `tensor ${JSON.stringify(e.name)} has dtype ${e.dtype}; only F32, F16 and BF16 are supported` +
          ' (leave it out with options.filter)',
      );
    }
  }
  const tensors: Record<string, Tensor> = {};
  const dtypes: Record<string, SafetensorsFloatDtype> = {};
  for (const e of selected) {
    const abs = bytes.byteOffset + dataStart + e.begin;
    const count = (e.end - e.begin) / DTYPE_BYTES[e.dtype];
    let data: Float32Array;
    if (e.dtype === 'F32') data = decodeF32(bytes.buffer, abs, count);
    else if (e.dtype === 'F16') data = decodeF16(bytes.buffer, abs, count);
    else data = decodeBF16(bytes.buffer, abs, count);
    setOwn(tensors, e.name, { data, shape: e.shape });
    setOwn(dtypes, e.name, e.dtype as SafetensorsFloatDtype);
  }
  return { tensors, dtypes, metadata };
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

/** The count little-endian 16-bit words at offset, whatever the alignment. */
function halfWords(buffer: ArrayBufferLike, offset: number, count: number): Uint16Array {
  if (LITTLE_ENDIAN && offset % 2 === 0) return new Uint16Array(buffer, offset, count);
  const words = new Uint16Array(count);
  const dv = new DataView(buffer, offset, count * 2);
  for (let i = 0; i < count; i++) words[i] = dv.getUint16(2 * i, true);
  return words;
}

/** IEEE half to float, bit-exact: every half is representable as a float. */
function decodeF16(buffer: ArrayBufferLike, offset: number, count: number): Float32Array {
  const src = halfWords(buffer, offset, count);
  const out = new Float32Array(count);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < count; i++) {
    const h = src[i];
    const sign = (h & 0x8000) << 16;
    const exp = (h >> 10) & 0x1f;
    const mant = h & 0x3ff;
    if (exp === 0x1f) {
      bits[i] = sign | 0x7f800000 | (mant << 13); // ±Infinity, NaN (payload kept)
    } else if (exp !== 0) {
      bits[i] = sign | ((exp + 112) << 23) | (mant << 13); // rebias 15 → 127
    } else {
      out[i] = (sign ? -mant : mant) * 2 ** -24; // ±0 and subnormals: exact in float32 (−0 stays −0)
    }
  }
  return out;
}

/** bfloat16 is the top half of a float32. */
function decodeBF16(buffer: ArrayBufferLike, offset: number, count: number): Float32Array {
  const src = halfWords(buffer, offset, count);
  const out = new Float32Array(count);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < count; i++) bits[i] = src[i] << 16;
  return out;
}
