import { info } from '../../lib/info';

/** The WebAssembly addon is the one loaded (MHSA_ADDON=wasm, or no native package fits). */
export const onWasm = info().backend === 'wasm32';

/**
 * `test`, or `test.skip` under the WebAssembly addon, for behaviour only the native builds have:
 * compute off the JS thread, buffer pinning, and what docs/api.md#webassembly lists.
 */
export const nativeOnly: typeof test = onWasm ? test.skip : test;
