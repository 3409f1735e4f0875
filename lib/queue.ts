/**
 * The async job queue. Native work runs one job at a time on the addon's own
 * dispatcher thread (which drives the shared compute pool); this queue keeps
 * at most MAX_IN_FLIGHT jobs handed to native code, so the dispatcher always
 * has the next job ready, and holds the rest here. A job's buffers are checked
 * again when it leaves the queue: one detached while waiting rejects instead
 * of running. One detached after that (queued in the addon, or computing)
 * cannot free the memory under the native code, which holds it until the job
 * ends (where info().pinsAsyncBuffers), or computes on private copies of it
 * (where not: lib/async-copies.ts); the call then rejects, naming the buffer.
 */
import { asyncCopies, privateCopies, type PrivateCopies } from './async-copies';
import { resizableError } from './errors';
import { isDetached, isResizable } from './tensor';
import type { NativeCallback } from './native';

const MAX_IN_FLIGHT = 2;

/**
 * A buffer a call reads or writes, with the argument name its errors use ('q', 'options.out'); written
 * true for one the call writes (its result, `out`, an in-place operand), which private copies give back.
 */
export type NamedBuffer = readonly [name: string, view: ArrayBufferView, written?: boolean];

/** The name of the first buffer that fails test, or undefined. */
function firstWhere(buffers: readonly NamedBuffer[], test: (view: ArrayBufferView) => boolean): string | undefined {
  return buffers.find(([, view]) => test(view))?.[0];
}

interface Waiting {
  fn: string;
  buffers: readonly NamedBuffer[];
  /** The native call's arguments, made when the job leaves the queue. */
  args: () => unknown[];
  /** Makes the native call: args(), or their private copies, then the callback. */
  invoke: (args: unknown[]) => void;
  resolve: () => void;
  reject: (e: unknown) => void;
}

const waiting: Waiting[] = [];
let inFlight = 0;

/** Number of async ops waiting in the queue, and handed to native code. */
export function queueStats(): { queued: number; inFlight: number } {
  return { queued: waiting.length, inFlight };
}

/** Native messages start with the sync name ("matmul: ..."); name the async function instead. */
function renameError(e: unknown, fn: string): unknown {
  // Not `instanceof`: errors made by the addon belong to Node's main context, which is not this one under vm or jest.
  if (typeof e === 'object' && e !== null && typeof (e as Error).message === 'string') {
    const base = fn.replace(/Async$/, '');
    const err = e as Error;
    if (base !== fn && err.message.startsWith(`${base}: `)) err.message = `${fn}: ${err.message.slice(base.length + 2)}`;
  }
  return e;
}

function pump(): void {
  while (inFlight < MAX_IN_FLIGHT && waiting.length > 0) {
    const job = waiting.shift()!;
    const detached = firstWhere(job.buffers, isDetached);
    if (detached !== undefined) {
      job.reject(new TypeError(`${job.fn}: ${detached} was detached while the call waited in the queue, before it started`));
      continue;
    }
    inFlight++;
    let settled = false;
    let copies: PrivateCopies | undefined;
    const done: NativeCallback = (error) => {
      if (settled) return;
      settled = true;
      inFlight--;
      // Whatever the job wrote is the caller's now, as if it had computed in place.
      copies?.copyBack();
      // The addon kept the memory of every buffer allocated until now (async_job.cc), so a buffer
      // transferred away mid-call cost nothing but the call's result, which is not defined.
      // isDetached asks the engine, never the caller's getters, so nothing here can throw.
      const lost = firstWhere(job.buffers, isDetached);
      if (error) job.reject(renameError(error, job.fn));
      else if (lost !== undefined)
        job.reject(new TypeError(`${job.fn}: ${lost} was detached while the call ran; its result is not defined`));
      else job.resolve();
      pump();
    };
    try {
      const args = job.args();
      if (asyncCopies()) copies = privateCopies(args, job.buffers);
      job.invoke([...(copies?.args ?? args), done]);
    } catch (e) {
      // The native side validated synchronously and threw: nothing was queued there.
      settled = true;
      inFlight--;
      job.reject(renameError(e, job.fn));
    }
  }
}

/**
 * Queues a native call, invoke(args() + [done]); resolves when its callback reports success. Rejects
 * at once if a buffer is resizable: shrinking one releases its memory at once, under the native code
 * computing on it.
 */
export function enqueue(
  fn: string,
  buffers: readonly NamedBuffer[],
  args: () => unknown[],
  invoke: (args: unknown[]) => void,
): Promise<void> {
  const resizable = firstWhere(buffers, isResizable);
  if (resizable !== undefined) {
    return Promise.reject(resizableError(fn, resizable));
  }
  return new Promise<void>((resolve, reject) => {
    waiting.push({ fn, buffers, args, invoke, resolve, reject });
    pump();
  });
}

/**
 * Runs a prepared call asynchronously: validation errors (thrown by prepare)
 * become a rejected promise, never a synchronous throw.
 */
export function runAsync<R>(
  prepare: () => { fn: string; args: () => unknown[]; result: R; buffers: NamedBuffer[] },
  invoke: (args: unknown[]) => void,
): Promise<R> {
  let call: ReturnType<typeof prepare>;
  let queued: Promise<void>;
  try {
    call = prepare();
    queued = enqueue(call.fn, call.buffers, call.args, invoke);
  } catch (e) {
    return Promise.reject(e);
  }
  return queued.then(() => call.result);
}
