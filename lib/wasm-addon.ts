/**
 * Instantiates the WebAssembly build of the addon (docs/design/wasm.md): mhsa.wasm, which is the
 * same C++ as the native builds, reaching Node-API through emnapi's JavaScript runtime. The
 * instance runs on the thread that loads it, with one compute thread.
 *
 * WASI is given only what the module imports (environment variables, clocks, stderr and exit),
 * implemented here over `process`, so no file system is exposed and `node:wasi`'s experimental
 * warning never prints.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { NativeAddon } from './native';

/** emnapi's two runtime modules: @emnapi/core (the loader) and @emnapi/runtime (the JS side of Node-API). */
export interface EmnapiModules {
  core: {
    instantiateNapiModuleSync(
      wasm: Uint8Array,
      options: Record<string, unknown>,
    ): { napiModule: { exports: unknown } };
  };
  runtime: { getDefaultContext(): unknown };
}

/** What this file uses of a WebAssembly instance (the DOM library, which types them, is not in this build). */
interface WasmInstance {
  exports: Record<string, unknown>;
}

const WASI_ERRNO_SUCCESS = 0;
const WASI_ERRNO_BADF = 8;
const WASI_ERRNO_INVAL = 28;
const WASI_ERRNO_SPIPE = 70;

/** Thrown by proc_exit (the module calls it only through abort): the call fails instead of the process. */
class WasmExit extends Error {
  constructor(code: number) {
    super(`mhsa: the WebAssembly addon stopped (exit code ${code})`);
    this.name = 'WasmExit';
  }
}

/** The WASI preview1 functions mhsa.wasm imports, over this process. */
function minimalWasi(env: NodeJS.ProcessEnv) {
  let memory: { buffer: ArrayBuffer } | undefined;
  const view = () => new DataView(memory!.buffer);
  const bytes = () => new Uint8Array(memory!.buffer);
  const encoded = Object.entries(env)
    .filter(([k, v]) => k.startsWith('MHSA_') && v !== undefined)
    .map(([k, v]) => Buffer.from(`${k}=${v}\0`));
  const wasiImport = {
    environ_sizes_get(countPtr: number, sizePtr: number): number {
      view().setUint32(countPtr, encoded.length, true);
      view().setUint32(sizePtr, encoded.reduce((n, e) => n + e.length, 0), true);
      return WASI_ERRNO_SUCCESS;
    },
    environ_get(environPtr: number, bufPtr: number): number {
      for (const [i, e] of encoded.entries()) {
        view().setUint32(environPtr + 4 * i, bufPtr, true);
        bytes().set(e, bufPtr);
        bufPtr += e.length;
      }
      return WASI_ERRNO_SUCCESS;
    },
    clock_time_get(clockId: number, _precision: bigint, timePtr: number): number {
      const ns = clockId === 0 ? BigInt(Date.now()) * 1_000_000n : process.hrtime.bigint();
      view().setBigUint64(timePtr, ns, true);
      return WASI_ERRNO_SUCCESS;
    },
    fd_write(fd: number, iovs: number, iovsLength: number, writtenPtr: number): number {
      if (fd !== 1 && fd !== 2) return WASI_ERRNO_BADF;
      let written = 0;
      for (let i = 0; i < iovsLength; i++) {
        const base = view().getUint32(iovs + 8 * i, true);
        const length = view().getUint32(iovs + 8 * i + 4, true);
        process.stderr.write(bytes().slice(base, base + length));
        written += length;
      }
      view().setUint32(writtenPtr, written, true);
      return WASI_ERRNO_SUCCESS;
    },
    fd_seek: (): number => WASI_ERRNO_SPIPE,
    fd_close: (): number => WASI_ERRNO_INVAL,
    proc_exit(code: number): never {
      throw new WasmExit(code);
    },
  };
  return {
    wasiImport,
    initialize(instance: WasmInstance): void {
      memory = instance.exports.memory as { buffer: ArrayBuffer };
      (instance.exports._initialize as () => void)();
    },
  };
}

/** The addon in dir/mhsa.wasm, instantiated with the given emnapi modules. */
export function instantiateWasmAddon(dir: string, emnapi: EmnapiModules, env: NodeJS.ProcessEnv = process.env): NativeAddon {
  const wasm = fs.readFileSync(path.join(dir, 'mhsa.wasm'));
  const { napiModule } = emnapi.core.instantiateNapiModuleSync(wasm, {
    context: emnapi.runtime.getDefaultContext(),
    // No worker pool: this build has no threads, and its async ops compute on the JS thread.
    asyncWorkPoolSize: 0,
    wasi: minimalWasi(env),
  });
  return napiModule.exports as NativeAddon;
}
