/**
 * Checks of the arguments that are not tensors: option and config objects,
 * booleans, numbers, enums, counts and epsilons; used by every op and by the
 * block (tensors, shapes and masks are checked in tensor.ts). Each returns the
 * value it checked, or throws one of errors.ts's two shapes, naming the
 * function, the argument, what was expected and what came:
 * `fn: expected X for arg but received Y` (TypeError, a wrong kind of value),
 * `fn: arg must be X, received Y` (RangeError, a wrong value).
 */
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
 * Checks a required object argument (a config, its weights): a plain object
 * (see {@link isRecordLike}) whose defined keys are all known. A key whose
 * value is undefined counts as absent.
 */
export function checkObject(fn: string, arg: string, value: unknown, known: readonly string[]): Record<string, unknown> {
  if (!isRecordLike(value)) throw typeError(fn, arg, 'an object', value);
  for (const key of Object.keys(value)) {
    if (value[key] !== undefined && !known.includes(key)) {
      throw new TypeError(`${fn}: unknown key "${key}" in ${arg}; expected one of ${known.join(', ')}`);
    }
  }
  return value;
}

/** Checks an options argument: undefined (no options) or an object as {@link checkObject} takes. */
export function checkOptions<T extends object>(fn: string, opts: unknown, known: readonly string[]): Partial<T> {
  if (opts === undefined) return {};
  return checkObject(fn, 'options', opts, known) as Partial<T>;
}

/** An optional boolean, fallback when undefined. */
export function optBoolean(fn: string, arg: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw typeError(fn, arg, 'a boolean', value);
  return value;
}

/** An optional finite number that also fits float32 (the kernels compute in float32). */
export function optFiniteNumber(fn: string, arg: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number') throw typeError(fn, arg, 'a number', value);
  if (!Number.isFinite(value) || !Number.isFinite(Math.fround(value))) {
    throw rangeError(fn, `${arg} must be a finite float32 number, received ${value}`);
  }
  return value;
}

/** A required count: a safe integer ≥ 1. */
export function positiveInteger(fn: string, arg: string, value: unknown): number {
  if (typeof value !== 'number') throw typeError(fn, arg, 'a number', value);
  if (!Number.isSafeInteger(value) || value < 1) throw rangeError(fn, `${arg} must be a positive integer, received ${value}`);
  return value;
}

/** An optional count (see {@link positiveInteger}). */
export function optPositiveInteger(fn: string, arg: string, value: unknown): number | undefined {
  return value === undefined ? undefined : positiveInteger(fn, arg, value);
}

/** An optional safe integer ≥ 0. */
export function optNonNegativeInteger(fn: string, arg: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number') throw typeError(fn, arg, 'a number', value);
  if (!Number.isSafeInteger(value) || value < 0) throw rangeError(fn, `${arg} must be an integer >= 0, received ${value}`);
  return value;
}

/** An optional string, one of allowed. */
export function optEnum<T extends string>(fn: string, arg: string, value: unknown, allowed: readonly T[]): T | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw typeError(fn, arg, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`, value);
  if (!(allowed as readonly string[]).includes(value)) {
    throw rangeError(fn, `${arg} must be one of ${allowed.map((a) => `'${a}'`).join(', ')}, received '${value}'`);
  }
  return value as T;
}

/** A LayerNorm's epsilon: a finite float32 number ≥ 0; 1e-5 (PyTorch's default) when undefined. */
export function checkEps(fn: string, arg: string, value: unknown): number {
  if (value === undefined) return 1e-5;
  if (typeof value !== 'number') throw typeError(fn, arg, 'a number', value);
  if (!(value >= 0) || !Number.isFinite(Math.fround(value))) {
    throw rangeError(fn, `${arg} must be a finite float32 number >= 0, received ${value}`);
  }
  return value;
}
