/**
 * loadSafetensors: round trips, zero-copy F32 views, exact F16/BF16 decoding,
 * the async form (the same bits, errors as rejections),
 * and a crafted buffer for every malformed-file error (plus a mutation fuzz:
 * any damage gives a loadSafetensors TypeError/RangeError or a valid result,
 * never another error or an out-of-bounds read).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadSafetensors, loadSafetensorsAsync, type Bf16Tensor, type Tensor } from '../lib';
import { pickSeed, rngFor } from './helpers/random';
import { fixtureFiles, readSafetensors } from './helpers/safetensors';

const SEED = pickSeed();

interface Spec {
  dtype: string;
  shape: number[];
  bytes: Uint8Array;
}

/**
 * Builds a safetensors image: the header JSON (padded with spaces to `align`
 * bytes after the 8-byte prefix, unless align is 1), then the tensors' bytes in order.
 */
function build(
  specs: Record<string, Spec>,
  opts: { metadata?: Record<string, string>; align?: number; leading?: number } = {},
): Uint8Array {
  const header: Record<string, unknown> = {};
  if (opts.metadata) header.__metadata__ = opts.metadata;
  let offset = 0;
  for (const [name, s] of Object.entries(specs)) {
    header[name] = { dtype: s.dtype, shape: s.shape, data_offsets: [offset, offset + s.bytes.length] };
    offset += s.bytes.length;
  }
  let json = JSON.stringify(header);
  const align = opts.align ?? 8;
  while ((8 + json.length) % align !== 0) json += ' ';
  return raw(json, concat(Object.values(specs).map((s) => s.bytes)), opts.leading ?? 0);
}

/** 8-byte length + header text + data, optionally preceded by `leading` junk bytes (so byteOffset ≠ 0). */
function raw(headerText: string, data: Uint8Array, leading = 0, headerLen?: bigint): Uint8Array {
  const h = Buffer.from(headerText, 'utf8');
  const out = new Uint8Array(leading + 8 + h.length + data.length);
  new DataView(out.buffer).setBigUint64(leading, headerLen ?? BigInt(h.length), true);
  out.set(h, leading + 8);
  out.set(data, leading + 8 + h.length);
  return out.subarray(leading);
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function f32Bytes(values: number[]): Uint8Array {
  return new Uint8Array(new Float32Array(values).buffer);
}

function u16Bytes(words: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(words.length * 2);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < words.length; i++) dv.setUint16(2 * i, words[i], true);
  return out;
}

/** A header with one entry and `dataBytes` bytes of data. */
function oneEntry(entry: unknown, dataBytes = 16): Uint8Array {
  return raw(JSON.stringify({ t: entry }), new Uint8Array(dataBytes));
}

/** The IEEE 754 half-precision value of a bit pattern, from the definition. */
function halfValue(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0x1f) return m === 0 ? sign * Infinity : NaN;
  if (e === 0) return sign * m * Math.pow(2, -24);
  return sign * Math.pow(2, e - 15) * (1 + m / 1024);
}

function expectError(fnCall: () => unknown, type: typeof TypeError | typeof RangeError, msg: RegExp): void {
  let err: unknown;
  try {
    fnCall();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(type);
  expect((err as Error).message).toMatch(/^loadSafetensors: /);
  expect((err as Error).message).toMatch(msg);
}

describe(`loadSafetensors (seed ${SEED})`, () => {
  test('F32 round trip: zero-copy views over the source, metadata, dtypes', () => {
    const a = [1, -2.5, 3.25, Math.fround(1e-30), -0, Infinity];
    const b = [7];
    const buf = build(
      { a: { dtype: 'F32', shape: [2, 3], bytes: f32Bytes(a) }, b: { dtype: 'F32', shape: [], bytes: f32Bytes(b) } },
      { metadata: { format: 'pt', note: 'x' } },
    );
    const r = loadSafetensors(buf);
    expect(r.metadata).toEqual({ format: 'pt', note: 'x' });
    expect(r.dtypes).toEqual({ a: 'F32', b: 'F32' });
    expect(r.tensors.a.shape).toEqual([2, 3]);
    expect(Array.from(r.tensors.a.data)).toEqual(a);
    expect(Object.is(r.tensors.a.data[4], -0)).toBe(true);
    expect(r.tensors.b.shape).toEqual([]);
    expect(Array.from(r.tensors.b.data)).toEqual(b);
    // Zero copy: a view of the very bytes given.
    expect(r.tensors.a.data.buffer).toBe(buf.buffer);
    expect(r.tensors.a.data.byteOffset).toBe(buf.byteOffset + buf.length - 28);
    buf[buf.length - 28] ^= 0xff;
    expect(r.tensors.a.data[0]).not.toBe(1);
  });

  test('a source view with a nonzero byteOffset, an ArrayBuffer and a path give the same tensors', () => {
    const values = Array.from({ length: 12 }, (_, i) => i * 0.5 - 3);
    const specs = { w: { dtype: 'F32', shape: [3, 4], bytes: f32Bytes(values) } };
    const shifted = build(specs, { leading: 8 });
    expect(shifted.byteOffset).toBe(8);
    const r1 = loadSafetensors(shifted);
    expect(r1.tensors.w.data.buffer).toBe(shifted.buffer); // still aligned: a view
    expect(Array.from(r1.tensors.w.data)).toEqual(values);

    const plain = build(specs);
    const r2 = loadSafetensors(plain.buffer.slice(plain.byteOffset, plain.byteOffset + plain.length) as ArrayBuffer);
    expect(Array.from(r2.tensors.w.data)).toEqual(values);

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-st-'));
    try {
      const file = path.join(dir, 'w.safetensors');
      fs.writeFileSync(file, plain);
      const r3 = loadSafetensors(file);
      expect(r3.tensors.w.shape).toEqual([3, 4]);
      expect(Array.from(r3.tensors.w.data)).toEqual(values);
      expect(() => loadSafetensors(path.join(dir, 'missing.safetensors'))).toThrow(/ENOENT/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('unaligned F32 data is copied (and correct)', () => {
    const values = [1.5, -2, Math.fround(3e10)];
    for (const leading of [1, 2, 3]) {
      const buf = build({ x: { dtype: 'F32', shape: [3], bytes: f32Bytes(values) } }, { leading, align: 4 });
      const r = loadSafetensors(buf);
      expect(Array.from(r.tensors.x.data)).toEqual(values);
      expect(r.tensors.x.data.buffer).not.toBe(buf.buffer);
    }
    // Aligned buffer, but a header whose length puts the data at an odd offset.
    const buf = build(
      { pad: { dtype: 'U8', shape: [1], bytes: new Uint8Array([9]) }, x: { dtype: 'F32', shape: [3], bytes: f32Bytes(values) } },
    );
    const r = loadSafetensors(buf, { filter: (n) => n === 'x' });
    expect(Object.keys(r.tensors)).toEqual(['x']);
    expect(Array.from(r.tensors.x.data)).toEqual(values);
  });

  test('F16: all 65536 bit patterns decode exactly (aligned and unaligned)', () => {
    const words = Uint16Array.from({ length: 65536 }, (_, i) => i);
    for (const leading of [0, 1]) {
      const buf = build({ h: { dtype: 'F16', shape: [256, 256], bytes: u16Bytes(words) } }, { leading, align: 2 });
      const r = loadSafetensors(buf);
      expect(r.dtypes.h).toBe('F16');
      expect(r.tensors.h.shape).toEqual([256, 256]);
      const out = r.tensors.h.data;
      for (let h = 0; h < 65536; h++) {
        const want = halfValue(h);
        if (!Object.is(out[h], want)) throw new Error(`F16 0x${h.toString(16)}: decoded ${out[h]}, expected ${want}`);
      }
    }
  });

  test('F16 spot values: 1, -2, 65504, smallest subnormal, ±0, ±Infinity', () => {
    const buf = build({ h: { dtype: 'F16', shape: [8], bytes: u16Bytes([0x3c00, 0xc000, 0x7bff, 0x0001, 0x0000, 0x8000, 0x7c00, 0xfc00]) } });
    const d = Array.from(loadSafetensors(buf).tensors.h.data);
    expect(d).toEqual([1, -2, 65504, 2 ** -24, 0, -0, Infinity, -Infinity]);
    expect(Object.is(d[5], -0)).toBe(true);
  });

  test('BF16: all 65536 bit patterns decode to the float32 with those top bits', () => {
    const words = Uint16Array.from({ length: 65536 }, (_, i) => i);
    for (const leading of [0, 3]) {
      const buf = build({ b: { dtype: 'BF16', shape: [65536], bytes: u16Bytes(words) } }, { leading, align: 2 });
      const r = loadSafetensors(buf);
      expect(r.dtypes.b).toBe('BF16');
      const bits = new Uint32Array(r.tensors.b.data.buffer, r.tensors.b.data.byteOffset, 65536);
      for (let h = 0; h < 65536; h++) {
        if (bits[h] !== ((h << 16) >>> 0)) throw new Error(`BF16 0x${h.toString(16)}: bits 0x${bits[h].toString(16)}`);
      }
    }
    const spot = loadSafetensors(build({ b: { dtype: 'BF16', shape: [3], bytes: u16Bytes([0x3f80, 0xc000, 0x3e20]) } }));
    expect(Array.from(spot.tensors.b.data)).toEqual([1, -2, 0.15625]);
  });

  test("bf16: 'keep' returns BF16 tensors as Uint16Array views (a copy when misaligned), the rest as before", async () => {
    const words = Uint16Array.from({ length: 64 }, (_, i) => (i * 977) & 0xffff);
    const specs = {
      b: { dtype: 'BF16', shape: [8, 8], bytes: u16Bytes(words) },
      h: { dtype: 'F16', shape: [2], bytes: u16Bytes([0x3c00, 0xc000]) },
      f: { dtype: 'F32', shape: [1], bytes: new Uint8Array(new Float32Array([3]).buffer) },
    };
    for (const leading of [0, 1]) {
      // The data starts on an even offset of the header; one leading byte makes it odd.
      const buf = build(specs, { leading, align: 2 });
      const kept = loadSafetensors(buf, { bf16: 'keep' });
      const b = kept.tensors.b as Bf16Tensor;
      expect(b.dtype).toBe('bf16');
      expect(b.shape).toEqual([8, 8]);
      expect(Array.from(b.data)).toEqual(Array.from(words));
      expect(b.data.buffer === buf.buffer).toBe(leading === 0);
      expect(kept.dtypes.b).toBe('BF16');
      expect(Array.from((kept.tensors.h as Tensor).data)).toEqual([1, -2]);
      expect(Array.from((kept.tensors.f as Tensor).data)).toEqual([3]);
      const keptAsync = await loadSafetensorsAsync(buf, { bf16: 'keep' });
      expect(Array.from((keptAsync.tensors.b as Bf16Tensor).data)).toEqual(Array.from(words));
      const widened = loadSafetensors(buf, { bf16: 'widen' });
      expect(widened.tensors.b.data).toBeInstanceOf(Float32Array);
    }
    expectError(() => loadSafetensors(build(specs), { bf16: 'half' as never }), RangeError, /options\.bf16 must be one of 'widen', 'keep'/);
  });

  test('zero-size tensors, no metadata, an empty header', () => {
    const r = loadSafetensors(build({ e: { dtype: 'F32', shape: [0, 5], bytes: new Uint8Array(0) }, f: { dtype: 'F16', shape: [3, 0], bytes: new Uint8Array(0) } }));
    expect(r.metadata).toEqual({});
    expect(r.tensors.e.shape).toEqual([0, 5]);
    expect(r.tensors.e.data.length).toBe(0);
    expect(r.tensors.f.data.length).toBe(0);
    expect(loadSafetensors(raw('{}', new Uint8Array(0)))).toEqual({ tensors: {}, dtypes: {}, metadata: {} });
  });

  test('other dtypes are a TypeError naming the tensor, unless filtered out', () => {
    for (const dtype of ['U8', 'I64', 'F64', 'BOOL', 'Q4_WEIRD']) {
      const n = dtype === 'I64' || dtype === 'F64' ? 8 : 1;
      const buf = build({
        w: { dtype: 'F32', shape: [2], bytes: f32Bytes([1, 2]) },
        ids: { dtype, shape: [4], bytes: new Uint8Array(4 * n) },
      });
      expectError(() => loadSafetensors(buf), TypeError, new RegExp(`tensor "ids" has dtype ${dtype}; only F32, F16 and BF16`));
      const r = loadSafetensors(buf, { filter: (name) => name !== 'ids' });
      expect(Object.keys(r.tensors)).toEqual(['w']);
    }
  });

  test('bad arguments', () => {
    for (const bad of [undefined, null, 42, {}, [1, 2], new Float32Array(4)]) {
      expect(() => loadSafetensors(bad as never)).toThrow(TypeError);
      expect(() => loadSafetensors(bad as never)).toThrow(/loadSafetensors: expected a file path, Buffer, Uint8Array or ArrayBuffer for source/);
    }
    const ok = build({});
    expect(() => loadSafetensors(ok, { filter: 'w' as never })).toThrow(/expected a function for options.filter/);
    expect(() => loadSafetensors(ok, { fliter: () => true } as never)).toThrow(/unknown key "fliter" in options/);
  });

  describe('malformed files: each a clear error', () => {
    test('truncated: fewer than 8 bytes', () => {
      for (const n of [0, 1, 7]) expectError(() => loadSafetensors(new Uint8Array(n)), RangeError, new RegExp(`truncated: ${n} bytes, shorter than the 8-byte header length`));
    });

    test('header length beyond the file', () => {
      expectError(() => loadSafetensors(raw('{}', new Uint8Array(0), 0, 3n)), RangeError, /header length 3 exceeds the 2 bytes after the 8-byte prefix/);
      expectError(() => loadSafetensors(raw('{}', new Uint8Array(0), 0, 2n ** 64n - 1n)), RangeError, /header length 18446744073709551615 exceeds/);
      // A valid file cut short inside the header.
      const good = build({ w: { dtype: 'F32', shape: [2], bytes: f32Bytes([1, 2]) } });
      expectError(() => loadSafetensors(good.subarray(0, 20)), RangeError, /header length \d+ exceeds the 12 bytes/);
    });

    test('malformed JSON, invalid UTF-8, a header that is not an object', () => {
      expectError(() => loadSafetensors(raw('{"a": ', new Uint8Array(0))), TypeError, /the 6-byte header is not valid UTF-8 JSON/);
      expectError(() => loadSafetensors(raw('', new Uint8Array(0))), TypeError, /the 0-byte header is not valid UTF-8 JSON/);
      const badUtf8 = raw('{"\u00e9": 1}', new Uint8Array(0));
      badUtf8[10] = 0xff;
      expectError(() => loadSafetensors(badUtf8), TypeError, /not valid UTF-8 JSON/);
      expectError(() => loadSafetensors(raw('[1, 2]', new Uint8Array(0))), TypeError, /the header must be a JSON object, received an array/);
      expectError(() => loadSafetensors(raw('null', new Uint8Array(0))), TypeError, /the header must be a JSON object, received null/);
      expectError(() => loadSafetensors(raw('3', new Uint8Array(0))), TypeError, /must be a JSON object, received 3/);
    });

    test('bad __metadata__', () => {
      expectError(() => loadSafetensors(raw('{"__metadata__": [1]}', new Uint8Array(0))), TypeError, /__metadata__ must be an object of strings/);
      expectError(() => loadSafetensors(raw('{"__metadata__": {"a": 1}}', new Uint8Array(0))), TypeError, /__metadata__\["a"\] must be a string, received 1/);
    });

    test('malformed entries', () => {
      expectError(() => loadSafetensors(oneEntry(5)), TypeError, /tensor "t": expected an object \{ dtype, shape, data_offsets \}, received 5/);
      expectError(() => loadSafetensors(oneEntry({ shape: [4], data_offsets: [0, 16] })), TypeError, /tensor "t": dtype must be a string/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: 4, data_offsets: [0, 16] })), TypeError, /tensor "t": shape must be an array of dims, received 4/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: ['4'], data_offsets: [0, 16] })), TypeError, /tensor "t": shape must hold numbers/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [-4], data_offsets: [0, 16] })), RangeError, /tensor "t": shape dims must be integers in \[0, 2\^53 - 1\], received \[-4\]/);
      // A whole number past 2^53: the message gave no limit, as if it were not an integer.
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [2 ** 62, 4], data_offsets: [0, 16] })), RangeError, /shape dims must be integers in \[0, 2\^53 - 1\]/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [2.5], data_offsets: [0, 16] })), RangeError, /shape dims must be integers in \[0, 2\^53 - 1\]/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [4] })), TypeError, /tensor "t": data_offsets must be \[begin, end\], received undefined/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [4], data_offsets: [0] })), TypeError, /data_offsets must be \[begin, end\]/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [4], data_offsets: ['0', 16] })), TypeError, /data_offsets must be \[begin, end\]/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [4], data_offsets: [16, 0] })), RangeError, /tensor "t": data_offsets must be integers with 0 <= begin <= end, received \[16, 0\]/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [4], data_offsets: [-4, 12] })), RangeError, /0 <= begin <= end/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [4], data_offsets: [0.5, 16] })), RangeError, /0 <= begin <= end/);
    });

    test('offsets outside the data', () => {
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [4], data_offsets: [0, 16] }, 15)), RangeError, /tensor "t": data_offsets \[0, 16\] fall outside the 15 data bytes/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [1], data_offsets: [1e15, 1e15 + 4] })), RangeError, /fall outside the 16 data bytes/);
      // Outside the data even for a tensor the filter leaves out.
      expectError(
        () => loadSafetensors(oneEntry({ dtype: 'F32', shape: [8], data_offsets: [0, 32] }), { filter: () => false }),
        RangeError,
        /fall outside/,
      );
    });

    test('overlapping tensors', () => {
      const header = {
        a: { dtype: 'F32', shape: [3], data_offsets: [0, 12] },
        b: { dtype: 'F32', shape: [2], data_offsets: [8, 16] },
      };
      expectError(() => loadSafetensors(raw(JSON.stringify(header), new Uint8Array(16))), RangeError, /tensors "a" \[0, 12\] and "b" \[8, 16\] overlap/);
      const same = { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'BF16', shape: [4], data_offsets: [0, 8] } };
      expectError(() => loadSafetensors(raw(JSON.stringify(same), new Uint8Array(8))), RangeError, /overlap/);
      // Empty tensors overlap nothing; adjacent tensors and gaps are fine.
      const fine = {
        a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] },
        e: { dtype: 'F32', shape: [0], data_offsets: [2, 2] },
        b: { dtype: 'F32', shape: [1], data_offsets: [4, 8] },
        c: { dtype: 'F16', shape: [2], data_offsets: [12, 16] },
      };
      const r = loadSafetensors(raw(JSON.stringify(fine), new Uint8Array(20)));
      expect(Object.keys(r.tensors).sort()).toEqual(['a', 'b', 'c', 'e']);
    });

    test('strict JSON: names given twice, unpaired surrogates, control characters, trailing text, deep nesting', () => {
      const entry = '{"dtype":"F32","shape":[1],"data_offsets":[0,4]}';
      const data = new Uint8Array(8);
      expectError(() => loadSafetensors(raw(`{"a":${entry},"a":${entry}}`, data)), TypeError, /tensor "a" appears twice/);
      expectError(() => loadSafetensors(raw(`{"__metadata__":{},"__metadata__":{}}`, data)), TypeError, /__metadata__ appears twice/);
      expectError(() => loadSafetensors(raw('{"__metadata__":{"k":"1","k":"2"}}', data)), TypeError, /__metadata__ has "k" twice/);
      expectError(
        () => loadSafetensors(raw('{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}', data)),
        TypeError,
        /tensor "a": "dtype" appears twice/,
      );
      expectError(() => loadSafetensors(raw(`{"\\ud800":${entry}}`, data)), TypeError, /not valid UTF-8 JSON \(unpaired surrogate/);
      expectError(() => loadSafetensors(raw(`{"\\udc00x":${entry}}`, data)), TypeError, /unpaired surrogate/);
      expectError(() => loadSafetensors(raw(`{"a\tb":${entry}}`, data)), TypeError, /control character in a string at header byte 3/);
      expectError(() => loadSafetensors(raw(`{"a":${entry}} x`, data)), TypeError, /unexpected text after the JSON value at header byte \d+/);
      expectError(() => loadSafetensors(raw(`{"a":${entry},}`, data)), TypeError, /unexpected '}' at header byte/);
      expectError(() => loadSafetensors(raw(`{"a":01}`, data)), TypeError, /not valid UTF-8 JSON/);
      // Valid JSON, past this reader's depth limit: not called invalid.
      expectError(() => loadSafetensors(raw(`{"a":${'['.repeat(300)}${']'.repeat(300)}}`, data)), RangeError, /header nests deeper than 256 levels, more than this reader follows$/);
      // Nesting inside an ignored key still has to be valid JSON, and shallow enough.
      const deepButFine = `{"a":{"x":${'['.repeat(200)}${']'.repeat(200)},"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`;
      expect(loadSafetensors(raw(deepButFine, data)).tensors.a.data.length).toBe(1);
    });

    test('escapes and whitespace decode as JSON.parse decodes them', () => {
      const names = ['caf\\u00e9', 'tab\\there', 'quote\\"', 'slash\\/', 'emoji \\ud83d\\ude00', 'nul\\u0000', 'plain é 😀'];
      const header = '{ "__metadata__" : { "k\\n" : "v\\u00e9" } ,\r\n' +
        names.map((n, i) => ` "${n}" :\t{ "shape" : [ 1 ] , "extra" : { "ignored" : [ true, null, 1.5e3 ] }, "dtype" : "F32" , "data_offsets" : [ ${4 * i} , ${4 * i + 4} ] }`).join(' ,\n') +
        ' }  \n';
      const data = f32Bytes(names.map((_, i) => i + 0.5));
      const r = loadSafetensors(raw(header, data));
      const want = JSON.parse(header) as Record<string, unknown>;
      expect(r.metadata).toEqual(want.__metadata__);
      const wantNames = Object.keys(want).filter((k) => k !== '__metadata__');
      expect(Object.keys(r.tensors).sort()).toEqual(wantNames.sort());
      for (const n of wantNames) {
        const e = want[n] as { data_offsets: [number, number] };
        expect(Array.from(r.tensors[n].data)).toEqual([e.data_offsets[0] / 4 + 0.5]);
        expect(r.tensors[n].shape).toEqual([1]);
      }
      // Numbers in every JSON spelling that is an integer: 4.0, 4e0, 0.4E1; -0 is a zero dim.
      const spelled = loadSafetensors(raw('{"a":{"dtype":"F32","shape":[4.0, 1e0],"data_offsets":[0, 0.16e2]},"z":{"dtype":"F32","shape":[-0],"data_offsets":[0,0]}}', new Uint8Array(16)));
      expect(spelled.tensors.a.shape).toEqual([4, 1]);
      expect(spelled.tensors.z.shape).toEqual([0]);
      expectError(() => loadSafetensors(raw('{"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}}', new Uint8Array(4))), RangeError, /shape dims must be integers in \[0, 2\^53 - 1\], received \[1e400\]/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [4], data_offsets: [2 ** 53, 2 ** 53 + 4] })), RangeError, /0 <= begin <= end, received \[9007199254740992, 9007199254740996\]/);
    });

    test('a detached source is a TypeError', () => {
      const bytes = build({ w: { dtype: 'F32', shape: [1], bytes: f32Bytes([1]) } });
      const copy = bytes.slice();
      structuredClone(copy.buffer, { transfer: [copy.buffer] });
      let err: unknown;
      try {
        loadSafetensors(copy);
      } catch (e) {
        err = e;
      }
      expect(err).toEqual(expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/^loadSafetensors: source is backed by a detached ArrayBuffer/) }));
      // The ArrayBuffer itself, detached: V8's own message named neither the function nor the argument.
      expect(() => loadSafetensors(copy.buffer as ArrayBuffer)).toThrow(/^loadSafetensors: source is a detached ArrayBuffer$/);
    });

    test('shape disagreeing with the byte count', () => {
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [3], data_offsets: [0, 16] })), RangeError, /tensor "t": shape \[3\] of F32 needs 12 bytes, data_offsets \[0, 16\] hold 16/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F16', shape: [2, 2], data_offsets: [0, 16] })), RangeError, /shape \[2, 2\] of F16 needs 8 bytes/);
      expectError(() => loadSafetensors(oneEntry({ dtype: 'I64', shape: [1], data_offsets: [0, 16] }), { filter: () => false }), RangeError, /of I64 needs 8 bytes/);
      // 2^82 bytes, not the saturated 2^55 - 4 an earlier message gave.
      expectError(() => loadSafetensors(oneEntry({ dtype: 'F32', shape: [2 ** 40, 2 ** 40], data_offsets: [0, 16] })), RangeError, /needs 4\.835703278458517e\+24 bytes/);
    });
  });

  test('fuzz: damaged files give a loadSafetensors error or valid tensors, nothing else', () => {
    const rng = rngFor(SEED, 'fuzz');
    const base = build(
      {
        a: { dtype: 'F32', shape: [2, 3], bytes: f32Bytes([1, 2, 3, 4, 5, 6]) },
        h: { dtype: 'F16', shape: [3], bytes: u16Bytes([0x3c00, 0x4000, 0x4200]) },
        b: { dtype: 'BF16', shape: [2], bytes: u16Bytes([0x3f80, 0x4000]) },
      },
      { metadata: { k: 'v' } },
    );
    let ok = 0;
    let failed = 0;
    for (let t = 0; t < 3000; t++) {
      const buf = new Uint8Array(base);
      const kind = Math.floor(rng() * 3);
      let view: Uint8Array = buf;
      if (kind === 0) {
        for (let m = 0; m < 1 + Math.floor(rng() * 4); m++) buf[Math.floor(rng() * buf.length)] = Math.floor(rng() * 256);
      } else if (kind === 1) {
        view = buf.subarray(0, Math.floor(rng() * buf.length));
      } else {
        // Rewrite a digit of the header (offsets, shapes).
        const text = Buffer.from(buf.subarray(8)).toString('latin1');
        const digits = [...text.matchAll(/\d/g)].map((m) => m.index!);
        const at = 8 + digits[Math.floor(rng() * digits.length)];
        buf[at] = 0x30 + Math.floor(rng() * 10);
      }
      try {
        const r = loadSafetensors(view);
        for (const tt of Object.values(r.tensors)) {
          expect(tt.data.length).toBe(tt.shape.reduce((p, d) => p * d, 1));
          if (tt.data.buffer === view.buffer) {
            expect(tt.data.byteOffset).toBeGreaterThanOrEqual(view.byteOffset);
            expect(tt.data.byteOffset + tt.data.byteLength).toBeLessThanOrEqual(view.byteOffset + view.byteLength);
          }
        }
        ok++;
      } catch (e) {
        if (!(e instanceof TypeError || e instanceof RangeError) || !(e as Error).message.startsWith('loadSafetensors: <buffer>: ')) {
          throw new Error(`[seed ${SEED}] case ${t}: unexpected ${String(e)}`);
        }
        failed++;
      }
    }
    expect(ok + failed).toBe(3000);
    expect(failed).toBeGreaterThan(0);
  });

  test('the reference fixtures load the same as the test reader (F32; U8 filtered out)', () => {
    const files = fixtureFiles();
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) {
      const ref = readSafetensors(f.path);
      const r = loadSafetensors(f.path, { filter: (n) => ref.tensors[n].dtype === 'F32' });
      expect(r.metadata).toEqual(ref.metadata);
      for (const [name, t] of Object.entries(ref.tensors)) {
        if (t.dtype !== 'F32') {
          expect(r.tensors[name]).toBeUndefined();
          continue;
        }
        expect(r.tensors[name].shape).toEqual(t.shape);
        expect(Buffer.from(r.tensors[name].data.buffer, r.tensors[name].data.byteOffset, r.tensors[name].data.byteLength).equals(
          Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength),
        )).toBe(true);
      }
    }
  });
});

describe(`loadSafetensorsAsync (seed ${SEED})`, () => {
  const words = Uint16Array.from({ length: 65536 }, (_, i) => i);
  const image = () =>
    build(
      {
        w: { dtype: 'F32', shape: [2, 2], bytes: f32Bytes([1, -2, 3.5, 1e-30]) },
        h: { dtype: 'F16', shape: [256, 256], bytes: u16Bytes(words) },
        b: { dtype: 'BF16', shape: [65536], bytes: u16Bytes(words) },
      },
      { metadata: { format: 'pt' }, leading: 1, align: 2 },
    );

  test('the same tensors as loadSafetensors, bit for bit, from a buffer and from a path', async () => {
    const buf = image();
    const want = loadSafetensors(buf);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-st-')), 'm.safetensors');
    fs.writeFileSync(file, buf);
    try {
      for (const source of [buf, file]) {
        const pending = loadSafetensorsAsync(source);
        expect(pending).toBeInstanceOf(Promise);
        const got = await pending;
        expect(got.metadata).toEqual(want.metadata);
        expect(got.dtypes).toEqual(want.dtypes);
        for (const name of ['w', 'h', 'b']) {
          expect(got.tensors[name].shape).toEqual(want.tensors[name].shape);
          const a = got.tensors[name].data;
          const e = want.tensors[name].data;
          expect(Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(e.buffer, e.byteOffset, e.byteLength))).toBe(true);
        }
      }
      // filter: only the chosen tensors, and another dtype left out is not an error
      const some = await loadSafetensorsAsync(file, { filter: (n) => n === 'h' });
      expect(Object.keys(some.tensors)).toEqual(['h']);
    } finally {
      fs.rmSync(path.dirname(file), { recursive: true, force: true });
    }
  });

  test('errors reject, never throw, and name the async function', async () => {
    const calls: [() => Promise<unknown>, typeof TypeError | typeof RangeError, RegExp][] = [
      [() => loadSafetensorsAsync(42 as never), TypeError, /^loadSafetensorsAsync: expected a file path, Buffer, Uint8Array or ArrayBuffer for source but received the number 42/],
      [() => loadSafetensorsAsync(new Uint8Array(3)), RangeError, /^loadSafetensorsAsync: <buffer>: truncated: 3 bytes/],
      [() => loadSafetensorsAsync(image(), { filter: 1 as never }), TypeError, /^loadSafetensorsAsync: expected a function for options.filter/],
      [
        () => loadSafetensorsAsync(build({ ids: { dtype: 'I64', shape: [1], bytes: new Uint8Array(8) } })),
        TypeError,
        /^loadSafetensorsAsync: <buffer>: tensor "ids" has dtype I64/,
      ],
    ];
    for (const [call, type, message] of calls) {
      let pending: Promise<unknown> | undefined;
      expect(() => {
        pending = call();
      }).not.toThrow();
      await expect(pending).rejects.toThrow(message);
      await expect(pending).rejects.toBeInstanceOf(type);
    }
    await expect(loadSafetensorsAsync(path.join(os.tmpdir(), 'mhsa-no-such-file.safetensors'))).rejects.toThrow(/ENOENT/);
    // A detached source was reported by the native parser under the sync name.
    const gone = image();
    structuredClone(gone.buffer, { transfer: [gone.buffer as ArrayBuffer] });
    await expect(loadSafetensorsAsync(gone)).rejects.toThrow(/^loadSafetensorsAsync: source is backed by a detached ArrayBuffer$/);
  });

  test('a resizable source is refused by the async form (shrinking it mid-conversion freed its bytes: a segfault)', async () => {
    const img = image();
    const Resizable = ArrayBuffer as unknown as new (n: number, o: { maxByteLength: number }) => ArrayBuffer;
    const bytes = new Uint8Array(new Resizable(img.length, { maxByteLength: 2 * img.length }));
    bytes.set(img);
    await expect(loadSafetensorsAsync(bytes)).rejects.toThrow(
      /^loadSafetensorsAsync: source is backed by a resizable ArrayBuffer; async ops need fixed-length buffers$/,
    );
    expect(Array.from(loadSafetensors(bytes).tensors.w.data)).toEqual([1, -2, 3.5, 1e-30].map(Math.fround)); // sync cannot race a resize
  });
});
