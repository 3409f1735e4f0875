#!/usr/bin/env node
// Builds the prebuilt addons of the platform packages (docs/design/prebuilds.md):
// per platform, one Node-API addon (mhsa.node) that every Node ABI loads, and
// on Linux one small buffer-pinning module per Node ABI (buffer-pinning-node<ABI>.node),
// all with node-gyp from binding.gyp, linked for glibc 2.28 and later.
// win32-x64 is the Node-API addon alone, cross-built with mingw-w64 by build-win32.js.
//   node scripts/release/build-prebuilds.js [linux-x64] [linux-arm64] [win32-x64]
// Output: release/prebuilds/<platform>/. Node's headers come from the npm
// registry's official builds (node-dists.js); arm64 and win32 use Debian's cross
// compilers (installed when missing).
'use strict';

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { NODE_MAJORS, nodeDist, moduleVersion } = require('./node-dists');
const { buildWin32, CXX: MINGW_CXX } = require('./build-win32');

const root = path.resolve(__dirname, '..', '..');
const release = path.join(root, 'release');

/** How each platform is built here: node-gyp's --arch, and the compilers when cross-building. */
const TOOLCHAINS = {
  'linux-x64': { arch: 'x64', env: {} },
  'linux-arm64': {
    arch: 'arm64',
    env: { CC: 'aarch64-linux-gnu-gcc', CXX: 'aarch64-linux-gnu-g++', LINK: 'aarch64-linux-gnu-g++', AR: 'aarch64-linux-gnu-ar' },
    apt: ['g++-aarch64-linux-gnu'],
  },
  // No node-gyp and no pinning modules: V8's C++ ABI on Windows is MSVC's (build-win32.js).
  'win32-x64': { arch: 'x64', env: { CXX: MINGW_CXX }, apt: ['g++-mingw-w64-x86-64-posix'], build: buildWin32 },
};

function run(cmd, args, options) {
  execFileSync(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'], ...options });
}

function ensureToolchain(toolchain) {
  const cxx = toolchain.env.CXX;
  if (!cxx) return;
  try {
    execFileSync(cxx, ['--version'], { stdio: 'ignore' });
  } catch {
    run('bash', [path.join(root, 'scripts', 'apt-install.sh'), ...toolchain.apt], { stdio: 'inherit' });
  }
}

/** A copy of what node-gyp reads (binding.gyp, native/), so the checkout's own build/ is untouched. */
function stage(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(path.join(root, 'binding.gyp'), path.join(dir, 'binding.gyp'));
  const skip = new Set(['tests', 'fuzz'].map((d) => path.join(root, 'native', d)));
  fs.cpSync(path.join(root, 'native'), path.join(dir, 'native'), { recursive: true, filter: (src) => !skip.has(src) });
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
}

/** node-gyp configure + build in dir against nodeRoot's headers; returns build/Release. */
function gyp(dir, toolchain, nodeRoot, defines) {
  const nodeGyp = require.resolve('node-gyp/bin/node-gyp.js', { paths: [root] });
  // node-gyp lets npm's config in the environment override its flags (under `npm run`, a user's
  // nodedir would build every pinning module against one Node): this build's flags only.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_(package_)?config_/i.test(k)));
  Object.assign(env, toolchain.env);
  const common = ['--release', '--loglevel=warn', `--nodedir=${nodeRoot}`, `--arch=${toolchain.arch}`];
  run(process.execPath, [nodeGyp, 'configure', ...common, '--', ...defines.map((d) => `-D${d}=1`)], { cwd: dir, env });
  run(process.execPath, [nodeGyp, 'build', '--release', '--loglevel=warn', '-j', String(os.availableParallelism())], { cwd: dir, env });
  return path.join(dir, 'build', 'Release');
}

function buildPlatform(platform) {
  const toolchain = TOOLCHAINS[platform];
  if (!toolchain) throw new Error(`build-prebuilds: no toolchain for ${platform} (known: ${Object.keys(TOOLCHAINS).join(', ')})`);
  ensureToolchain(toolchain);
  const [os_] = platform.split('-');
  const out = path.join(release, 'prebuilds', platform);
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(out, { recursive: true });
  const dir = path.join(release, 'stage', platform);
  const started = Date.now();
  if (toolchain.build) {
    toolchain.build(dir, out);
  } else {
    const dists = NODE_MAJORS.map((major) => nodeDist(os_, toolchain.arch, major, path.join(release, 'cache')));
    stage(dir);
    // The addon compiles against Node-API alone; the oldest Node's headers serve every later one.
    let built = gyp(dir, toolchain, dists[0], ['mhsa_prebuild', 'mhsa_node_api_only']);
    fs.copyFileSync(path.join(built, 'mhsa.node'), path.join(out, 'mhsa.node'));
    for (const nodeRoot of dists) {
      built = gyp(dir, toolchain, nodeRoot, ['mhsa_prebuild', 'mhsa_pinning_module']);
      fs.copyFileSync(path.join(built, 'mhsa_buffer_pinning.node'), path.join(out, `buffer-pinning-node${moduleVersion(nodeRoot)}.node`));
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
  const files = fs.readdirSync(out).map((f) => `${f} ${(fs.statSync(path.join(out, f)).size / 1024).toFixed(0)} kB`);
  console.log(`${platform}: ${((Date.now() - started) / 1000).toFixed(0)} s; ${files.join(', ')}`);
  return out;
}

if (require.main === module) {
  const platforms = process.argv.slice(2);
  for (const p of platforms.length > 0 ? platforms : ['linux-x64']) buildPlatform(p);
}

module.exports = { TOOLCHAINS, buildPlatform };
