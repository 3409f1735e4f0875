import { types } from 'node:util';
import { rangeError, typeError } from './errors';

const objectToString = Object.prototype.toString;

/**
 * Whether value can be read as a record of named fields: an object whose tag
 * is "Object" (a literal, Object.create(null), a class instance, an object
 * from another realm), and not a Map, Set, Date or other built-in whose
 * contents are not own properties. Such an object would pass as a record of
 * no fields: `new Map([['causal', true]])` as attention's options would
 * silently mean no options at all. The tag alone can be set by the caller
 * (Symbol.toStringTag), so the engine is asked about the common containers too.
 */
export function isRecordLike(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || objectToString.call(value) !== '[object Object]') return false;
  return !(
    Array.isArray(value) ||
    ArrayBuffer.isView(value) ||
    types.isMap(value) ||
    types.isSet(value) ||
    types.isWeakMap(value) ||
    types.isWeakSet(value) ||
    types.isDate(value) ||
    types.isRegExp(value) ||
    types.isPromise(value) ||
    types.isAnyArrayBuffer(value) ||
    types.isBoxedPrimitive(value)
  );
}

/**
 * Checks an options argument: undefined or a plain object whose defined keys
 * are all known. A key whose value is undefined counts as absent.
 */
export function checkOptions<T extends object>(fn: string, opts: unknown, known: readonly string[]): Partial<T> {
  if (opts === undefined) return {};
  if (!isRecordLike(opts)) throw typeError(fn, 'options', 'an options object', opts);
  for (const key of Object.keys(opts)) {
    if ((opts as Record<string, unknown>)[key] !== undefined && !known.includes(key)) {
      throw new TypeError(`${fn}: unknown option "${key}"; expected one of ${known.join(', ')}`);
    }
  }
  return opts as Partial<T>;
}

export function optBoolean(fn: string, name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw typeError(fn, `options.${name}`, 'a boolean', value);
  return value;
}

/** A finite number that also fits float32 (the kernels compute in float32). */
export function optFiniteNumber(fn: string, name: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number') throw typeError(fn, `options.${name}`, 'a number', value);
  if (!Number.isFinite(value) || !Number.isFinite(Math.fround(value))) {
    throw rangeError(fn, `options.${name} must be a finite float32 number, received ${value}`);
  }
  return value;
}

export function optPositiveInteger(fn: string, name: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number') throw typeError(fn, `options.${name}`, 'a number', value);
  if (!Number.isSafeInteger(value) || value < 1) {
    throw rangeError(fn, `options.${name} must be a positive integer, received ${value}`);
  }
  return value;
}

export function optEnum<T extends string>(fn: string, name: string, value: unknown, allowed: readonly T[]): T | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw typeError(fn, `options.${name}`, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`, value);
  if (!(allowed as readonly string[]).includes(value)) {
    throw rangeError(fn, `options.${name} must be one of ${allowed.map((a) => `'${a}'`).join(', ')}, received '${value}'`);
  }
  return value as T;
}
