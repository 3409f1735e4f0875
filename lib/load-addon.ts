/**
 * Finds the addon, in this order:
 * 1. `MHSA_ADDON`: `cmake` (this checkout's cmake-js build, build-cmake/), `wasm` (the WebAssembly build)
 *    or the path of a `.node` file;
 * 2. a build from source inside the package (build/Release/mhsa.node: a checkout after `npm install`);
 * 3. the native prebuilt package for this platform (`@mhsa/linux-x64-gnu`, ...), which npm, pnpm and yarn
 *    install as an optional dependency, with the buffer-pinning module for the running Node's ABI
 *    when it ships one (docs/design/prebuilds.md);
 * 4. the WebAssembly package `@mhsa/wasm32`, which installs everywhere (docs/design/wasm.md). Where a
 *    native package would fit the platform but is missing, taking it says so once on stderr
 *    (`MHSA_WASM_QUIET=1` silences that): it is several times slower. On musl, where the Linux
 *    packages (glibc) cannot load, it is taken in silence.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { NativeAddon } from './native';
import { instantiateWasmAddon, type EmnapiModules } from './wasm-addon';

/** The platforms with a prebuilt package, by `process.platform`-`process.arch`. */
export const PREBUILT_PLATFORMS: Readonly<Record<string, string>> = {
  'linux-x64': '@mhsa/linux-x64-gnu',
  'linux-arm64': '@mhsa/linux-arm64-gnu',
  'win32-x64': '@mhsa/win32-x64',
};

/** The WebAssembly package, taken where no native package fits. */
export const WASM_PACKAGE = '@mhsa/wasm32';

/** How the addon was found: the file loaded, and from where. */
export interface LoadedAddon {
  native: NativeAddon;
  file: string;
  source: 'MHSA_ADDON' | 'local build' | 'prebuilt package' | 'wasm32 package';
}

/** The directory holding mhsa's package.json (dist/lib/ when compiled, lib/ under ts-node). */
function packageRoot(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`mhsa: no package.json above ${__dirname}`);
  }
}

/** 'glibc <version>', 'musl' or 'unknown libc' (Linux only; asked only to explain a failure). */
function linuxLibc(): string {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  if (header?.glibcVersionRuntime) return `glibc ${header.glibcVersionRuntime}`;
  try {
    if (fs.readdirSync('/lib').some((f) => f.startsWith('ld-musl-'))) return 'musl';
  } catch {
    // no /lib: say nothing more
  }
  return 'unknown libc';
}

/** This process's platform as an error message names it. */
function describePlatform(): string {
  const libc = process.platform === 'linux' ? `, ${linuxLibc()}` : '';
  return `${process.platform}-${process.arch}${libc}, Node ${process.versions.node} (ABI ${process.versions.modules})`;
}

const FROM_SOURCE =
  'To build it from source, which needs a C++17 compiler (C++20 for Node 23 and later), make and python3, ' +
  'run `npm install` in a checkout of mhsa ' +
  "and set MHSA_ADDON to that checkout's build/Release/mhsa.node (or `npm install <checkout>`).";

function loadFile(file: string, source: LoadedAddon['source']): LoadedAddon {
  try {
    return { native: require(file) as NativeAddon, file, source };
  } catch (cause) {
    const reason = cause instanceof Error ? cause.message.split('\n')[0] : String(cause);
    throw new Error(`mhsa: the native addon ${file} (${source}) could not be loaded on ${describePlatform()}: ${reason}`, {
      cause,
    });
  }
}

function prebuiltPackageDir(name: string, root: string): string | undefined {
  try {
    return path.dirname(require.resolve(`${name}/package.json`, { paths: [root] }));
  } catch {
    return undefined;
  }
}

/** The reason the platform's native package is not there (for the fallback's message and the final error). */
function missingNative(name: string | undefined): string {
  return name === undefined
    ? 'mhsa has no native addon for this platform'
    : `its native addon, the optional dependency ${name}, is not installed (installed with --omit=optional, ` +
        'from a lockfile made on another platform, or a libc other than glibc)';
}

function loadPrebuilt(dir: string): LoadedAddon {
  const loaded = loadFile(path.join(dir, 'mhsa.node'), 'prebuilt package');
  // The addon itself is Node-API only; holding async calls' buffers needs V8's ABI (buffer_pinning.h).
  const pinning = path.join(dir, `buffer-pinning-node${process.versions.modules}.node`);
  if (fs.existsSync(pinning)) {
    const module = require(pinning) as { pinning: unknown };
    loaded.native.setBufferPinning(module.pinning);
  }
  return loaded;
}

/**
 * The WebAssembly addon: the installed package (mhsa.wasm beside emnapi's two runtime files), else
 * this checkout's build (build-wasm/, `npm run build:wasm`) with emnapi from its node_modules.
 */
function loadWasm(root: string, source: LoadedAddon['source'], env: NodeJS.ProcessEnv): LoadedAddon | undefined {
  const installed = prebuiltPackageDir(WASM_PACKAGE, root);
  const dir = installed ?? path.join(root, 'build-wasm');
  const file = path.join(dir, 'mhsa.wasm');
  if (!fs.existsSync(file)) return undefined;
  try {
    const emnapi: EmnapiModules =
      installed !== undefined
        ? { core: require(path.join(dir, 'emnapi-core.min.js')), runtime: require(path.join(dir, 'emnapi-runtime.min.js')) }
        : { core: require(require.resolve('@emnapi/core', { paths: [root] })), runtime: require(require.resolve('@emnapi/runtime', { paths: [root] })) };
    return { native: instantiateWasmAddon(dir, emnapi, env), file, source };
  } catch (cause) {
    const reason = cause instanceof Error ? cause.message.split('\n')[0] : String(cause);
    throw new Error(`mhsa: the WebAssembly addon ${file} (${source}) could not be loaded on ${describePlatform()}: ${reason}`, { cause });
  }
}

/** Loads the addon this process should use (see the module comment), or throws saying why there is none. */
export function loadAddon(env: NodeJS.ProcessEnv = process.env): LoadedAddon {
  const chosen = env.MHSA_ADDON;
  if (chosen !== undefined && chosen !== '' && chosen !== 'cmake' && chosen !== 'wasm') return loadFile(path.resolve(chosen), 'MHSA_ADDON');
  const root = packageRoot();
  if (chosen === 'wasm') {
    const wasm = loadWasm(root, 'MHSA_ADDON', env);
    if (wasm === undefined)
      throw new Error(`mhsa: MHSA_ADDON=wasm, but neither ${WASM_PACKAGE} nor a build in ${path.join(root, 'build-wasm')} is there`);
    return wasm;
  }
  if (chosen === 'cmake') return loadFile(path.join(root, 'build-cmake', 'Release', 'mhsa.node'), 'MHSA_ADDON');
  const local = path.join(root, 'build', 'Release', 'mhsa.node');
  if (fs.existsSync(local)) return loadFile(local, 'local build');
  const name = PREBUILT_PLATFORMS[`${process.platform}-${process.arch}`];
  const dir = name === undefined ? undefined : prebuiltPackageDir(name, root);
  if (dir !== undefined) return loadPrebuilt(dir);
  const wasm = loadWasm(root, 'wasm32 package', env);
  if (wasm === undefined) throw new Error(`mhsa: no addon for ${describePlatform()}: ${missingNative(name)}, nor ${WASM_PACKAGE}.\n${FROM_SOURCE}`);
  // Where the native package cannot fit (musl: it is built for glibc), wasm is what the platform gets.
  const nativeFits = name !== undefined && (process.platform !== 'linux' || linuxLibc().startsWith('glibc'));
  if (nativeFits && env.MHSA_WASM_QUIET !== '1') {
    process.stderr.write(
      `mhsa: running the WebAssembly addon, several times slower than native: ${missingNative(name)}. ` +
        'Reinstall with optional dependencies to get it; MHSA_WASM_QUIET=1 silences this.\n',
    );
  }
  return wasm;
}
