/**
 * What the examples need to make a checkpoint of their own (they download
 * nothing): deterministic random weights and a .safetensors writer.
 */
import * as fs from 'node:fs';
import type { Tensor } from '../lib';

/** Uniform values in [-scale, scale) from a small LCG (deterministic, no dependencies). */
export function random(n: number, seed: number, scale: number): Float32Array {
  let s = seed >>> 0;
  const data = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    data[i] = (s / 2 ** 32 - 0.5) * 2 * scale;
  }
  return data;
}

/** Writes F32 tensors as a .safetensors file: 8-byte LE header length, JSON header (padded to 8), raw data. */
export function saveSafetensors(file: string, tensors: Record<string, Tensor>, metadata: Record<string, string>): number {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    header[name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8);
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  const parts: Uint8Array[] = [prefix, Buffer.from(json)];
  for (const t of Object.values(tensors)) parts.push(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  const bytes = Buffer.concat(parts);
  fs.writeFileSync(file, bytes);
  return bytes.length;
}
