/**
 * A minimal safetensors reader for the reference fixtures (see
 * test/fixtures/README.md): an 8-byte little-endian header length N,
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

/** The fixtures in the repository, written by test/fixtures/generate.py; always used. */
export const REPO_FIXTURES = path.resolve(__dirname, '../fixtures');

/** Where fixture cases come from, and how their names are marked in test titles. */
export interface FixtureDir {
  dir: string;
  /** Prepended to each file's name: '' for the repository's own, 'MHSA_FIXTURES/' for the extra directory. */
  prefix: string;
}

/**
 * The fixture directories: test/fixtures, then $MHSA_FIXTURES when set, which ADDS its
 * cases (a file whose name is also in test/fixtures runs twice, once under each name).
 * Throws when a directory is missing, so a mistyped MHSA_FIXTURES fails instead of
 * quietly testing less. MHSA_FIXTURES naming test/fixtures itself adds nothing.
 */
export function fixtureDirs(): FixtureDir[] {
  const dirs: FixtureDir[] = [{ dir: REPO_FIXTURES, prefix: '' }];
  const extra = process.env.MHSA_FIXTURES;
  if (extra) dirs.push({ dir: path.resolve(extra), prefix: 'MHSA_FIXTURES/' });
  for (const { dir, prefix } of dirs) {
    if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) {
      throw new Error(
        prefix
          ? `MHSA_FIXTURES=${extra} is not a directory (unset it to run only the repository's fixtures)`
          : `reference fixtures not found in ${dir}; regenerate them with /usr/bin/python3 test/fixtures/generate.py`,
      );
    }
  }
  if (dirs.length === 2 && fs.realpathSync(dirs[1].dir) === fs.realpathSync(dirs[0].dir)) dirs.pop();
  return dirs;
}

/**
 * Every .safetensors file of {@link fixtureDirs}: its unique name (prefix + file name
 * without .safetensors), its path, and whether it came from $MHSA_FIXTURES.
 */
export function fixtureFiles(): Array<{ name: string; path: string; extra: boolean }> {
  return fixtureDirs().flatMap(({ dir, prefix }) =>
    fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.safetensors'))
      .sort()
      .map((f) => ({ name: prefix + f.slice(0, -'.safetensors'.length), path: path.join(dir, f), extra: prefix !== '' })),
  );
}

/** One fixture file: its name (see {@link fixtureFiles}), metadata op and parsed config, and contents. */
export interface LoadedFixture {
  name: string;
  path: string;
  /** True for a case from $MHSA_FIXTURES (its name starts with 'MHSA_FIXTURES/'). */
  extra: boolean;
  op: string;
  config: Record<string, unknown>;
  file: SafetensorsFile;
}

/**
 * Every fixture: test/fixtures sorted by name, then $MHSA_FIXTURES's. Throws if a
 * directory or a file is unusable.
 */
export function loadFixtures(): LoadedFixture[] {
  return fixtureFiles().map(({ name, path: file, extra }) => {
    const parsed = readSafetensors(file);
    if (parsed.metadata.op === undefined) throw new Error(`fixture ${file} has no __metadata__.op`);
    const config = JSON.parse(parsed.metadata.config ?? '{}') as Record<string, unknown>;
    return { name, path: file, extra, op: parsed.metadata.op, config, file: parsed };
  });
}
