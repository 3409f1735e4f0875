/**
 * The checks of MultiHeadSelfAttention.forward and forwardAsync: x, the
 * options, the weights the block reads in place, and the output, before any
 * stage is planned or run.
 */
import type { AttentionOptions } from '../attention';
import { broadcastsTo } from '../broadcast';
import { detachedError, formatShape, rangeError, resizableError } from '../errors';
import { checkAllocation, fitsAllocationLimit } from '../memory';
import {
  checkKeyPaddingMask,
  checkNoAlias,
  checkTensor,
  isDetached,
  isResizable,
  resultTensor,
  type CheckedTensor,
  type ResultTensor,
  type Tensor,
  type TensorLike,
} from '../tensor';
import type { NamedBuffer } from '../queue';
import { checkOptions, optBoolean } from '../validate';
import type { BlockWeights } from './config';
import { workspaceGrowth, type Workspace } from './plan';
import type { MultiHeadSelfAttentionForwardOptions } from './types';

const FORWARD_KEYS = ['causal', 'mask', 'keyPaddingMask', 'returnWeights', 'out'] as const;

/** x checked as a block's input: [batch, tokens, dim] or [tokens, dim] with the block's dim. */
export function checkBlockInput(fn: string, w: BlockWeights, x: TensorLike) {
  const tx = checkTensor(fn, 'x', x);
  const rank = tx.shape.length;
  if (rank !== 2 && rank !== 3) {
    throw rangeError(fn, `x must be [batch, tokens, dim] or [tokens, dim], received shape ${formatShape(tx.shape)}`);
  }
  if (tx.shape[rank - 1] !== w.dim) {
    throw rangeError(fn, `x.shape[${rank - 1}] (dim) must equal the block's dim = ${w.dim}, received ${tx.shape[rank - 1]}`);
  }
  const twoD = rank === 2;
  return { tx, twoD, batch: twoD ? 1 : tx.shape[0], tokens: tx.shape[rank - 2] };
}

/**
 * One of the caller's weight arrays the block reads in place, transferred away since the
 * constructor: named here, not by the stage that meets it.
 */
export function checkInPlaceWeights(fn: string, w: BlockWeights): void {
  for (const [name, data] of w.inPlaceWeights) {
    if (isDetached(data)) throw detachedError(fn, name);
  }
}

/** A forward call's own buffers by the names its errors use: x, options.out (written), the masks. */
export function callerBuffersOf(x: Float32Array, out: Float32Array, mask?: Float32Array, pad?: Uint8Array): NamedBuffer[] {
  const buffers: NamedBuffer[] = [['x', x], ['options.out', out, true]];
  if (mask) buffers.push(['options.mask', mask]);
  if (pad) buffers.push(['options.keyPaddingMask', pad]);
  return buffers;
}

/**
 * The error of a forwardAsync that failed with one of these buffers detached before it finished
 * (an inner op would name its own argument, "a" or "options.c.data"): the caller's name for it.
 */
export function detachedBeforeFinished(fn: string, buffers: readonly NamedBuffer[]): TypeError | undefined {
  const lost = buffers.find(([, view]) => isDetached(view));
  return lost && new TypeError(`${fn}: ${lost[0]} was detached before the call finished; its result is not defined`);
}

/** A checked forward call: x as [batch, tokens, dim], its output, and attention's options. */
export interface PreparedForward {
  x: Tensor;
  rows: number;
  batch: number;
  tokens: number;
  twoD: boolean;
  out: ResultTensor;
  out3: Tensor;
  attnOptions: AttentionOptions;
  returnWeights: boolean;
  /** The caller's buffers by the names its errors use (x, options.out, the masks). */
  callerBuffers: NamedBuffer[];
}

/**
 * Validates x, the options and the weights read in place; allocates (or
 * checks) the output. pool is the block's idle workspaces, for the allocation
 * check: what the call's workspace would add.
 */
export function prepareForward(
  fn: string,
  w: BlockWeights,
  pool: readonly Workspace[],
  x: TensorLike,
  options: MultiHeadSelfAttentionForwardOptions | undefined,
  mode: 'sync' | 'async',
): PreparedForward {
  const opts = checkOptions<MultiHeadSelfAttentionForwardOptions>(fn, options, FORWARD_KEYS);
  const { tx, twoD, batch, tokens } = checkBlockInput(fn, w, x);
  const causal = optBoolean(fn, 'options.causal', opts.causal, false);
  const returnWeights = optBoolean(fn, 'options.returnWeights', opts.returnWeights, false);
  let mask: CheckedTensor | undefined;
  if (opts.mask !== undefined) {
    const full = [batch, w.heads, tokens, tokens];
    mask = checkTensor(fn, 'options.mask', opts.mask);
    if (!broadcastsTo(mask.shape, full)) {
      throw rangeError(
        fn,
        `options.mask.shape ${formatShape(mask.shape)} must broadcast to [batch, heads, tokens, tokens] = ${formatShape(full)}`,
      );
    }
  }
  const pad = checkKeyPaddingMask(fn, opts.keyPaddingMask, batch, tokens, 'tokens', twoD);

  // Everything this call may allocate, checked before any of it is. The list
  // for the error is built only past the limit: between two forwards, JS runs
  // several times slower than hot, and every allocation here costs
  // (docs/design/block-plans.md).
  const resultFloats = opts.out === undefined ? batch * tokens * w.dim : 0;
  const workspaceFloats = workspaceGrowth(pool, w, batch * tokens);
  const weightFloats = returnWeights ? batch * tokens * tokens * (w.heads + 1) : 0;
  if (!fitsAllocationLimit(resultFloats + workspaceFloats + weightFloats)) {
    checkAllocation(fn, [
      ['the result', resultFloats],
      ['the workspace', workspaceFloats],
      ['the weights', weightFloats],
    ]);
  }
  const out = resultTensor(fn, opts.out, tx.shape);
  checkNoAlias(fn, 'options.out', out.data, 'x', tx.data);
  for (const [name, data] of w.weightViews) checkNoAlias(fn, 'options.out', out.data, name, data);
  checkNoAlias(fn, 'options.out', out.data, 'options.mask', mask?.data);
  checkNoAlias(fn, 'options.out', out.data, 'options.keyPaddingMask', pad);
  checkInPlaceWeights(fn, w);
  const callerBuffers = callerBuffersOf(tx.data, out.data, mask?.data, pad);
  if (mode === 'async') {
    // Checked here, before any stage runs, rather than by the stage that first meets the buffer.
    const resizable = callerBuffers.find(([, view]) => isResizable(view));
    if (resizable) throw resizableError(fn, resizable[0]);
  }

  const attnOptions: AttentionOptions = { heads: w.heads, causal };
  if (mask) attnOptions.mask = mask;
  if (pad) attnOptions.keyPaddingMask = pad;
  return {
    x: { data: tx.data, shape: [batch, tokens, w.dim] },
    rows: batch * tokens,
    batch,
    tokens,
    twoD,
    out,
    out3: { data: out.data, shape: [batch, tokens, w.dim] },
    attnOptions,
    returnWeights,
    callerBuffers,
  };
}
