/**
 * The package as a consumer sees it: CommonJS require and ESM import of the
 * compiled dist/ from child Node processes, the declaration files, the
 * package.json fields, and info()/setNumThreads().
 *
 * Needs dist/: run `npx tsc -p tsconfig.build.json` first.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as ts from 'typescript';
import * as lib from '../lib';
import { info, setNumThreads } from '../lib';
import { PREBUILT_PLATFORMS, WASM_PACKAGE } from '../lib/load-addon';
import { ensureCompiled } from './helpers/compiled';

const ROOT = path.resolve(__dirname, '..');
const PKG = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  license?: string;
  main?: string;
  types?: string;
  exports?: Record<string, unknown>;
  binary?: { napi_versions?: number[] };
};

const API = [
  'matmul',
  'matmulAsync',
  'softmax',
  'softmaxAsync',
  'attention',
  'attentionAsync',
  'tensor',
  'info',
  'setNumThreads',
] as const;

/** [1 2 3; 4 5 6] · [7 8; 9 10; 11 12] */
const SMALL_MATMUL = {
  a: [1, 2, 3, 4, 5, 6],
  b: [7, 8, 9, 10, 11, 12],
  expected: [58, 64, 139, 154],
};

const ADDON = process.env.MHSA_ADDON === 'cmake' ? 'cmake-js build (MHSA_ADDON=cmake)' : 'node-gyp build';


/** Runs `node <args>` in the repo root; returns the JSON printed on stdout's last line. */
function runNode(args: string[]): Record<string, unknown> {
  ensureCompiled();
  const r = spawnSync(process.execPath, args, {
    cwd: ROOT,
    env: process.env,
    encoding: 'utf8',
    timeout: 30_000,
  });
  if (r.error) throw r.error;
  if (r.status !== 0) {
    throw new Error(`node ${args.slice(0, -1).join(' ')} exited with ${r.status ?? r.signal}:\n${r.stderr}\n${r.stdout}`);
  }
  const lines = r.stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]) as Record<string, unknown>;
}

/** Expects fn to throw an error with this name and a message containing `text` (realm-independent). */
function expectThrows(fn: () => unknown, name: string, text: string): void {
  let thrown: unknown;
  try {
    fn();
  } catch (e) {
    thrown = e;
  }
  if (thrown === undefined) throw new Error(`expected a ${name} containing '${text}', nothing was thrown`);
  expect(thrown).toEqual(expect.objectContaining({ name, message: expect.stringContaining(text) }));
}

describe('CommonJS: require() of the repo root in a child process', () => {
  let out: Record<string, unknown>;
  beforeAll(() => {
    const script = `
      const m = require('./');
      const names = ${JSON.stringify(API)};
      const a = m.tensor(new Float32Array(${JSON.stringify(SMALL_MATMUL.a)}), [2, 3]);
      const b = m.tensor(new Float32Array(${JSON.stringify(SMALL_MATMUL.b)}), [3, 2]);
      const r = m.matmul(a, b);
      m.matmulAsync(a, b).then((ra) => {
        console.log(JSON.stringify({
          resolved: require.resolve('./'),
          selfRef: require.resolve('mhsa'),
          keys: Object.keys(m).sort(),
          types: Object.fromEntries(names.map((n) => [n, typeof m[n]])),
          shape: r.shape,
          data: Array.from(r.data),
          isFloat32: r.data instanceof Float32Array,
          asyncData: Array.from(ra.data),
          version: m.info().version,
        }));
      }, (e) => { console.error(e); process.exit(1); });
    `;
    out = runNode(['-e', script]);
  });

  test('resolves to package.json "main" (and self-reference to the exports "require" target)', () => {
    expect(out.resolved).toBe(path.join(ROOT, PKG.main ?? '<no main>'));
    const dot = (PKG.exports?.['.'] ?? {}) as Record<string, string>;
    expect(out.selfRef).toBe(path.join(ROOT, dot.require ?? '<no exports require>'));
  });

  test('exports every API function', () => {
    expect(out.types).toEqual(Object.fromEntries(API.map((n) => [n, 'function'])));
  });

  test('exports the same names as lib/index.ts (dist/ is not stale)', () => {
    expect(out.keys).toEqual(Object.keys(lib).sort());
  });

  test('computes a small matmul correctly, sync and async', () => {
    expect(out.shape).toEqual([2, 2]);
    expect(out.isFloat32).toBe(true);
    expect(out.data).toEqual(SMALL_MATMUL.expected);
    expect(out.asyncData).toEqual(SMALL_MATMUL.expected);
  });

  test('info().version is the package version', () => {
    expect(out.version).toBe(PKG.version);
  });
});

describe("ESM: import from 'mhsa' (self-reference through the exports map) in a child process", () => {
  let out: Record<string, unknown>;
  beforeAll(() => {
    const script = `
      import { matmul, info, tensor } from 'mhsa';
      import mhsa from 'mhsa';
      import * as ns from 'mhsa';
      const names = ${JSON.stringify(API)};
      const a = tensor(new Float32Array(${JSON.stringify(SMALL_MATMUL.a)}), [2, 3]);
      const b = tensor(new Float32Array(${JSON.stringify(SMALL_MATMUL.b)}), [3, 2]);
      const r = matmul(a, b);
      const rd = mhsa.matmul(a, b);
      console.log(JSON.stringify({
        resolved: import.meta.resolve('mhsa'),
        namedTypes: Object.fromEntries(names.map((n) => [n, typeof ns[n]])),
        namedKeys: Object.keys(ns).filter((k) => k !== 'default').sort(),
        defaultTypes: Object.fromEntries(names.map((n) => [n, typeof mhsa?.[n]])),
        sameFunction: mhsa.matmul === matmul,
        data: Array.from(r.data),
        defaultData: Array.from(rd.data),
        info: info(),
      }));
    `;
    out = runNode(['--input-type=module', '-e', script]);
  });

  test('resolves to the exports "import" target', () => {
    const dot = (PKG.exports?.['.'] ?? {}) as Record<string, string>;
    expect(out.resolved).toBe(pathToFileURL(path.join(ROOT, dot.import ?? '<no exports import>')).href);
  });

  test('named imports: every API function, and the same names as the CommonJS build', () => {
    expect(out.namedTypes).toEqual(Object.fromEntries(API.map((n) => [n, 'function'])));
    expect(out.namedKeys).toEqual(Object.keys(lib).sort());
  });

  test('default import: the same module object', () => {
    expect(out.defaultTypes).toEqual(Object.fromEntries(API.map((n) => [n, 'function'])));
    expect(out.sameFunction).toBe(true);
  });

  test('computes a small matmul through named and default imports; info() works', () => {
    expect(out.data).toEqual(SMALL_MATMUL.expected);
    expect(out.defaultData).toEqual(SMALL_MATMUL.expected);
    expect(out.info).toEqual(expect.objectContaining({ version: PKG.version, isa: expect.any(String) }));
  });
});

describe('type declarations', () => {
  const dts = path.join(ROOT, 'dist', 'lib', 'index.d.ts');
  let program: ts.Program;
  let host: ts.CompilerHost;
  // A virtual file inside the package, so 'mhsa' resolves by self-reference through the exports map.
  const consumer = path.join(ROOT, '__packaging_consumer__.ts');
  const source = `
    import { matmul, matmulAsync, softmax, softmaxAsync, attention, attentionAsync, tensor, info, setNumThreads, type Tensor } from 'mhsa';
    const t: Tensor = tensor(new Float32Array(4), [2, 2]);
    const r: Tensor = matmul(t, t, { transposeB: true });
    const p: Promise<Tensor> = matmulAsync(t, t);
    const s: Tensor = softmax(t, { scale: 2 });
    const sp: Promise<Tensor> = softmaxAsync(t);
    const q = tensor(new Float32Array(8), [1, 1, 2, 4]);
    const o: Tensor = attention(q, q, q, { causal: true });
    const w: Tensor = attention(q, q, q, { returnWeights: true }).weights;
    const op: Promise<Tensor> = attentionAsync(q, q, q);
    const v: string = info().version;
    const n: number = info().threads;
    setNumThreads(1);
    // @ts-expect-error setNumThreads takes a number
    setNumThreads('2');
    export { r, p, s, sp, o, w, op, v, n };
  `;
  const options: ts.CompilerOptions = {
    noEmit: true,
    strict: true,
    module: ts.ModuleKind.Node16,
    moduleResolution: ts.ModuleResolutionKind.Node16,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts'],
    types: [],
  };

  beforeAll(() => {
    ensureCompiled();
    host = ts.createCompilerHost(options);
    const getSourceFile = host.getSourceFile.bind(host);
    const fileExists = host.fileExists.bind(host);
    const readFile = host.readFile.bind(host);
    host.getSourceFile = (file, lang, ...rest) =>
      path.resolve(file) === consumer ? ts.createSourceFile(file, source, lang) : getSourceFile(file, lang, ...rest);
    host.fileExists = (file) => path.resolve(file) === consumer || fileExists(file);
    host.readFile = (file) => (path.resolve(file) === consumer ? source : readFile(file));
    program = ts.createProgram([consumer], options, host);
  });

  test('dist/lib/index.d.ts exists and declares every API function', () => {
    expect(fs.existsSync(dts)).toBe(true);
    const sf = program.getSourceFile(dts);
    expect(sf).toBeDefined();
    const checker = program.getTypeChecker();
    const moduleSymbol = checker.getSymbolAtLocation(sf!)!;
    const kinds: Record<string, string> = {};
    for (const sym of checker.getExportsOfModule(moduleSymbol)) {
      const target = sym.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(sym) : sym;
      kinds[sym.name] = target.flags & ts.SymbolFlags.Function ? 'function' : 'other';
    }
    for (const name of API) expect({ name, kind: kinds[name] }).toEqual({ name, kind: 'function' });
  });

  test("'mhsa' resolves to dist/lib/index.d.ts through the exports map (node16), and a consumer type-checks", () => {
    const resolved = ts.resolveModuleName('mhsa', consumer, options, host).resolvedModule?.resolvedFileName;
    expect(resolved && path.resolve(resolved)).toBe(dts);
    // Includes the declaration files themselves (no skipLibCheck).
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file ? `${path.relative(ROOT, d.file.fileName)}: ` : '';
      return where + ts.flattenDiagnosticMessageText(d.messageText, '\n');
    });
    expect(diagnostics).toEqual([]);
  });
});

describe('package.json', () => {
  test('has a top-level "main" that exists', () => {
    expect(typeof PKG.main).toBe('string');
    expect(fs.existsSync(path.join(ROOT, PKG.main!))).toBe(true);
  });

  test('has an exports map with types (first), import and require, all existing', () => {
    const dot = PKG.exports?.['.'] as Record<string, string> | undefined;
    expect(dot).toEqual(expect.objectContaining({ types: expect.any(String), import: expect.any(String), require: expect.any(String) }));
    // Conditions match in key order: "types" must come before import/require to be used.
    expect(Object.keys(dot!)[0]).toBe('types');
    for (const cond of ['types', 'import', 'require']) {
      expect({ cond, exists: fs.existsSync(path.join(ROOT, dot![cond])) }).toEqual({ cond, exists: true });
    }
    expect(path.resolve(ROOT, dot!.require)).toBe(path.resolve(ROOT, PKG.main!));
  });

  test('"binary": {"napi_versions": [8]} (cmake-js builds offline only with it)', () => {
    expect(PKG.binary).toEqual(expect.objectContaining({ napi_versions: [8] }));
  });
});

describe('as installed from the registry', () => {
  test('the tarball compiles nothing on install: no install script, no binding.gyp, no native sources, no dependencies', () => {
    const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8' });
    expect(r.status).toBe(0);
    const files = new Set((JSON.parse(r.stdout) as { files: { path: string }[] }[])[0].files.map((f) => f.path));
    // npm runs `node-gyp rebuild` by itself for a package with a binding.gyp at its root and no install script.
    expect([...files].filter((f) => f === 'binding.gyp' || f.startsWith('native/') || f.endsWith('.node'))).toEqual([]);
    const scripts = (PKG as { scripts?: Record<string, string> }).scripts ?? {};
    expect(['preinstall', 'install', 'postinstall'].filter((s) => s in scripts)).toEqual([]);
    expect((PKG as { dependencies?: Record<string, string> }).dependencies ?? {}).toEqual({});
    expect([PKG.main!, 'dist/lib/index.d.ts', 'dist/lib/load-addon.js'].filter((f) => !files.has(f))).toEqual([]);
    // mhsa-bench runs from dist/; its pytorch peer's Python worker is not compiled there.
    const cli = ['benchmarks/cli/bin/mhsa-bench.js', 'dist/benchmarks/cli/cli.js', 'dist/benchmarks/cli/peers/pytorch.js', 'benchmarks/cli/peers/pytorch_worker.py'];
    expect(cli.filter((f) => !files.has(f))).toEqual([]);
    // Of the benchmarks, only the CLI ships, as JS, with its README (options, JSON schema: --help points
    // there): no sources, maps or declarations, no tools/ or native/.
    const shipsWithCli = (f: string) => cli.includes(f) || f === 'benchmarks/README.md' || /^dist\/benchmarks\/cli\/.+\.js$/.test(f);
    expect([...files].filter((f) => (f.startsWith('benchmarks/') || f.startsWith('dist/benchmarks/')) && !shipsWithCli(f))).toEqual([]);
    expect([...files].filter((f) => f.startsWith('dist/') && !f.startsWith('dist/lib/') && !f.startsWith('dist/benchmarks/cli/'))).toEqual([]);
  });

  test('every shipped source map points at shipped sources, and the license text ships', () => {
    const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8' });
    expect(r.status).toBe(0);
    const files = new Set((JSON.parse(r.stdout) as { files: { path: string }[] }[])[0].files.map((f) => f.path));
    const maps = [...files].filter((f) => f.endsWith('.map'));
    expect(maps.length).toBeGreaterThan(0);
    const missing: string[] = [];
    const shippedPath = (from: string, rel: string) =>
      path.relative(ROOT, path.resolve(ROOT, path.dirname(from), rel)).split(path.sep).join('/');
    for (const map of maps) {
      const { sources, sourceRoot } = JSON.parse(fs.readFileSync(path.join(ROOT, map), 'utf8')) as { sources: string[]; sourceRoot?: string };
      for (const s of sources) {
        const source = shippedPath(map, path.join(sourceRoot ?? '', s));
        if (!files.has(source)) missing.push(`${map} -> ${source}`);
      }
    }
    // And the other way: a compiled file's sourceMappingURL names a shipped map. The benchmark CLI
    // ships as JS alone (no sources to map to); Node, even with --enable-source-maps, skips a missing map.
    for (const js of [...files].filter((f) => f.endsWith('.js') && f.startsWith('dist/') && !f.startsWith('dist/benchmarks/'))) {
      const url = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(fs.readFileSync(path.join(ROOT, js), 'utf8'));
      if (url && !files.has(shippedPath(js, url[1]))) missing.push(`${js} -> ${shippedPath(js, url[1])}`);
    }
    expect(missing).toEqual([]);
    expect(files.has('LICENSE')).toBe(true);
    const license = fs.readFileSync(path.join(ROOT, 'LICENSE'), 'utf8');
    expect(PKG.license).toBe('MIT');
    expect(license).toMatch(/^MIT License\n/);
  });

  test('mhsa-bench runs dist/ as installed, though npm unpacks lib/*.ts after it (it fell back to ts-node and crashed)', () => {
    const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8' });
    const files = (JSON.parse(r.stdout) as { files: { path: string }[] }[])[0].files.map((f) => f.path);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-installed-'));
    try {
      for (const f of files) {
        fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
        fs.copyFileSync(path.join(ROOT, f), path.join(dir, f));
      }
      // As npm leaves it: every source written after its compiled form, and ts-node within reach.
      const later = new Date(Date.now() + 60_000);
      for (const f of files.filter((f) => f.startsWith('lib/') && f.endsWith('.ts'))) fs.utimesSync(path.join(dir, f), later, later);
      fs.symlinkSync(path.join(ROOT, 'build'), path.join(dir, 'build'));
      fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
      const env = { ...process.env };
      delete env.MHSA_ADDON; // the copy has the install's build/ only
      const bin = path.join(dir, 'benchmarks', 'cli', 'bin', 'mhsa-bench.js');
      const run = spawnSync(process.execPath, [bin, '--help'], { cwd: dir, env, encoding: 'utf8' });
      expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
      expect(run.stdout).toContain('mhsa-bench');
      // The shipped JS is the whole CLI: a check of a GEMM and the block runs from it.
      const check = spawnSync(process.execPath, [bin, '--check', '--workload', 'g_sq64,m_vit1', '--threads', '1'], { cwd: dir, env, encoding: 'utf8' });
      expect({ status: check.status, stderr: check.stderr }).toEqual({ status: 0, stderr: '' });
      expect(check.stdout).toMatch(/^2 ok, 0 wrong, 0 errors, 0 skipped/m);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  /** dist/ and package.json alone, as the registry's tarball leaves them, with node_modules holding `extra`. */
  function installedCopy(extra: Record<string, string>, body: (dir: string) => void): void {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-installed-'));
    try {
      fs.cpSync(path.join(ROOT, 'dist'), path.join(dir, 'dist'), { recursive: true });
      fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
      for (const [file, from] of Object.entries(extra)) {
        fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
        fs.copyFileSync(from, path.join(dir, file));
      }
      body(dir);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  function requireIn(dir: string, env: Record<string, string> = {}) {
    const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
    if (!('MHSA_ADDON' in env)) delete childEnv.MHSA_ADDON;
    const script = 'const m = require("."); console.log(JSON.stringify({ isa: m.info().isa, pins: m.info().pinsAsyncBuffers, files: Object.keys(require.cache).filter((f) => f.endsWith(".node")) }))';
    return spawnSync(process.execPath, ['-e', script], { cwd: dir, env: childEnv, encoding: 'utf8' });
  }

  const built = path.join(ROOT, 'build', 'Release', 'mhsa.node');
  const platformPackage = PREBUILT_PLATFORMS[`${process.platform}-${process.arch}`];

  test('with no build and no platform package, require() names the platform and how to build from source', () => {
    installedCopy({}, (dir) => {
      const r = requireIn(dir);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain(`mhsa: no addon for ${process.platform}-${process.arch}`);
      expect(r.stderr).toContain(`Node ${process.versions.node} (ABI ${process.versions.modules})`);
      if (process.platform === 'linux') expect(r.stderr).toMatch(/, (glibc [0-9.]+|musl|unknown libc),/);
      expect(r.stderr).toContain('run `npm install` in a checkout of mhsa');
    });
  });

  (platformPackage ? test : test.skip)('the platform package is loaded when there is no local build, and MHSA_ADDON wins over both', () => {
    const pkgDir = `node_modules/${platformPackage}`;
    installedCopy({ [`${pkgDir}/package.json`]: path.join(ROOT, 'package.json'), [`${pkgDir}/mhsa.node`]: built }, (dir) => {
      const r = requireIn(dir);
      expect(r.stderr).toBe('');
      const out = JSON.parse(r.stdout) as { isa: string; files: string[] };
      expect(out.files).toEqual([fs.realpathSync(path.join(dir, pkgDir, 'mhsa.node'))]);
      const chosen = requireIn(dir, { MHSA_ADDON: built });
      expect((JSON.parse(chosen.stdout) as { files: string[] }).files).toEqual([built]);
    });
  });

  const wasmBuild = path.join(ROOT, 'build-wasm', 'mhsa.wasm');
  const emnapiFiles = {
    'emnapi-core.min.js': path.join(ROOT, 'node_modules', '@emnapi', 'core', 'dist', 'emnapi-core.min.js'),
    'emnapi-runtime.min.js': path.join(ROOT, 'node_modules', '@emnapi', 'runtime', 'dist', 'emnapi.min.js'),
  };
  const wasmPackage = (dir = `node_modules/${WASM_PACKAGE}`) => ({
    [`${dir}/package.json`]: path.join(ROOT, 'package.json'),
    [`${dir}/mhsa.wasm`]: wasmBuild,
    ...Object.fromEntries(Object.entries(emnapiFiles).map(([f, from]) => [`${dir}/${f}`, from])),
  });

  // Needs `npm run build:wasm` (clang-22 from Debian: .ci/run builds it before the suite).
  (fs.existsSync(wasmBuild) ? test : test.skip)('without a native package the wasm package is taken; where one should exist, stderr says so once, unless MHSA_WASM_QUIET=1', () => {
    installedCopy(wasmPackage(), (dir) => {
      const script = 'const m = require("."); m.info(); require("./dist/lib/native"); console.log(m.info().backend)';
      const env: NodeJS.ProcessEnv = { ...process.env };
      delete env.MHSA_ADDON;
      const r = spawnSync(process.execPath, ['-e', script], { cwd: dir, env, encoding: 'utf8' });
      expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 0, stdout: 'wasm32\n' });
      const warnings = r.stderr.split('\n').filter((l) => l.startsWith('mhsa: running the WebAssembly addon'));
      if (platformPackage) {
        expect(warnings).toHaveLength(1);
        expect(warnings[0]).toContain(`the optional dependency ${platformPackage}, is not installed`);
        expect(warnings[0]).toContain('MHSA_WASM_QUIET=1');
      } else {
        expect(warnings).toEqual([]); // no native package to miss: wasm is what this platform gets
      }
      const quiet = spawnSync(process.execPath, ['-e', script], { cwd: dir, env: { ...env, MHSA_WASM_QUIET: '1' }, encoding: 'utf8' });
      expect({ status: quiet.status, stdout: quiet.stdout, stderr: quiet.stderr }).toEqual({ status: 0, stdout: 'wasm32\n', stderr: '' });
    });
  });

  (fs.existsSync(wasmBuild) && platformPackage ? test : test.skip)('the native package wins over the wasm package; MHSA_ADDON=wasm picks wasm', () => {
    const pkgDir = `node_modules/${platformPackage}`;
    installedCopy({ ...wasmPackage(), [`${pkgDir}/package.json`]: path.join(ROOT, 'package.json'), [`${pkgDir}/mhsa.node`]: built }, (dir) => {
      const script = 'console.log(require(".").info().backend)';
      const env: NodeJS.ProcessEnv = { ...process.env };
      delete env.MHSA_ADDON;
      const native = spawnSync(process.execPath, ['-e', script], { cwd: dir, env, encoding: 'utf8' });
      expect({ stdout: native.stdout, stderr: native.stderr }).toEqual({ stdout: 'native\n', stderr: '' });
      const wasm = spawnSync(process.execPath, ['-e', script], { cwd: dir, env: { ...env, MHSA_ADDON: 'wasm' }, encoding: 'utf8' });
      expect({ stdout: wasm.stdout, stderr: wasm.stderr }).toEqual({ stdout: 'wasm32\n', stderr: '' });
    });
  });

  test('MHSA_ADDON needs no package.json above dist/ (benchmarks/tools/ab-addons.js loads bare copies of dist/)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-bare-dist-'));
    try {
      fs.cpSync(path.join(ROOT, 'dist'), path.join(dir, 'dist'), { recursive: true });
      const r = spawnSync(process.execPath, ['-e', 'console.log(require("./dist/lib").info().isa)'], {
        cwd: dir,
        env: { ...process.env, MHSA_ADDON: built },
        encoding: 'utf8',
      });
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  // Another copy of mhsa in the process (two versions in one dependency tree) must not share
  // mhsa's own symbols: the statics of inline functions, such as the per-thread scratch, are GNU
  // unique symbols when exported, which the dynamic linker binds across copies whatever
  // RTLD_LOCAL says. Two builds with different scratch layouts corrupted the heap that way.
  const ownBuilds = [built, path.join(ROOT, 'build-cmake', 'Release', 'mhsa.node')].filter((f) => fs.existsSync(f));
  test.each(ownBuilds)('%s exports no symbol of mhsa\'s own, only the Node-API entry points', (file) => {
    const nm = spawnSync('nm', ['-D', '--defined-only', file], { encoding: 'utf8' });
    if (nm.error) return; // no binutils here: nothing to read the table with
    const own = nm.stdout.split('\n').filter((line) => /_ZN?Z?N4mhsa|\bnapi_register_module|\bnode_api_module/.test(line));
    const entryPoints = own.filter((line) => /\b(napi_register_module_v1|node_api_module_get_api_version_v1)$/.test(line));
    expect(own.filter((line) => !entryPoints.includes(line))).toEqual([]);
    expect(entryPoints.length).toBeGreaterThan(0);
  });

  test('a local build is preferred to the platform package; a broken one is named, not skipped', () => {
    const pkgDir = `node_modules/${platformPackage ?? '@mhsa/none'}`;
    installedCopy({ [`${pkgDir}/package.json`]: path.join(ROOT, 'package.json'), [`${pkgDir}/mhsa.node`]: built, 'build/Release/mhsa.node': built }, (dir) => {
      const r = requireIn(dir);
      expect((JSON.parse(r.stdout) as { files: string[] }).files).toEqual([fs.realpathSync(path.join(dir, 'build', 'Release', 'mhsa.node'))]);
      fs.writeFileSync(path.join(dir, 'build', 'Release', 'mhsa.node'), 'not an ELF file');
      const broken = requireIn(dir);
      expect(broken.status).not.toBe(0);
      expect(broken.stderr).toContain(`mhsa: the native addon ${path.join(fs.realpathSync(dir), 'build', 'Release', 'mhsa.node')} (local build) could not be loaded`);
    });
  });
});

describe(`info() and setNumThreads() (${ADDON})`, () => {
  test('info() reports the package version, an ISA and a thread count', () => {
    const i = info();
    expect(i.version).toBe(PKG.version);
    expect(typeof i.isa).toBe('string');
    expect(i.isa.length).toBeGreaterThan(0);
    expect(Number.isInteger(i.threads)).toBe(true);
    expect(i.threads).toBeGreaterThanOrEqual(1);
  });

  test('an unknown MHSA_ISA or MHSA_NUM_THREADS is named in a warning, not ignored in silence', () => {
    const probe = (env: Record<string, string>) =>
      spawnSync(process.execPath, ['-e', 'const i = require(".").info(); console.log(i.isa, i.threads)'], {
        cwd: ROOT,
        env: { ...process.env, MHSA_ISA: '', MHSA_NUM_THREADS: '', ...env },
        encoding: 'utf8',
      });
    const bad = probe({ MHSA_ISA: 'avx5l2', MHSA_NUM_THREADS: 'two' });
    expect(bad.status).toBe(0);
    expect(bad.stderr).toContain('MhsaWarning: MHSA_ISA="avx5l2" is not avx512, avx2 or portable');
    expect(bad.stderr).toContain('MhsaWarning: MHSA_NUM_THREADS="two" is not a whole number from 1 to 1024');
    const good = probe({ MHSA_ISA: 'portable', MHSA_NUM_THREADS: '1' });
    expect({ status: good.status, stdout: good.stdout, stderr: good.stderr }).toEqual({ status: 0, stdout: 'portable 1\n', stderr: '' });
  });

  test('setNumThreads(1) takes effect and can be restored', () => {
    const before = info().threads;
    try {
      setNumThreads(1);
      expect(info().threads).toBe(1);
      expect(lib.getNumThreads()).toBe(1);
    } finally {
      setNumThreads(before);
    }
    expect(info().threads).toBe(before);
  });

  test('setNumThreads rejects non-integers, out-of-range values and non-numbers', () => {
    const before = info().threads;
    expectThrows(() => setNumThreads(0), 'RangeError', 'setNumThreads');
    expectThrows(() => setNumThreads(1.5), 'RangeError', 'setNumThreads');
    expectThrows(() => setNumThreads('2' as unknown as number), 'TypeError', 'setNumThreads');
    expectThrows(() => setNumThreads(-1), 'RangeError', 'setNumThreads');
    expectThrows(() => setNumThreads(NaN), 'RangeError', 'setNumThreads');
    expectThrows(() => setNumThreads(Infinity), 'RangeError', 'setNumThreads');
    expectThrows(() => setNumThreads(undefined as unknown as number), 'TypeError', 'setNumThreads');
    expect(info().threads).toBe(before);
  });

  test('the selected addon build is present', () => {
    const file =
      process.env.MHSA_ADDON === 'cmake'
        ? path.join(ROOT, 'build-cmake', 'Release', 'mhsa.node')
        : path.join(ROOT, 'build', 'Release', 'mhsa.node');
    expect(fs.existsSync(file)).toBe(true);
  });
});
