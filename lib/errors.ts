/**
 * Error construction shared by every op, so all messages read the same way:
 * `fn: expected X for arg but received Y` for a wrong kind of value (TypeError)
 * and `fn: arg ... must ..., received ...` for a wrong value (RangeError).
 */
import { types } from 'node:util';

/** A short description of a value for error messages: its type, and its size or value. */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'number') return `the number ${value}`;
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 40 ? value.slice(0, 40) + '…' : value)}`;
  if (typeof value === 'boolean') return `the boolean ${value}`;
  if (typeof value === 'bigint') return `the bigint ${value}`;
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return 'a symbol';
  // A Proxy passes for its target under every question but the engine's own (types.isFloat32Array).
  if (types.isProxy(value)) return 'a Proxy (typed arrays must be passed as they are)';
  if (ArrayBuffer.isView(value)) {
    const name = value.constructor?.name ?? 'ArrayBufferView';
    return 'length' in value ? `${name}(${(value as unknown as { length: number }).length})` : name;
  }
  if (Array.isArray(value)) return `an Array(${value.length})`;
  if (types.isArrayBuffer(value)) return `ArrayBuffer(${value.byteLength})`;
  const name = (value as object).constructor?.name;
  return name && name !== 'Object' ? `a ${name}` : 'an object';
}

/** `fn: expected <expected> for <arg> but received <described value>` */
export function typeError(fn: string, arg: string, expected: string, received: unknown): TypeError {
  return new TypeError(`${fn}: expected ${expected} for ${arg} but received ${describe(received)}`);
}

/** A RangeError prefixed with the function name. */
export function rangeError(fn: string, message: string): RangeError {
  return new RangeError(`${fn}: ${message}`);
}

/** `fn: <arg> is backed by a detached ArrayBuffer` (one transferred away, with no bytes left to read). */
export function detachedError(fn: string, arg: string): TypeError {
  return new TypeError(`${fn}: ${arg} is backed by a detached ArrayBuffer`);
}

/** `fn: <arg> is backed by a resizable ArrayBuffer; ...`: one that could shrink under an async op's kernel. */
export function resizableError(fn: string, arg: string): TypeError {
  return new TypeError(`${fn}: ${arg} is backed by a resizable ArrayBuffer; async ops need fixed-length buffers`);
}

/** `[2, 3, 4]` */
export function formatShape(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}
