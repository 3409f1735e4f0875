/**
 * What test/doc-examples.test.ts gives the documentation's examples: the
 * checks their trailing comments turn into, the names they use without
 * defining, and the .safetensors files they load.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { MultiHeadSelfAttention, tensor, type Tensor } from '../../lib';
import { makeRng, randomFloat32 } from './random';

const DIM = 768;
const TOKENS = 197;
const random = makeRng(2026);

export function __random(shape: number[], scale = 0.05): Tensor {
  const data = randomFloat32(random, shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) data[i] *= scale;
  return tensor(data, shape);
}

/** [batch, 197, 768], the input of the ViT-B block. */
export function __input(batch: number): Tensor {
  return __random([batch, TOKENS, DIM], 1);
}

export function __vitBlock(): MultiHeadSelfAttention {
  return new MultiHeadSelfAttention({
    dim: DIM,
    heads: 12,
    weights: { qkvWeight: __random([3 * DIM, DIM]), outWeight: __random([DIM, DIM]), outBias: __random([DIM]) },
    norm: { weight: __random([DIM], 1), bias: __random([DIM]) },
  });
}

function fail(where: string, what: string): never {
  throw new Error(`${where}: the example's comment claims ${what}`);
}

function shapeOf(value: unknown, where: string): number[] {
  const shape = (value as { shape?: unknown } | null)?.shape;
  if (!Array.isArray(shape)) fail(where, `a shape, but the value has none (${String(value)})`);
  return shape as number[];
}

export function __expectShape(value: unknown, shape: number[], where: string): void {
  const got = shapeOf(value, where);
  if (JSON.stringify(got) !== JSON.stringify(shape)) fail(where, `shape [${shape}], but it is [${got}]`);
}

/** Each value to the digits the comment shows ("0.090": within half a unit of the third decimal). */
export function __expectClose(data: ArrayLike<number>, shown: string, where: string): void {
  const digits = shown.split(',').map((d) => d.trim());
  if (data.length !== digits.length) fail(where, `${digits.length} values, but there are ${data.length}`);
  digits.forEach((d, i) => {
    const tolerance = 0.5 * 10 ** -(d.split('.')[1] ?? '').length + 1e-6;
    if (!(Math.abs(data[i] - Number(d)) <= tolerance)) fail(where, `[${shown}], but element ${i} is ${data[i]}`);
  });
}

export function __expectTensor(value: unknown, shown: string, shape: number[], where: string): void {
  __expectShape(value, shape, where);
  __expectClose((value as Tensor).data, shown, where);
}

export function __expectEqual(value: unknown, want: unknown, where: string): void {
  if (value !== want) fail(where, `${String(want)}, but it is ${String(value)}`);
}

/** F32 tensors as a .safetensors file. */
function writeSafetensors(file: string, tensors: Record<string, Tensor>): void {
  const header: Record<string, unknown> = {};
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    header[name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - (text.length % 8)) % 8); // the data 8-byte aligned, so F32 tensors are views
  const json = Buffer.from(text);
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  const data = Object.values(tensors).map((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  fs.writeFileSync(file, Buffer.concat([length, json, ...data]));
}

/** model.safetensors and vit.safetensors, with the names the examples read. */
export function writeExampleCheckpoints(dir: string): void {
  const vit = (prefix: string) => ({
    [`${prefix}norm.weight`]: __random([DIM], 1),
    [`${prefix}norm.bias`]: __random([DIM]),
    [`${prefix}to_qkv.weight`]: __random([3 * DIM, DIM]),
    [`${prefix}to_out.0.weight`]: __random([DIM, DIM]),
    [`${prefix}to_out.0.bias`]: __random([DIM]),
  });
  writeSafetensors(path.join(dir, 'model.safetensors'), {
    'blocks.0.attn.to_qkv.weight': __random([3 * DIM, DIM]),
    'blocks.1.attn.to_qkv.weight': __random([3 * DIM, DIM]),
  });
  writeSafetensors(path.join(dir, 'vit.safetensors'), { ...vit('transformer.layers.0.0.'), ...vit('transformer.layers.1.0.') });
}
