#!/usr/bin/env node
// Builds the WebAssembly addon (docs/design/wasm.md): native/sources.json's
// core and binding sources, with the wasm build's own files in place of
// wasmReplaces, compiled by clang for wasm32-wasip1 with SIMD128 and wasm
// exception handling, linked with emnapi's Node-API (no threads).
//   node scripts/release/build-wasm.js [outDir]      default release/prebuilds/wasm32
// Needs Debian's clang-22, lld-22, libc++-22-dev-wasm32, libc++abi-22-dev-wasm32,
// libclang-rt-22-dev-wasm32 and wasi-libc (installed when missing), and the emnapi
// dev dependency.
'use strict';

const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..', '..');
const APT = ['clang-22', 'lld-22', 'libc++-22-dev-wasm32', 'libc++abi-22-dev-wasm32', 'libclang-rt-22-dev-wasm32', 'wasi-libc'];
const CXX = 'clang++-22';
// Debian installs the wasm32 sysroot under the older triple's directories.
const SYSROOT = ['--sysroot=/usr', '-isystem', '/usr/lib/llvm-22/include/wasm32-wasi/c++/v1', '-isystem', '/usr/include/wasm32-wasi'];
const LIBS = ['-L/usr/lib/wasm32-wasi', '-L/usr/lib/llvm-22/lib/wasm32-wasi', '-B/usr/lib/wasm32-wasi/'];

function emnapiDir() {
  return path.dirname(require.resolve('emnapi/package.json', { paths: [root] }));
}

function compileFlags() {
  return [
    '--target=wasm32-wasip1', ...SYSROOT,
    '-O3', '-std=c++17', '-msimd128', '-ffp-contract=off', '-fwasm-exceptions',
    // Deterministic objects: no absolute paths of this machine in them.
    `-ffile-prefix-map=${root}=.`,
    '-DMHSA_SINGLE_THREADED', '-DNAPI_VERSION=8', '-DNODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS',
    '-DNODE_ADDON_API_CPP_EXCEPTIONS', '-DBUILDING_NODE_EXTENSION',
    '-I', path.join(emnapiDir(), 'include', 'node'),
    '-I', path.dirname(require.resolve('node-addon-api/package.json', { paths: [root] })),
  ];
}

function ensureToolchain() {
  try {
    execFileSync(CXX, ['--version'], { stdio: 'ignore' });
    const needed = ['/usr/lib/llvm-22/lib/wasm32-wasi/libc++abi.a', '/usr/lib/wasm32-wasi/libc.a', '/usr/lib/llvm-22/lib/clang/22/lib/wasi/libclang_rt.builtins-wasm32.a'];
    if (needed.every((f) => fs.existsSync(f))) return;
  } catch {}
  execFileSync('bash', [path.join(root, 'scripts', 'apt-install.sh'), ...APT], { stdio: 'inherit' });
}

function sources() {
  const list = JSON.parse(fs.readFileSync(path.join(root, 'native', 'sources.json'), 'utf8'));
  const replaced = new Set(list.wasmReplaces);
  return [...list.core, ...list.binding, ...list.wasm].filter((f) => !replaced.has(f));
}

/** Compiles every source into objDir, at most `jobs` at once; resolves with the object paths. */
function compileAll(files, objDir, jobs) {
  const flags = compileFlags();
  const objects = files.map((f) => path.join(objDir, f.replace(/[\\/]/g, '_').replace(/\.cc$/, '.o')));
  let next = 0;
  let failed = null;
  const worker = () =>
    new Promise((resolve) => {
      const step = () => {
        if (failed || next >= files.length) return resolve();
        const i = next++;
        const child = spawn(CXX, [...flags, '-c', files[i], '-o', objects[i]], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
        child.on('exit', (code) => {
          if (code !== 0) failed = new Error(`build-wasm: ${files[i]} did not compile`);
          step();
        });
      };
      step();
    });
  return Promise.all(Array.from({ length: jobs }, worker)).then(() => {
    if (failed) throw failed;
    return objects;
  });
}

function link(objects, out) {
  execFileSync(
    CXX,
    [
      '--target=wasm32-wasip1', ...LIBS, '-O3', '-fwasm-exceptions', '-mexec-model=reactor', ...objects,
      // 8 MiB of stack (wasm-ld's default is 64 kB); memory grows up to wasm32's 4 GiB.
      '-Wl,-z,stack-size=8388608', '-Wl,--max-memory=4294967296', '-Wl,--strip-all',
      '-Wl,--export=malloc,--export=free,--export=napi_register_wasm_v1',
      '-Wl,--export-if-defined=node_api_module_get_api_version_v1,--import-undefined,--export-table',
      '-L', path.join(emnapiDir(), 'lib', 'wasm32-wasi'), '-lemnapi-basic',
      '-o', out,
    ],
    { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] },
  );
}

async function buildWasm(outDir = path.join(root, 'release', 'prebuilds', 'wasm32')) {
  ensureToolchain();
  const started = Date.now();
  const objDir = path.join(root, 'release', 'stage', 'wasm32');
  fs.rmSync(objDir, { recursive: true, force: true });
  fs.mkdirSync(objDir, { recursive: true });
  fs.mkdirSync(outDir, { recursive: true });
  const objects = await compileAll(sources(), objDir, os.availableParallelism());
  const out = path.join(outDir, 'mhsa.wasm');
  link(objects, out);
  console.log(`wasm32: ${((Date.now() - started) / 1000).toFixed(0)} s; mhsa.wasm ${(fs.statSync(out).size / 1024).toFixed(0)} kB`);
  return outDir;
}

if (require.main === module) {
  buildWasm(process.argv[2] && path.resolve(process.argv[2])).catch((e) => {
    console.error(e.message);
    process.exit(1);
  });
}

module.exports = { buildWasm };
