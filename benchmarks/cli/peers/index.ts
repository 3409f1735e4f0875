/** The peers, in report order. Each is one file in this folder behind the {@link Impl} interface. */
import { jsImpl } from './js';
import { mhsaAllocImpl } from './mhsa-alloc';
import { mhsaUnfusedImpl } from './mhsa-unfused';
import { onnxruntimeGqaImpl, onnxruntimeImpl, onnxruntimeMhaImpl } from './onnxruntime';
import { onnxruntimeInt8Impl } from './onnxruntime-int8';
import { pytorchImpl, pytorchMhaImpl } from './pytorch';
import { tfjsWasmImpl } from './tfjs-wasm';
import type { Impl } from './types';

export type { Impl, Prepared } from './types';

export const PEERS: readonly Impl[] = [onnxruntimeImpl, onnxruntimeMhaImpl, onnxruntimeGqaImpl, onnxruntimeInt8Impl, pytorchImpl, pytorchMhaImpl, mhsaAllocImpl, mhsaUnfusedImpl, tfjsWasmImpl, jsImpl];
