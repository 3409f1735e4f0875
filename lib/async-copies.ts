/**
 * Private copies for async calls on an addon that cannot hold a buffer's
 * memory while a job computes on it (info().pinsAsyncBuffers false: the
 * Windows package, whose addon is Node-API only; a Node newer than a Linux
 * package's pinning modules). docs/design/async-pinning.md, "Without pinning".
 *
 * When a job leaves the queue, every distinct ArrayBuffer among its
 * typed-array arguments (nested argument arrays too: native.sequence's stages)
 * is copied once, and each view is made again over the copy at the same
 * offset and length, so views that share bytes still share exactly those
 * bytes. Native code then computes on memory that only this module can
 * reach: a caller who transfers a buffer away meanwhile frees nothing under
 * it. When the job ends, each buffer the call writes (NamedBuffer's written
 * flag) is copied back into the caller's, if that is still attached; inputs
 * never are. A detached one rejects in lib/queue.ts, as with pinning.
 *
 * Only the bytes the views cover are copied (from the first one's 64-byte
 * boundary on): an input may view a small part of a large buffer (a tensor of
 * a whole checkpoint file, a batch of a whole dataset). A job's copies serve
 * later jobs of the same sizes once it has ended (at most SPARE_BYTES kept):
 * the first write to fresh memory costs a page fault per page (under wine, a
 * 7 MiB copy took 3.9 ms into a new ArrayBuffer and 0.26 ms into a used one).
 */
import { types } from 'node:util';
import { native } from './native';
import { bufferOf, byteLengthOf, byteOffsetOf, isDetached } from './tensor';
import type { NamedBuffer } from './queue';

let copying: boolean | undefined;

/**
 * Whether async calls take private copies, decided at the first async call: the addon holds no buffers
 * (and is not the WebAssembly build, whose jobs compute before the call returns), or MHSA_ASYNC_COPIES=1
 * asks for them (tests of this path on a machine that pins).
 */
export function asyncCopies(): boolean {
  if (copying === undefined) {
    const n = native.info();
    copying = process.env.MHSA_ASYNC_COPIES === '1' || (!n.pinsAsyncBuffers && n.backend !== 'wasm32');
  }
  return copying;
}

/** Bytes of ended jobs' copies kept for the next jobs' (two jobs hold copies at a time). */
const SPARE_BYTES = 64 * 2 ** 20;
/** Those copies, oldest first: reachable from nothing but this list. */
const spare: ArrayBuffer[] = [];
let spareBytes = 0;

/** A kept copy of exactly this size, or a new one. */
function copyBuffer(bytes: number): ArrayBuffer {
  const i = spare.findIndex((b) => b.byteLength === bytes);
  if (i < 0) return new ArrayBuffer(bytes);
  spareBytes -= bytes;
  return spare.splice(i, 1)[0];
}

/** Keeps an ended job's copy for later ones, dropping the oldest kept beyond SPARE_BYTES. */
function keepCopy(copy: ArrayBuffer): void {
  if (copy.byteLength === 0 || copy.byteLength > SPARE_BYTES) return;
  spare.push(copy);
  spareBytes += copy.byteLength;
  while (spareBytes > SPARE_BYTES) spareBytes -= spare.shift()!.byteLength;
}

/** The part of one caller's ArrayBuffer that a call's views cover, and its copy. */
interface Span {
  start: number;
  end: number;
  copy?: ArrayBuffer;
}

type ViewConstructor = new (buffer: ArrayBuffer, byteOffset: number, length: number) => ArrayBufferView & { BYTES_PER_ELEMENT?: number };

// The engine's own accessor: a subclass or an own property cannot change what a view says it is.
const typedArrayTag = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), Symbol.toStringTag)!.get!;

/** The standard constructor of a view's kind (Float32Array for a subclass of it), and its element size. */
function constructorOf(view: ArrayBufferView): [ViewConstructor, number] {
  if (types.isDataView(view)) return [DataView as unknown as ViewConstructor, 1];
  const Ctor = (globalThis as unknown as Record<string, ViewConstructor & { BYTES_PER_ELEMENT: number }>)[typedArrayTag.call(view) as string];
  return [Ctor, Ctor.BYTES_PER_ELEMENT];
}

/** Each argument, and each element of an argument array, that is a view of a detachable buffer. */
function forEachView(args: readonly unknown[], visit: (view: ArrayBufferView) => void): void {
  for (const arg of args) {
    if (ArrayBuffer.isView(arg)) {
      // A SharedArrayBuffer cannot be detached: its memory lives as long as the job's reference.
      if (!types.isSharedArrayBuffer(bufferOf(arg))) visit(arg);
    } else if (Array.isArray(arg)) {
      forEachView(arg, visit);
    }
  }
}

/** args with each view replaced by the same view of its buffer's copy (arrays rebuilt, never changed). */
function remap(args: readonly unknown[], spans: Map<ArrayBufferLike, Span>): unknown[] {
  return args.map((arg) => {
    if (Array.isArray(arg)) return remap(arg, spans);
    const span = ArrayBuffer.isView(arg) ? spans.get(bufferOf(arg)) : undefined;
    if (span === undefined) return arg;
    const view = arg as ArrayBufferView;
    const [Ctor, size] = constructorOf(view);
    return new Ctor(span.copy!, byteOffsetOf(view) - span.start, byteLengthOf(view) / size);
  });
}

/** A job's private copies: the arguments to hand to native code, and what to do when it ends. */
export interface PrivateCopies {
  args: unknown[];
  /** Once the job has ended: copies what it wrote into the caller's buffers that are still attached. */
  copyBack(): void;
}

/** Copies of the buffers behind args (and behind the call's named buffers), as described above. */
export function privateCopies(args: readonly unknown[], buffers: readonly NamedBuffer[]): PrivateCopies {
  const spans = new Map<ArrayBufferLike, Span>();
  const cover = (view: ArrayBufferView) => {
    const buffer = bufferOf(view);
    const offset = byteOffsetOf(view);
    const start = offset - (offset % 64);
    const end = offset + byteLengthOf(view);
    const span = spans.get(buffer);
    if (span === undefined) spans.set(buffer, { start, end });
    else {
      span.start = Math.min(span.start, start);
      span.end = Math.max(span.end, end);
    }
  };
  forEachView(args, cover);
  forEachView(buffers.map(([, view]) => view), cover);
  for (const [buffer, span] of spans) {
    span.copy = copyBuffer(span.end - span.start);
    new Uint8Array(span.copy).set(new Uint8Array(buffer as ArrayBuffer, span.start, span.end - span.start));
  }
  const written: Array<[ArrayBufferView, Span]> = [];
  for (const [, view, writes] of buffers) {
    const span = writes === true ? spans.get(bufferOf(view)) : undefined;
    if (span !== undefined) written.push([view, span]);
  }
  return {
    args: remap(args, spans),
    copyBack() {
      for (const [view, span] of written) {
        if (isDetached(view)) continue;
        const offset = byteOffsetOf(view);
        const length = byteLengthOf(view);
        new Uint8Array(bufferOf(view) as ArrayBuffer, offset, length).set(new Uint8Array(span.copy!, offset - span.start, length));
      }
      // Native code let go of the copies before the callback that got here.
      for (const span of spans.values()) keepCopy(span.copy!);
    },
  };
}
