/**
 * Loads the compiled addon through `bindings`. MHSA_ADDON=cmake selects the
 * cmake-js build (build-cmake/) instead of the default node-gyp one (build/).
 */
import bindings = require('bindings');

/** Completion callback of an async native call. */
export type NativeCallback = (error: Error | null) => void;

/** The addon's raw entry points (positional, already validated by lib/). */
export interface NativeAddon {
  matmul(...args: unknown[]): void;
  softmax(...args: unknown[]): void;
  attention(...args: unknown[]): void;
  info(): { isa: string; threads: number; blas: string | null; pendingAsync: number };
  setNumThreads(n: number): void;
  defaultNumThreads: number;
}

function load(): NativeAddon {
  if (process.env.MHSA_ADDON === 'cmake') {
    return bindings({
      bindings: 'mhsa.node',
      try: [['module_root', 'build-cmake', 'Release', 'bindings']],
    } as unknown as string) as NativeAddon;
  }
  return bindings('mhsa.node') as NativeAddon;
}

export const native: NativeAddon = load();
