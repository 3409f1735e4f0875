/** A full garbage collection on demand, for tests of what survives one. */
import * as v8 from 'node:v8';
import * as vm from 'node:vm';

/** global.gc when node runs with --expose-gc, else one obtained through v8 flags, else null. */
export function getGc(): (() => void) | null {
  const g = (globalThis as { gc?: () => void }).gc;
  if (typeof g === 'function') return g;
  try {
    v8.setFlagsFromString('--expose-gc');
    const fn = vm.runInNewContext('gc') as unknown;
    return typeof fn === 'function' ? (fn as () => void) : null;
  } catch {
    return null;
  }
}
