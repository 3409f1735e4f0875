/**
 * A minimal safetensors reader for the reference fixtures (see
 * ../shared/fixtures/README.md): an 8-byte little-endian header length N,
 * N bytes of JSON, then the raw little-endian tensor bytes. Only the dtypes
 * the fixtures use are supported: F32 and U8.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export type SafetensorsDtype = 'F32' | 'U8';

export interface SafetensorsTensor {
  dtype: SafetensorsDtype;
  shape: number[];
  /** A fresh, aligned copy of the tensor's bytes. */
  data: Float32Array | Uint8Array;
}

export interface SafetensorsFile {
  tensors: Record<string, SafetensorsTensor>;
  /** The `__metadata__` object (string values), or {} when absent. */
  metadata: Record<string, string>;
}

const BYTES_PER_ELEMENT: Record<SafetensorsDtype, number> = { F32: 4, U8: 1 };

/** Parses a safetensors image. Throws on anything malformed, naming `source`. */
export function parseSafetensors(bytes: Uint8Array, source = '<buffer>'): SafetensorsFile {
  const fail = (msg: string): never => {
    throw new Error(`safetensors ${source}: ${msg}`);
  };
  if (os.endianness() !== 'LE') fail('this reader assumes a little-endian host');
  if (bytes.length < 8) fail(`file is ${bytes.length} bytes, shorter than the 8-byte header length`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLen = view.getBigUint64(0, true);
  if (headerLen > BigInt(bytes.length - 8)) fail(`header length ${headerLen} exceeds the file size ${bytes.length}`);
  const n = Number(headerLen);
  const dataStart = 8 + n;
  const dataLen = bytes.length - dataStart;

  let header: Record<string, unknown>;
  try {
    header = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset + 8, n).toString('utf8')) as Record<string, unknown>;
  } catch (e) {
    return fail(`header is not valid JSON (${(e as Error).message})`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) fail('header is not a JSON object');

  const metadata: Record<string, string> = {};
  const meta = header.__metadata__;
  if (meta !== undefined) {
    if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) fail('__metadata__ is not an object');
    for (const [k, v] of Object.entries(meta as Record<string, unknown>)) {
      if (typeof v !== 'string') fail(`__metadata__.${k} is not a string`);
      metadata[k] = v as string;
    }
  }

  const tensors: Record<string, SafetensorsTensor> = {};
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const e = entry as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (e.dtype !== 'F32' && e.dtype !== 'U8') fail(`tensor '${name}' has unsupported dtype ${JSON.stringify(e.dtype)}`);
    const dtype = e.dtype as SafetensorsDtype;
    if (!Array.isArray(e.shape) || !e.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      fail(`tensor '${name}' has an invalid shape ${JSON.stringify(e.shape)}`);
    }
    const shape = (e.shape as number[]).slice();
    const offs = e.data_offsets;
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((o) => Number.isSafeInteger(o) && o >= 0)) {
      fail(`tensor '${name}' has invalid data_offsets ${JSON.stringify(offs)}`);
    }
    const [begin, end] = offs as [number, number];
    if (begin > end || end > dataLen) fail(`tensor '${name}' data_offsets [${begin}, ${end}] fall outside the ${dataLen} data bytes`);
    const count = shape.reduce((p, d) => p * d, 1);
    const byteLen = count * BYTES_PER_ELEMENT[dtype];
    if (end - begin !== byteLen) {
      fail(`tensor '${name}' (${dtype} [${shape.join(', ')}]) needs ${byteLen} bytes, data_offsets give ${end - begin}`);
    }
    // Copy into a fresh ArrayBuffer: the source bytes may sit at any alignment.
    const abs = bytes.byteOffset + dataStart + begin;
    const copy = bytes.buffer.slice(abs, abs + byteLen) as ArrayBuffer;
    const data = dtype === 'F32' ? new Float32Array(copy) : new Uint8Array(copy);
    tensors[name] = { dtype, shape, data };
  }
  return { tensors, metadata };
}

/** Reads and parses one .safetensors file. */
export function readSafetensors(file: string): SafetensorsFile {
  return parseSafetensors(fs.readFileSync(file), path.basename(file));
}

/** Where the fixtures are looked for: ../shared/fixtures beside the clone, then $MHSA_FIXTURES. */
export function fixtureCandidates(): string[] {
  const candidates = [path.resolve(__dirname, '../../../shared/fixtures')];
  if (process.env.MHSA_FIXTURES) candidates.push(path.resolve(process.env.MHSA_FIXTURES));
  return candidates;
}

/**
 * The fixtures directory. Throws (never returns undefined) when none of the
 * candidates exists, so a test using it fails loudly instead of skipping.
 */
export function fixturesDir(): string {
  const candidates = fixtureCandidates();
  for (const dir of candidates) {
    if (fs.existsSync(dir) && fs.statSync(dir).isDirectory()) return dir;
  }
  throw new Error(
    `reference fixtures not found: looked in ${candidates.join(', ')}` +
      (process.env.MHSA_FIXTURES ? '' : ' (set MHSA_FIXTURES to the fixtures directory)') +
      '. CI checks out ../shared beside the clone; the fixture tests cannot run without it.',
  );
}

/** One fixture file: its name (without .safetensors), metadata op and parsed config, and contents. */
export interface LoadedFixture {
  name: string;
  op: string;
  config: Record<string, unknown>;
  file: SafetensorsFile;
}

/** Every fixture in {@link fixturesDir}, sorted by name. Throws if the directory or a file is unusable. */
export function loadFixtures(): LoadedFixture[] {
  const dir = fixturesDir();
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.safetensors'))
    .sort()
    .map((f) => {
      const file = readSafetensors(path.join(dir, f));
      if (file.metadata.op === undefined) throw new Error(`fixture ${f} has no __metadata__.op`);
      const config = JSON.parse(file.metadata.config ?? '{}') as Record<string, unknown>;
      return { name: f.slice(0, -'.safetensors'.length), op: file.metadata.op, config, file };
    });
}
