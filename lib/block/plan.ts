/**
 * A MultiHeadSelfAttention's workspaces and plans. A forward pass is a list
 * of checked stages (LayerNorm, the QKV projection, attention, the output
 * projection) run by one native.sequence call, over scratch buffers in a
 * workspace that the block reuses across calls; the workspace also keeps the
 * last call's checked stages, for the next call of the same shapes. Why one
 * sequence call, why plans are kept and why scratch is reused rather than
 * allocated per call (with the measurements): docs/design/block-plans.md.
 */
import { attentionOnFusedQkvStage, type AttentionWithWeights } from '../attention';
import { layerNormStage } from '../layernorm';
import { layerNormMatmulStage, matmulStage } from '../matmul';
import { allocateFloats } from '../memory';
import { argIndex, sequenceArgs, type NativeStage } from '../native';
import type { CheckedTensor, Tensor } from '../tensor';
import { CLASS, type BlockWeights } from './config';
import type { PreparedForward } from './forward-args';
import type { MultiHeadSelfAttentionWithWeights } from './types';

/** Scratch buffers of one forward pass, reused across calls. */
export interface Workspace<Plan = CachedPlan> {
  rows: number;
  buffer: Float32Array;
  /** The last forward's checked stages over this buffer, for the next call of the same shapes. */
  plan?: Plan;
}

/** Where a caller's buffer goes in native.sequence's arguments: stages[stage][1 + arg]. */
type Slot = readonly [stage: number, arg: number];

/**
 * A forward pass's checked native arguments, kept by its workspace. Only the
 * caller's buffers differ from one call of the same shapes and options to
 * the next; the rest (the workspace's views, the weights, the descriptors)
 * would be rebuilt and checked again identically, at a cost measured in
 * docs/design/block-plans.md.
 */
export interface CachedPlan {
  /** Shapes and options it was made for (planKey). */
  key: string;
  /** native.sequence's argument, its descriptors copied out of the shared buffer. */
  stages: unknown[][];
  x: Slot;
  out: Slot;
  mask?: Slot;
  pad?: Slot;
}

/** Idle workspaces a block keeps: the native side computes at most two async calls at once. */
const MAX_IDLE_WORKSPACES = 2;

/** Whether the LayerNorm runs as a pass of its own (dim above what the projection fuses), into the workspace. */
function normPass(w: BlockWeights): boolean {
  return w.hasNorm && !w.fusedNorm;
}

/**
 * Floats per token row: the normalized input (with a norm the projection
 * does not apply itself), q, k and v side by side, and the merged heads (with projection).
 */
function rowFloats(w: BlockWeights): number {
  return (normPass(w) ? w.dim : 0) + (w.projectOut ? 4 : 3) * w.innerDim;
}

/**
 * A workspace from pool with room for `rows` token rows of floatsPerRow (the
 * encoder form's by default): an idle one, grown if needed, or a new one.
 */
export function acquireWorkspace<Plan>(pool: Workspace<Plan>[], w: BlockWeights, rows: number, floatsPerRow = rowFloats(w)): Workspace<Plan> {
  const ws: Workspace<Plan> = pool.pop() ?? { rows: 0, buffer: new Float32Array(0) };
  if (ws.rows < rows) {
    ws.buffer = allocateFloats(`${CLASS}.forward`, 'the workspace', rows * floatsPerRow);
    ws.rows = rows;
    ws.plan = undefined;
  }
  return ws;
}

/** Floats the next acquireWorkspace(rows) allocates: none if the idle workspace it would pop is big enough. */
export function workspaceGrowth(pool: readonly Workspace[], w: BlockWeights, rows: number): number {
  const idle = pool[pool.length - 1];
  return idle !== undefined && idle.rows >= rows ? 0 : rows * rowFloats(w);
}

/** Gives a workspace back to pool once its call is over. */
export function releaseWorkspace<Plan>(pool: Workspace<Plan>[], ws: Workspace<Plan>): void {
  // A burst of concurrent forwardAsync calls makes one workspace each; once
  // it is over, keep only as many as can compute at once.
  if (pool.length < MAX_IDLE_WORKSPACES) pool.push(ws);
}

/** Views of a workspace for this call: [xn?, qkv, o?] as [batch, tokens, ·] tensors. */
function views(w: BlockWeights, ws: Workspace, p: PreparedForward): [Tensor | undefined, Tensor, Tensor | undefined] {
  // Region i starts at (sum of the widths before it) · capacity rows; a call uses the first p.rows rows of each.
  const base = ws.rows;
  let at = 0;
  const region = (width: number): Tensor => {
    const t = { data: ws.buffer.subarray(at * base, at * base + p.rows * width), shape: [p.batch, p.tokens, width] };
    at += width;
    return t;
  };
  const xn = normPass(w) ? region(w.dim) : undefined;
  const qkv = region(3 * w.innerDim);
  const o = w.projectOut ? region(w.innerDim) : undefined;
  return [xn, qkv, o];
}

/**
 * The stages of one forward pass, each checked, none run: LayerNorm and the
 * QKV projection (one stage when the LayerNorm is fused into it), attention
 * on the fused QKV output, the output projection, and with returnWeights the
 * average of the heads' weights. One native.sequence call then runs them
 * all, with no return to JS in between (docs/design/block-plans.md: what
 * re-entering JS between stages cost).
 */
function planStages(
  fn: string,
  w: BlockWeights,
  p: PreparedForward,
  ws: Workspace,
): { stages: NativeStage[]; result: Tensor | MultiHeadSelfAttentionWithWeights; slots: Pick<CachedPlan, 'x' | 'out' | 'mask' | 'pad'> } {
  const [xn, qkv, o] = views(w, ws, p);
  const stages: NativeStage[] = [];
  if (w.fusedNorm) {
    stages.push(layerNormMatmulStage(p.x, w.packedQkv, w.fusedNorm, { c: w.bqkv, out: qkv }));
  } else {
    if (xn) stages.push(layerNormStage(p.x, { weight: w.normWeight, bias: w.normBias, eps: w.eps, out: xn }));
    stages.push(matmulStage(xn ?? p.x, w.packedQkv, { c: w.bqkv, out: qkv }));
  }
  const attended = attentionOnFusedQkvStage(fn, qkv, { ...p.attnOptions, out: o ?? p.out3, returnWeights: p.returnWeights });
  const att = stages.push(attended.stage) - 1;
  if (o) stages.push(matmulStage(o, w.packedOut!, { c: w.bo, out: p.out3 }));
  // Argument positions by name, from the addon's own lists (native/ops/descriptor_layouts.h).
  const first = stages[0].kind as 'layerNorm' | 'layerNormMatmul' | 'matmul';
  const slots = {
    x: [0, argIndex(first, first === 'layerNorm' ? 'x' : 'a')] as const,
    out: o ? ([stages.length - 1, argIndex('matmul', 'out')] as const) : ([att, argIndex('attention', 'out')] as const),
    mask: p.attnOptions.mask ? ([att, argIndex('attention', 'mask')] as const) : undefined,
    pad: p.attnOptions.keyPaddingMask ? ([att, argIndex('attention', 'keyPaddingMask')] as const) : undefined,
  };
  if (!p.returnWeights) return { stages, result: p.out.result, slots };
  const perHead = (attended.result as AttentionWithWeights).weights;
  const weights = averageHeads(w, perHead, p, (a, b, opts) => {
    stages.push(matmulStage(a, b, opts));
    return opts.out;
  });
  return { stages, result: { output: p.out.result, weights }, slots };
}

/** The workspace's kept stages with this call's buffers put in, if they were made for p's shapes and options. */
export function cachedStages(p: PreparedForward, ws: Workspace): unknown[][] | undefined {
  const plan = ws.plan;
  if (plan === undefined || p.returnWeights || plan.key !== planKey(p)) return undefined;
  const mask = p.attnOptions.mask as CheckedTensor | undefined;
  setCallerBuffers(plan, p.x.data, p.out.data, mask?.data, p.attnOptions.keyPaddingMask as Uint8Array | undefined);
  return plan.stages;
}

/**
 * New stages for this call (descriptors in the shared buffer: pass them at
 * once), and the plan to keep once the call succeeds (descriptors copied;
 * none with returnWeights, whose weights are allocated per call).
 */
export function newStages(
  fn: string,
  w: BlockWeights,
  p: PreparedForward,
  ws: Workspace,
): { stages: unknown[][]; result: Tensor | MultiHeadSelfAttentionWithWeights; kept?: CachedPlan } {
  const planned = planStages(fn, w, p, ws);
  const stages = sequenceArgs(planned.stages);
  const kept = p.returnWeights ? undefined : { key: planKey(p), stages: ownDescriptors(stages), ...planned.slots };
  return { stages, result: planned.result, kept };
}

/** Head-averaged weights [batch, tokens, tokens]: (1/H)·ones[1, H] · W viewed as [batch, H, tokens²]. */
function averageHeads(
  w: BlockWeights,
  perHead: Tensor,
  p: PreparedForward,
  mm: (a: Tensor, b: Tensor, opts: { alpha: number; out: Tensor }) => Tensor,
): Tensor {
  const T = p.tokens;
  const shape = p.twoD ? [T, T] : [p.batch, T, T];
  // Nothing to average (and [batch, H, T²] below may not be a valid shape when batch is 0).
  if (p.batch === 0 || T === 0) return { data: new Float32Array(0), shape };
  if (w.heads === 1) return { data: perHead.data, shape };
  const data = allocateFloats(`${CLASS}.forward`, 'the weights', p.batch * T * T);
  mm(w.onesHeads, { data: perHead.data, shape: [p.batch, w.heads, T * T] }, {
    alpha: 1 / w.heads,
    out: { data, shape: [p.batch, 1, T * T] },
  });
  return { data, shape };
}

/** What a cached plan depends on besides the workspace: the shapes, and the options that reach a descriptor. */
function planKey(p: PreparedForward): string {
  const mask = p.attnOptions.mask as CheckedTensor | undefined;
  return `${p.batch},${p.tokens},${p.attnOptions.causal ? 1 : 0},${mask ? mask.shape.join('x') : '-'},${p.attnOptions.keyPaddingMask ? 1 : 0}`;
}

/** Puts a call's buffers into a kept plan's slots (null: none). */
function setCallerBuffers(
  plan: CachedPlan,
  x: ArrayBufferView | null,
  out: ArrayBufferView | null,
  mask: ArrayBufferView | null | undefined,
  pad: ArrayBufferView | null | undefined,
): void {
  const put = (slot: Slot | undefined, buffer: ArrayBufferView | null | undefined) => {
    if (slot) plan.stages[slot[0]][1 + slot[1]] = buffer ?? null;
  };
  put(plan.x, x);
  put(plan.out, out);
  put(plan.mask, mask);
  put(plan.pad, pad);
}

/**
 * Empties a kept plan's slots once its call is over: the caller's buffers
 * (x may view a whole dataset) must not stay reachable from an idle workspace.
 */
export function dropCallerBuffers(plan: CachedPlan | undefined): void {
  if (plan) setCallerBuffers(plan, null, null, null, null);
}

/** sequenceArgs' stages with each descriptor copied out of the shared buffer, so they can be passed again later. */
export function ownDescriptors(stages: unknown[][]): unknown[][] {
  return stages.map((stage) => stage.map((arg) => (arg instanceof Float64Array ? arg.slice() : arg)));
}
