#!/usr/bin/env node
// npm run release:rehearse: a release as users would meet it, on this machine
// (docs/design/prebuilds.md). Packs (pack.js), publishes every tarball to a
// local registry (verdaccio on 127.0.0.1), then, with no compiler on PATH,
// installs mhsa into fresh projects with npm's defaults, with --ignore-scripts
// and with pnpm, and runs an attention call and the block in each, against a
// float64 reference (consumer-smoke.js), under Node 20, 22, 24 and 26. The
// arm64 package is installed for arm64 and run under qemu-aarch64 with the
// arm64 Node build, with the jest suite's op and block tests. The win32 package
// is installed for Windows x64 and run under wine with the registry's Windows
// Node builds, with the op, block, decoder, async, bad-input and fixture tests.
// The wasm32 package is installed as on macOS (--os=darwin --cpu=arm64, with npm
// and pnpm), so that no native package fits, and the same tests run against it.
// Last, each Linux binary's newest required glibc symbol version.
//   node scripts/release/rehearse.js [--platforms=linux-x64,linux-arm64,win32-x64,wasm32] [--compare-onnxruntime]
//   (--no-pack: the tarballs already in release/)
'use strict';

const { execFileSync, spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { NODE_MAJORS, nodeDist, registryPackage } = require('./node-dists');
const { WASM_TESTS } = require('../test-wasm');

const root = path.resolve(__dirname, '..', '..');
const release = path.join(root, 'release');
const cache = path.join(release, 'cache');
const work = path.join(release, 'rehearsal');
const version = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version;
const GLIBC_CEILING = [2, 28];
const COMPILERS = ['g++', 'gcc', 'c++', 'cc', 'clang', 'clang++', 'make', 'python3', 'python'];
const OP_AND_BLOCK_TESTS = ['matmul', 'softmax', 'attention', 'layernorm', 'prepack', 'block', 'fixtures'].map((t) => `test/${t}.test.ts`);
/**
 * Under qemu: every op against PyTorch's outputs (fixtures), LayerNorm and the block, 2.5 minutes
 * in all. The op files' large cases take minutes each emulated (softmax 267 s, attention over
 * 400 s); scripts/cross-arm64.sh runs the native kernel tests at every awkward size instead.
 */
const EMULATED_TESTS = ['fixtures', 'layernorm', 'block'].map((t) => `test/${t}.test.ts`);
/** What else a prebuilt x64 addon must get right: every SIMD table (MHSA_ISA), async buffer pinning, workers. */
const BINDING_TESTS = ['isa-paths', 'async', 'lying-values', 'worker-threads'].map((t) => `test/${t}.test.ts`);
/**
 * Under wine: every op, the block and the decoder, async calls (on private copies), bad inputs,
 * PyTorch's outputs, and what the x64 package's binding tests check (every SIMD table, workers).
 */
const WINDOWS_TESTS = ['matmul', 'softmax', 'attention', 'layernorm', 'prepack', 'int8', 'rope', 'block', 'block-decoder', 'block-decoder-ops', 'async', 'bad-inputs', 'fixtures',
  'isa-paths', 'lying-values', 'worker-threads'].map((t) => `test/${t}.test.ts`);
/**
 * Tests left out under wine, by name, each with why: all three need V8's C++ API, which the Windows
 * addon cannot link (MSVC-mangled), so async calls copy there instead (the async tests' "private
 * copies" cases) and results come from V8's allocator.
 */
const WINDOWS_EXCLUDED = {
  "the addon holds async buffers (built with V8's headers, C++20 from Node 23 on)": 'no pinning on Windows: copies instead',
  "setBufferPinning takes only a buffer-pinning module's export (a type-tagged external), and changes nothing otherwise":
    'its last line asserts pinsAsyncBuffers true, which no Windows addon is',
  'pooled results transferred to and from a worker stay valid, there and after the worker exits':
    'the result pool makes its ArrayBuffers with V8\'s API: off on Windows (resultPool.enabled false)',
};
const WINE = '/usr/lib/wine/wine64';
/**
 * ProcessPrng, for wine 8.0, which has no bcryptprimitives.dll: Rust's standard library (1.78 on)
 * takes its random bytes there, so jest's resolver binding (Rust, MSVC) does not load without it.
 */
const PROCESS_PRNG = `#include <windows.h>
#include <bcrypt.h>
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T size) {
  for (ULONG n; size > 0; data += n, size -= n) {
    n = size > 0x40000000 ? 0x40000000 : (ULONG)size;
    if (BCryptGenRandom(NULL, data, n, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0) return FALSE;
  }
  return TRUE;
}
`;

const args = process.argv.slice(2);
const option = (name) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const platforms = (option('platforms') ?? 'linux-x64,linux-arm64,win32-x64,wasm32').split(',');
const failures = [];
const report = [];

function check(ok, what) {
  report.push(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
}

function sh(cmd, cmdArgs, options = {}) {
  const r = spawnSync(cmd, cmdArgs, { encoding: 'utf8', maxBuffer: 1 << 26, ...options });
  if (r.status !== 0) throw new Error(`${cmd} ${cmdArgs.join(' ')} exited ${r.status ?? r.signal}:\n${r.stderr}\n${r.stdout}`.slice(0, 8000));
  return r.stdout;
}

/**
 * spawnSync with stdout and stderr in files, read back after: Windows' node.exe under wine cannot
 * write to a pipe (EBADF).
 */
function spawnToFiles(cmd, cmdArgs, options = {}) {
  const dir = fs.mkdtempSync(path.join(work, 'output-'));
  const files = ['stdout', 'stderr'].map((n) => path.join(dir, n));
  const fds = files.map((f) => fs.openSync(f, 'w'));
  try {
    const r = spawnSync(cmd, cmdArgs, { ...options, stdio: ['ignore', ...fds] });
    const [stdout, stderr] = files.map((f) => fs.readFileSync(f, 'utf8'));
    return { status: r.status, signal: r.signal, stdout: r.error ? `${stdout}${r.error.message}` : stdout, stderr };
  } finally {
    for (const fd of fds) fs.closeSync(fd);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function duBytes(dir) {
  return Number(sh('du', ['-sb', dir]).split('\t')[0]);
}

const MB = (bytes) => `${(bytes / 1e6).toFixed(2)} MB`;

/** A tool from the npm registry, installed once under release/cache/tools. */
function tool(name, spec, overrides) {
  const dir = path.join(cache, 'tools', name);
  if (!fs.existsSync(path.join(dir, 'node_modules', name, 'package.json'))) {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ private: true, dependencies: { [name]: spec }, overrides }));
    sh('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir });
  }
  return path.join(dir, 'node_modules', name);
}

/** A directory whose PATH holds node and nothing else: no compiler, make or python can be found. */
function bareBin() {
  const bin = path.join(work, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  fs.rmSync(path.join(bin, 'node'), { force: true });
  fs.symlinkSync(process.execPath, path.join(bin, 'node'));
  // Asked the way npm and node-gyp would find them: by running them on that PATH.
  const found = COMPILERS.filter((c) => spawnSync(c, ['--version'], { env: { PATH: bin } }).error === undefined);
  check(found.length === 0, `no compiler on the consumers' PATH (${COMPILERS.join(', ')} hidden)${found.length ? `: found ${found.join(', ')}` : ''}`);
  return bin;
}

async function startRegistry() {
  const verdaccio = tool('verdaccio', '6.8.0', { 'node-fetch': '2.7.0' });
  const dir = path.join(work, 'registry');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const port = 4873 + Math.floor(Math.random() * 1000);
  const config = path.join(dir, 'config.yaml');
  fs.writeFileSync(
    config,
    [
      `storage: ${path.join(dir, 'storage')}`,
      'auth:',
      `  htpasswd: { file: ${path.join(dir, 'htpasswd')}, max_users: 10 }`,
      'uplinks: {}',
      'packages:',
      "  '@mhsa/*': { access: $all, publish: $authenticated }",
      "  'mhsa': { access: $all, publish: $authenticated }",
      'log: { type: stdout, format: pretty, level: error }',
      '',
    ].join('\n'),
  );
  const server = spawn(process.execPath, [path.join(verdaccio, 'bin', 'verdaccio'), '--config', config, '--listen', `127.0.0.1:${port}`], {
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${url}/-/ping`)).ok) break;
    } catch {}
    if (i > 100) throw new Error('the local registry did not start');
    await new Promise((r) => setTimeout(r, 200));
  }
  const user = await fetch(`${url}/-/user/org.couchdb.user:rehearsal`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'rehearsal', password: 'rehearsal' }),
  }).then((r) => r.json());
  const npmrc = path.join(dir, 'npmrc');
  fs.writeFileSync(npmrc, `registry=${url}/\n//127.0.0.1:${port}/:_authToken=${user.token}\n`);
  return { server, url, npmrc };
}

function npmCli() {
  return path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js');
}

/** A fresh consumer project; returns its directory. */
function consumer(name) {
  const dir = path.join(work, 'consumers', name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: `consumer-${name}`, version: '1.0.0', private: true }));
  return dir;
}

function timed(fn) {
  const t0 = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

/**
 * Runs consumer-smoke.js in dir with the given node (and wrapper); checks what it prints. Async buffers are
 * pinned on Linux; the Windows addon has no pinning (its async calls copy: lib/async-copies.ts).
 */
function smoke(dir, label, nodeCommand, expectArch, { env, pins = true, backend = 'native', notStarting } = {}) {
  let out;
  // Copied in: run from scripts/, require('mhsa') would find this checkout by self-reference.
  fs.copyFileSync(path.join(__dirname, 'consumer-smoke.js'), path.join(dir, 'consumer-smoke.js'));
  const r = spawnToFiles(nodeCommand[0], [...nodeCommand.slice(1), 'consumer-smoke.js'], { cwd: dir, env });
  const why = notStarting?.(r.stderr); // asked whatever the status: wine may report 0 for an abort
  if (why) {
    report.push(`     (${label}: not run: ${why})`);
    return;
  }
  try {
    if (r.status !== 0) throw new Error(`exited ${r.status ?? r.signal}: ${r.stderr}`);
    out = JSON.parse(r.stdout.trim().split('\n').pop());
  } catch (e) {
    check(false, `${label}: the smoke run failed: ${e.message.split('\n').slice(0, 6).join(' | ')}`);
    return;
  }
  const errors = [...out.attention, ...out.block];
  check(
    out.arch === expectArch && out.backend === backend && (out.platformPackage !== null) === (backend === 'native') &&
      out.pinsAsyncBuffers === pins && errors.every((e) => e < 1e-5),
    `${label}: node ${out.node} (ABI ${out.abi}, ${out.arch}, ${out.backend}, isa ${out.isa}) loads ${out.platformPackage ? path.basename(out.platformPackage) : 'no native package'}, ` +
      `pinsAsyncBuffers ${out.pinsAsyncBuffers}; attention ${out.attention.map((e) => e.toExponential(1)).join('/')}, ` +
      `block ${out.block.map((e) => e.toExponential(1)).join('/')} (sync/async rel. error vs float64)`,
  );
}

/**
 * A fresh consumer that installs mhsa with pnpm 10 as on another os and cpu (pnpm.supportedArchitectures);
 * extra: more pnpm arguments.
 */
function pnpmConsumerAs(name, os, cpu, env, registry, extra = []) {
  const dir = consumer(name);
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  manifest.pnpm = { supportedArchitectures: { os: [os], cpu: [cpu] } };
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(manifest));
  sh(process.execPath, [path.join(tool('pnpm', '10.34.9'), 'bin', 'pnpm.cjs'), 'add', `mhsa@${version}`, `--registry=${registry.url}/`,
    `--store-dir=${path.join(work, 'pnpm-store')}`, '--reporter=silent', ...extra], { cwd: dir, env });
  return dir;
}

function npmInstall(dir, env, registry, extra = []) {
  sh(process.execPath, [npmCli(), 'install', `mhsa@${version}`, '--no-audit', '--no-fund', '--loglevel=error', `--userconfig=${registry.npmrc}`,
    `--cache=${path.join(work, 'npm-cache')}`, ...extra], { cwd: dir, env });
}

/** The newest GLIBC_x.y[.z] among a binary's version needs, as numbers. */
function newestGlibc(file) {
  const versions = [...sh('readelf', ['-V', '--wide', file]).matchAll(/Name: GLIBC_([\d.]+)/g)].map((m) => m[1].split('.').map(Number));
  const newer = (a, b) => {
    for (let i = 0; i < Math.max(a.length, b.length); i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) > (b[i] ?? 0);
    return false;
  };
  return versions.reduce((a, b) => (newer(b, a) ? b : a), [0]);
}

function checkGlibc() {
  for (const platform of platforms.filter((p) => p.startsWith('linux-'))) {
    const dir = path.join(release, 'packages', platform);
    for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.node'))) {
      const [major, minor, patch] = newestGlibc(path.join(dir, f));
      const ok = major < GLIBC_CEILING[0] || (major === GLIBC_CEILING[0] && minor <= GLIBC_CEILING[1]);
      check(ok, `${platform}/${f}: newest glibc symbol version GLIBC_${[major, minor, patch].filter((x) => x !== undefined).join('.')} (ceiling ${GLIBC_CEILING.join('.')})`);
    }
  }
}

/**
 * Jest test files against a platform package, in a copy of the checkout's
 * lib/, dist/, test/ and benchmarks/cli/ with no build/ and the package in its
 * node_modules. The copy sits inside the checkout, so the dev dependencies
 * resolve from the checkout's node_modules above it.
 */
function testsAgainstPackage(label, packageDir, packageName, nodeCommand, tests, extraEnv = {}, excluded = {}, retryOnce = false) {
  const dir = path.join(work, `tests-${label.replace(/\W+/g, '-')}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, 'node_modules', path.dirname(packageName)), { recursive: true });
  // dist/ too, for the tests that load the compiled package in child processes and workers;
  // benchmarks/cli/ for the seeded inputs the tests share with the benchmark CLI (test/helpers/random.ts).
  for (const f of ['package.json', 'jest.config.js', 'tsconfig.json', 'tsconfig.build.json', 'lib', 'dist', 'esm', 'test', path.join('benchmarks', 'cli')]) {
    fs.cpSync(path.join(root, f), path.join(dir, f), { recursive: true, preserveTimestamps: true });
  }
  fs.cpSync(packageDir, path.join(dir, 'node_modules', packageName), { recursive: true });
  const jest = path.join(root, 'node_modules', 'jest', 'bin', 'jest.js');
  const names = Object.keys(excluded);
  const escape = (name) => name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // jest matches -t against "describe names test name"; these are top-level tests.
  const skip = names.length > 0 ? ['-t', `^(?!(${names.map(escape).join('|')})$)`] : [];
  const seconds = timed(() => {
    const retry = retryOnce ? [`--setupFilesAfterEnv=${path.join(__dirname, 'jest-retry-once.js')}`] : [];
    const r = spawnToFiles(nodeCommand[0], [...nodeCommand.slice(1), jest, ...retry, '--runInBand', ...skip, ...tests], {
      cwd: dir,
      env: { ...process.env, MHSA_ADDON: '', ...extraEnv },
    });
    const lines = `${r.stderr}`.split('\n');
    const all = [...`${r.stdout}`.split('\n'), ...lines];
    const summary = lines.filter((l) => /^Tests:|^Test Suites:/.test(l)).join('; ');
    // A failure names its tests and their first lines, so a CI log alone says what broke.
    const failures = r.status === 0 ? '' : lines.filter((l) => /^\s+● /.test(l)).slice(0, 10).map((l) => `\n       ${l.trim()}`).join('');
    check(r.status === 0, `${label}: jest ${tests.map((t) => path.basename(t, '.test.ts')).join(', ')}: ${summary || r.stderr.slice(-2000)}${failures}`);
    // A test that passed on its retry: named, with the first lines of its first failure.
    all.forEach((l, i) => {
      const retried = /LOGGING RETRY ERRORS\s+(.*)$/.exec(l);
      if (retried) {
        const why = all.slice(i + 1, i + 10).map((x) => x.trim()).filter((x) => x && !/^RETRY \d+$/.test(x)).slice(0, 3).join(' / ');
        report.push(`     (${label}: retried once: "${retried[1].trim()}": ${why})`);
      }
    });
  });
  report.push(`     (${label}: ${seconds.toFixed(0)} s)`);
  for (const [name, why] of Object.entries(excluded)) report.push(`     (${label}: left out "${name}": ${why})`);
}

/** jest 30 resolves modules with unrs-resolver, a native addon: the checkout has its own platform's binary only. */
function jestResolverFor(platform) {
  const unrs = JSON.parse(fs.readFileSync(path.join(root, 'node_modules', 'unrs-resolver', 'package.json'), 'utf8')).version;
  const binding = registryPackage(`@unrs/resolver-binding-${platform}-${platform.startsWith('win32') ? 'msvc' : 'gnu'}@${unrs}`, cache);
  if (platform.startsWith('win32') && !fs.existsSync(path.join(binding, 'bcryptprimitives.dll'))) {
    // Beside the binding: Windows looks for a module's imports in its own directory first.
    fs.writeFileSync(path.join(binding, 'bcryptprimitives.c'), PROCESS_PRNG);
    sh('x86_64-w64-mingw32-gcc', ['-O2', '-shared', '-s', '-o', 'bcryptprimitives.dll', 'bcryptprimitives.c', '-lbcrypt'], { cwd: binding });
  }
  return { NAPI_RS_NATIVE_LIBRARY_PATH: path.join(binding, fs.readdirSync(binding).find((f) => f.endsWith('.node'))) };
}

async function main() {
  const started = Date.now();
  if (!args.includes('--no-pack')) sh(process.execPath, [path.join(__dirname, 'pack.js'), ...platforms], { stdio: ['ignore', 'inherit', 'inherit'] });
  // dist/ as of lib/ (pack.js compiles it too): the copied tests load it in children and workers.
  else sh('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: root });
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  const registry = await startRegistry();
  try {
    for (const f of fs.readdirSync(release).filter((f) => f.endsWith('.tgz'))) {
      sh(process.execPath, [npmCli(), 'publish', path.join(release, f), `--userconfig=${registry.npmrc}`, '--loglevel=error']);
    }
    const env = { ...process.env, PATH: bareBin() };
    for (const k of Object.keys(env)) if (k.startsWith('npm_')) delete env[k];

    if (platforms.includes('linux-x64')) {
      const npmDefault = consumer('npm');
      const cold = timed(() => npmInstall(npmDefault, env, registry));
      fs.rmSync(path.join(npmDefault, 'node_modules'), { recursive: true });
      fs.rmSync(path.join(npmDefault, 'package-lock.json'));
      const warm = timed(() => npmInstall(npmDefault, env, registry));
      const size = duBytes(path.join(npmDefault, 'node_modules'));
      // Every optional package npm fetches counts: the native one and @mhsa/wasm32, which installs everywhere.
      const fetched = fs.readdirSync(path.join(npmDefault, 'node_modules', '@mhsa')).join(', ');
      check(warm <= 8 && size <= 6e6, `npm install mhsa: ${warm.toFixed(1)} s from a warm cache (${cold.toFixed(1)} s cold), node_modules ${MB(size)} (@mhsa/: ${fetched})`);
      check(!fs.existsSync(path.join(npmDefault, 'node_modules', 'mhsa', 'build')), 'nothing was built on install (no node_modules/mhsa/build)');
      for (const major of NODE_MAJORS) {
        const node = major === Number(process.versions.node.split('.')[0]) ? process.execPath : path.join(nodeDist('linux', 'x64', major, cache), 'bin', 'node');
        smoke(npmDefault, `npm, Node ${major}`, [node], 'x64');
      }
      const ignoring = consumer('npm-ignore-scripts');
      npmInstall(ignoring, env, registry, ['--ignore-scripts']);
      smoke(ignoring, 'npm --ignore-scripts', [process.execPath], 'x64');

      const pnpm = tool('pnpm', '10.34.9');
      const viaPnpm = consumer('pnpm');
      const pnpmSeconds = timed(() =>
        sh(process.execPath, [path.join(pnpm, 'bin', 'pnpm.cjs'), 'add', `mhsa@${version}`, `--registry=${registry.url}/`,
          `--store-dir=${path.join(work, 'pnpm-store')}`, '--reporter=silent'], { cwd: viaPnpm, env }),
      );
      report.push(`     pnpm add mhsa: ${pnpmSeconds.toFixed(1)} s cold, node_modules ${MB(duBytes(path.join(viaPnpm, 'node_modules')))}`);
      smoke(viaPnpm, 'pnpm 10', [process.execPath], 'x64');
      testsAgainstPackage('x64 package', path.join(npmDefault, 'node_modules', '@mhsa', 'linux-x64-gnu'), '@mhsa/linux-x64-gnu',
        [process.execPath], [...OP_AND_BLOCK_TESTS, ...BINDING_TESTS]);
    }

    if (platforms.includes('wasm32')) {
      // As on a Mac, where npm fetches no native package: the loader must take @mhsa/wasm32. This
      // host's own native package is missing on purpose, so the loader's line about it is silenced.
      const quiet = { ...process.env, MHSA_WASM_QUIET: '1' };
      const onMac = consumer('npm-darwin-arm64');
      npmInstall(onMac, env, registry, ['--os=darwin', '--cpu=arm64']);
      const fetched = fs.readdirSync(path.join(onMac, 'node_modules', '@mhsa'));
      check(fetched.join() === 'wasm32', `npm install --os=darwin --cpu=arm64 mhsa: node_modules/@mhsa holds ${fetched.join(', ')}, ` +
        `${MB(duBytes(path.join(onMac, 'node_modules', '@mhsa', 'wasm32')))} of it the wasm package`);
      for (const major of NODE_MAJORS) {
        const node = major === Number(process.versions.node.split('.')[0]) ? process.execPath : path.join(nodeDist('linux', 'x64', major, cache), 'bin', 'node');
        smoke(onMac, `wasm32 (npm, as on darwin-arm64), Node ${major}`, [node], 'x64', { env: quiet, pins: false, backend: 'wasm32' });
      }
      // Another CPU: the same install under the registry's arm64 Node, emulated (qemu-user and the
      // arm64 C++ runtime that Node links, from Debian's packages, installed when missing).
      if (!fs.existsSync('/usr/aarch64-linux-gnu/lib/libstdc++.so.6') || spawnSync('qemu-aarch64', ['--version']).error) {
        sh('bash', [path.join(root, 'scripts', 'apt-install.sh'), 'qemu-user', 'libc6-arm64-cross', 'libstdc++6-arm64-cross'], { stdio: 'inherit' });
      }
      const armNode = path.join(nodeDist('linux', 'arm64', NODE_MAJORS[0], cache), 'bin', 'node');
      smoke(onMac, `wasm32 (npm) on arm64 Node ${NODE_MAJORS[0]} under qemu-aarch64`, ['qemu-aarch64', '-L', '/usr/aarch64-linux-gnu', armNode], 'arm64',
        { env: quiet, pins: false, backend: 'wasm32' });
      const pnpmOnMac = pnpmConsumerAs('pnpm-darwin-arm64', 'darwin', 'arm64', env, registry);
      smoke(pnpmOnMac, 'wasm32 (pnpm 10, as on darwin-arm64)', [process.execPath], 'x64', { env: quiet, pins: false, backend: 'wasm32' });
      testsAgainstPackage('wasm32 package', path.join(onMac, 'node_modules', '@mhsa', 'wasm32'), '@mhsa/wasm32', [process.execPath], WASM_TESTS, { MHSA_WASM_QUIET: '1' });
    }

    if (platforms.includes('linux-arm64')) {
      const arm64 = consumer('npm-arm64');
      npmInstall(arm64, env, registry, ['--cpu=arm64', '--os=linux', '--libc=glibc']);
      const armNode = path.join(nodeDist('linux', 'arm64', NODE_MAJORS[0], cache), 'bin', 'node');
      const qemu = ['qemu-aarch64', '-L', '/usr/aarch64-linux-gnu', armNode];
      smoke(arm64, 'arm64 under qemu-aarch64', qemu, 'arm64');
      testsAgainstPackage('arm64 package under qemu', path.join(arm64, 'node_modules', '@mhsa', 'linux-arm64-gnu'), '@mhsa/linux-arm64-gnu',
        qemu, EMULATED_TESTS, jestResolverFor('linux-arm64'));
    }

    if (platforms.includes('win32-x64')) {
      const win = consumer('npm-win32');
      npmInstall(win, env, registry, ['--os=win32', '--cpu=x64']);
      const installed = fs.readdirSync(path.join(win, 'node_modules', '@mhsa'));
      check(installed.includes('win32-x64') && !installed.some((p) => p.startsWith('linux-')),
        `npm install --os=win32 --cpu=x64 mhsa: node_modules/@mhsa holds ${installed.join(', ')}`);
      // The registry's Windows Node builds under wine: its own check for the Windows version is
      // skipped, and wine's debug lines are silenced.
      const wineEnv = { ...process.env, NODE_SKIP_PLATFORM_CHECK: '1', WINEDEBUG: '-all' };
      const winNode = (major) => [WINE, path.join(nodeDist('win', 'x64', major, cache), 'bin', 'node.exe')];
      if (!fs.existsSync(WINE)) sh('bash', [path.join(root, 'scripts', 'apt-install.sh'), 'wine64'], { stdio: 'inherit' });
      const wine = sh(WINE, ['--version']).trim();
      for (const major of NODE_MAJORS) {
        // wine 8.0 cannot start Node 24 and later (V8 aborts reserving its tables, before any module
        // loads, and wine then reports exit 3 or 0): that is wine's failure, not the package's.
        const notStarting = (stderr) =>
          major > 22 && /SegmentedTable::InitializeTable/.test(stderr) ? `Node ${major}'s node.exe did not start under ${wine} (V8: ${/Fatal[^\n]*/.exec(stderr)?.[0]})` : false;
        smoke(win, `win32-x64 under ${wine}, Node ${major}`, winNode(major), 'x64', { env: wineEnv, pins: false, notStarting });
      }
      // Hoisted: wine shows pnpm's Linux symlinks to Windows Node as plain directories, which it does not
      // resolve to their targets, so from node_modules/mhsa it could not see the packages beside mhsa's real
      // path (on Windows, pnpm makes junctions, which Node does resolve).
      const pnpmOnWindows = pnpmConsumerAs('pnpm-win32-x64', 'win32', 'x64', env, registry, ['--config.node-linker=hoisted']);
      const pnpmFetched = fs.readdirSync(path.join(pnpmOnWindows, 'node_modules', '@mhsa'));
      check(pnpmFetched.includes('win32-x64') && !pnpmFetched.some((p) => p.startsWith('linux-')),
        `pnpm add mhsa as on win32-x64: node_modules/@mhsa holds ${pnpmFetched.join(', ')}`);
      smoke(pnpmOnWindows, `win32-x64 (pnpm 10) under ${wine}, Node ${NODE_MAJORS[0]}`, winNode(NODE_MAJORS[0]), 'x64', { env: wineEnv, pins: false });
      testsAgainstPackage('win32-x64 package under wine', path.join(win, 'node_modules', '@mhsa', 'win32-x64'), '@mhsa/win32-x64',
        winNode(NODE_MAJORS[0]), WINDOWS_TESTS, { ...wineEnv, ...jestResolverFor('win32-x64') }, WINDOWS_EXCLUDED, true);
    }

    if (args.includes('--compare-onnxruntime')) {
      const ort = consumer('onnxruntime-node');
      fs.writeFileSync(path.join(ort, '.npmrc'), 'onnxruntime-node-install=skip\n');
      const install = () => sh('npm', ['install', 'onnxruntime-node@1.30.0', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: ort });
      install();
      fs.rmSync(path.join(ort, 'node_modules'), { recursive: true });
      fs.rmSync(path.join(ort, 'package-lock.json'));
      const seconds = timed(install);
      report.push(`     beside it, npm install onnxruntime-node@1.30.0: ${seconds.toFixed(1)} s from a warm cache, node_modules ${MB(duBytes(path.join(ort, 'node_modules')))}`);
    }
    checkGlibc();
  } finally {
    registry.server.kill();
  }
  console.log(`\nrelease rehearsal (${platforms.join(', ')}), ${((Date.now() - started) / 1000).toFixed(0)} s:\n${report.join('\n')}`);
  if (failures.length > 0) {
    console.error(`\n${failures.length} check(s) failed`);
    process.exit(1);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
