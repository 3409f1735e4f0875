import { types } from 'node:util';
import { detachedError, formatShape, rangeError, typeError } from './errors';
import { Descriptor, native, type NativeStage } from './native';
import { runAsync, type NamedBuffer } from './queue';
import { checkNoAlias, checkTensor, isDetached, resultTensor, splitHeads, type StridedTensor, type Tensor, type TensorLike } from './tensor';
import { checkOptions, optBoolean, optEnum, optFiniteNumber, optPositiveInteger } from './validate';

/** Options of {@link rope} and {@link ropeAsync}. */
export interface RopeOptions {
  /**
   * The position of each token: an Int32Array of `seq` values shared by the
   * batch, or `batch·seq` values (entry b's tokens at `b·seq …`). Each ≥ 0.
   * Default: `offset`, `offset + 1`, ….
   */
  positions?: Int32Array;
  /** The first token's position when `positions` is not given (a KV cache's length). Default 0. */
  offset?: number;
  /** Base of the rotation frequencies, `theta^(−2i / rotaryDim)`. Default 10000. */
  theta?: number;
  /** How many of each head's features rotate (even); the rest pass unchanged. Default headDim. */
  rotaryDim?: number;
  /**
   * false (default): features i and i + rotaryDim/2 form a pair (rotate-half:
   * LLaMA, Mistral, GPT-NeoX). true: features 2i and 2i+1 do (GPT-J).
   */
  interleaved?: boolean;
  /** `'bhsd'` (default): [batch, heads, seq, headDim]; `'bshd'`: [batch, seq, heads, headDim]. */
  layout?: 'bhsd' | 'bshd';
  /** Number of heads; required when x is 3-D [batch, seq, heads·headDim] (read as 'bshd'). */
  heads?: number;
  /** Where to write the result; x's shape. May be x itself (in place). */
  out?: Tensor;
}

const KNOWN = ['positions', 'offset', 'theta', 'rotaryDim', 'interleaved', 'layout', 'heads', 'out'] as const;
const LAYOUT_CODE = { bhsd: 0, bshd: 1 } as const;
/** The optional strides of a rope descriptor (native/ops/descriptor_layouts.h). */
const STRIDE_FIELDS = ['x.strides[0]', 'x.strides[1]', 'x.strides[2]'] as const;
/** RoFormer's and LLaMA's base, when none is given. */
const DEFAULT_THETA = 10000;

function prepareRope(fn: string, x: TensorLike, options?: RopeOptions) {
  const opts = checkOptions<RopeOptions>(fn, options, KNOWN);
  const tx = checkTensor(fn, 'x', x);
  const heads = optPositiveInteger(fn, 'options.heads', opts.heads);
  let layout = optEnum(fn, 'options.layout', opts.layout, ['bhsd', 'bshd'] as const) ?? 'bhsd';
  let shape4: number[];
  if (tx.shape.length === 3) {
    if (heads === undefined) throw rangeError(fn, `options.heads is required when x is 3-D [batch, seq, heads·headDim], received shape ${formatShape(tx.shape)}`);
    if (opts.layout !== undefined && layout !== 'bshd') throw rangeError(fn, `options.layout must be 'bshd' (or absent) when x is 3-D, received '${layout}'`);
    layout = 'bshd';
    shape4 = splitHeads(fn, 'x', tx, heads, 'options.heads');
  } else if (tx.shape.length === 4) {
    if (heads !== undefined && heads !== tx.shape[layout === 'bshd' ? 2 : 1]) {
      throw rangeError(fn, `options.heads must match x's heads axis (${tx.shape[layout === 'bshd' ? 2 : 1]}) when x is 4-D, received ${heads}`);
    }
    shape4 = [...tx.shape];
  } else {
    throw rangeError(fn, `x must have 4 dims (or 3 with options.heads), received shape ${formatShape(tx.shape)}`);
  }
  const [batch, seq, headDim] = [shape4[0], shape4[layout === 'bshd' ? 1 : 2], shape4[3]];
  const rotaryDim = opts.rotaryDim === undefined ? headDim : optPositiveInteger(fn, 'options.rotaryDim', opts.rotaryDim)!;
  if (opts.rotaryDim === undefined && headDim % 2 !== 0) {
    throw rangeError(fn, `x's headDim must be even to rotate all of it, received ${headDim}; give an even options.rotaryDim below it`);
  }
  if (rotaryDim % 2 !== 0 || rotaryDim > headDim) {
    throw rangeError(fn, `options.rotaryDim must be even and at most headDim = ${headDim}, received ${rotaryDim}`);
  }
  const theta = optFiniteNumber(fn, 'options.theta', opts.theta) ?? DEFAULT_THETA;
  if (!(theta > 0)) throw rangeError(fn, `options.theta must be above 0, received ${theta}`);
  const interleaved = optBoolean(fn, 'options.interleaved', opts.interleaved, false);
  const positions = checkPositions(fn, opts.positions, batch, seq);
  let offset = 0;
  if (opts.offset !== undefined) {
    if (positions) throw rangeError(fn, 'options.offset and options.positions cannot both be given');
    if (typeof opts.offset !== 'number') throw typeError(fn, 'options.offset', 'a number', opts.offset);
    if (!Number.isSafeInteger(opts.offset) || opts.offset < 0) {
      throw rangeError(fn, `options.offset must be a non-negative integer, received ${opts.offset}`);
    }
    offset = opts.offset;
  }
  const out = resultTensor(fn, opts.out, tx.shape);
  checkNoAlias(fn, 'options.out', out.data, 'x', tx.data, true);
  checkNoAlias(fn, 'options.out', out.data, 'options.positions', positions);
  const positionsShape = positions ? (positions.length === seq ? [seq] : [batch, seq]) : null;
  const args = (): unknown[] => [
    tx.data, out.data, positions ?? null,
    new Descriptor('rope').number('layout', LAYOUT_CODE[layout]).shape('x.shape', shape4).shape('out.shape', shape4)
      .number('rotaryDim', rotaryDim).number('theta', theta).flag('interleaved', interleaved)
      .number('offset', offset).shape('positions.shape', positionsShape).done(),
  ];
  const buffers: NamedBuffer[] = [['x', tx.data], ['options.out', out.data, true]];
  if (positions) buffers.push(['options.positions', positions]);
  return { fn, args, result: out.result, buffers };
}

/** options.positions: undefined, or an Int32Array of seq or batch·seq values (checked ≥ 0 by the addon). */
function checkPositions(fn: string, value: unknown, batch: number, seq: number): Int32Array | undefined {
  if (value === undefined) return undefined;
  if (!types.isInt32Array(value)) throw typeError(fn, 'options.positions', 'an Int32Array of seq or batch·seq positions', value);
  if (isDetached(value)) throw detachedError(fn, 'options.positions');
  if (value.length !== seq && value.length !== batch * seq) {
    throw rangeError(fn, `options.positions.length must be seq = ${seq} or batch·seq = ${batch * seq}, received ${value.length}`);
  }
  return value;
}

/**
 * Rotary position embedding (RoPE): turns each pair of a head's first
 * `rotaryDim` features by `position · theta^(−2i / rotaryDim)` radians,
 * the angles taken in double precision. Apply it to q and k before attention.
 *
 * @example
 * const q = tensor(new Float32Array(1 * 8 * 5 * 64).fill(1), [1, 8, 5, 64]); // [batch, heads, seq, headDim]
 * rope(q, { out: q });                          // in place, positions 0..4
 * const k = tensor(new Float32Array(1 * 1 * 64).fill(1), [1, 1, 64]);       // one new token, 3-D packed
 * rope(k, { heads: 2, offset: 5, theta: 500000 }); // shape [1, 1, 64]
 */
export function rope(x: TensorLike, options?: RopeOptions): Tensor {
  const call = prepareRope('rope', x, options);
  native.rope(...call.args());
  return call.result;
}

/**
 * Internal (MultiHeadSelfAttention's decoder): rope in place on a 'bshd' view
 * [batch, seq, heads, headDim] with the strides of its batch, token and head
 * axes (q or k inside the projection's output), token t of entry b at
 * positions[b·seq + t]. Settings as the block's config gives them, already
 * checked; the addon checks the view and the positions when the stage runs.
 */
export function ropeInPlaceStage(
  view: StridedTensor,
  positions: Int32Array,
  settings: { theta?: number; rotaryDim?: number; interleaved?: boolean },
): NativeStage {
  const shape = [...view.shape];
  const strides = view.strides.slice(0, 3);
  const args = (stage?: number): unknown[] => {
    const d = new Descriptor('rope', stage).number('layout', LAYOUT_CODE.bshd).shape('x.shape', shape).shape('out.shape', shape)
      .number('rotaryDim', settings.rotaryDim ?? shape[3]).number('theta', settings.theta ?? DEFAULT_THETA)
      .flag('interleaved', settings.interleaved ?? false).number('offset', 0).shape('positions.shape', [shape[0], shape[1]]);
    STRIDE_FIELDS.forEach((name, i) => d.number(name, strides[i]));
    return [view.data, view.data, positions, d.done()];
  };
  return { kind: 'rope', args };
}

/** {@link rope} computed off the JS thread; invalid arguments reject the promise. */
export function ropeAsync(x: TensorLike, options?: RopeOptions): Promise<Tensor> {
  return runAsync(() => prepareRope('ropeAsync', x, options), (args) => native.rope(...args));
}
