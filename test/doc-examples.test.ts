/**
 * The documentation's examples, run: every TSDoc `@example` in lib/ and every
 * ```ts block of the Markdown pages in DOC_PAGES (README.md, docs/api.md)
 * becomes a module that ts-jest type-checks against the real API and that then
 * runs, in a directory holding the .safetensors files the examples name. What
 * an example claims in a trailing comment is checked too where it is a value:
 *
 *   const o = attention(q, q, q); // shape [1, 2, 3, 4]     o.shape
 *   const q = matmul(x, w);       // [2, 197, 768]: ...      q.shape
 *   layerNorm(t).data;            // ≈ [-1.342, -0.447]      the values, to the digits shown
 *   matmul(a, b); // { data: Float32Array [4, 5], shape: [1, 2] }
 *   block.projectOut;             // false
 *   getNumThreads();              // 1                       a number, compared with ===
 *   matmul(a, a, opts);           // a · aᵀ, shape [2, 2]      also `shape: [..]`, `logical [..]`
 *
 * A comment on a code line that states numbers in brackets, ≈ or a boolean in
 * any other form fails the test, so a claim cannot go unread.
 * Names an example uses without defining (block, x, w, the README's weights)
 * come from a prelude: a ViT-B-sized block with small random weights and
 * inputs of matching shapes.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as mhsa from '../lib';
import { writeExampleCheckpoints } from './helpers/doc-examples';

const ROOT = path.resolve(__dirname, '..');

interface Example {
  where: string;
  lines: string[];
}

/** `@example` blocks of the .ts files in lib/ and its folders: the comment's lines from the tag to the next tag or the end. */
function tsdocExamples(): Example[] {
  const out: Example[] = [];
  for (const file of fs.readdirSync(path.join(ROOT, 'lib'), { encoding: 'utf8', recursive: true }).filter((f) => f.endsWith('.ts')).sort()) {
    const src = fs.readFileSync(path.join(ROOT, 'lib', file), 'utf8');
    for (const m of src.matchAll(/\/\*\*([\s\S]*?)\*\//g)) {
      const comment = m[1].split('\n').map((l) => l.replace(/^\s*\* ?/, ''));
      const line = src.slice(0, m.index).split('\n').length;
      let current: Example | null = null;
      comment.forEach((l, i) => {
        if (l.startsWith('@example')) {
          current = { where: `lib/${file}:${line + i}`, lines: [] };
          out.push(current);
        } else if (l.startsWith('@')) {
          current = null;
        } else if (current) {
          current.lines.push(l);
        }
      });
    }
  }
  return out;
}

/**
 * The Markdown pages whose ```ts blocks run, relative to the package root. A page
 * added here needs a floor in the 'are found' test below; docs/design/ notes
 * are not listed (their snippets explain, they are not API examples).
 */
const DOC_PAGES = ['README.md', 'docs/api.md'];

/** The ```ts blocks of one Markdown page, each named by the page and the block's first line. */
function markdownExamples(page: string): Example[] {
  const lines = fs.readFileSync(path.join(ROOT, page), 'utf8').split('\n');
  const out: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```ts') continue;
    const start = i + 1;
    while (i + 1 < lines.length && lines[i + 1].trim() !== '```') i++;
    out.push({ where: `${page}:${start}`, lines: lines.slice(start, i + 1) });
  }
  return out;
}

const NUMBERS = String.raw`\[(-?[\d.]+(?:,\s*-?[\d.]+)*)\]`;
const INTEGERS = String.raw`\[(\d+(?:,\s*\d+)*)\]`;

/**
 * Rewrites one line: a checked claim becomes a call to a checker after (or
 * around) the statement. Returns the line unchanged where it claims nothing
 * checkable (a shape with names in it, prose).
 */
function withChecks(line: string, at: string, claims: Claims): string {
  const code = line.replace(/\s*\/\/.*$/, '');
  const comment = line.slice(code.length).replace(/^\s*\/\/\s*/, '');
  if (!comment || !code.trim()) return line;
  const checked = claimCheck(code, comment, at);
  if (checked !== null) claims.n++;
  else if (CLAIM_LIKE.test(comment)) claims.unchecked.push(`${at}: ${line.trim()}`);
  return checked ?? line;
}

/** A comment that states a value: a list of numbers, ≈, a boolean or a lone number. */
const CLAIM_LIKE = /\[-?\d[\d.]*(?:,\s*-?\d[\d.]*)*\]|^≈|^(?:true|false)$|^-?\d+(?:\.\d+)?$/;

interface Claims {
  n: number;
  unchecked: string[];
}

/** The line with its claim's check, or null where the comment claims nothing this reads. */
function claimCheck(code: string, comment: string, at: string): string | null {
  const stmt = code.trim().replace(/;$/, '');
  if (!code.trim().endsWith(';')) return null;
  const where = JSON.stringify(at);
  const declared = /^(?:const|let) (\w+) = /.exec(stmt);
  const indent = /^\s*/.exec(code)![0];
  // A declaration is checked after it; a bare expression is evaluated once, inside the check.
  const check = (fn: string, target: string, ...args: string[]) => {
    const call = `${fn}(${[target, ...args, where].join(', ')});`;
    return declared || target !== stmt ? `${code} ${call}` : `${indent}${call}`;
  };
  let m: RegExpExecArray | null;
  if ((m = new RegExp(String.raw`^\{ data: Float32Array ${NUMBERS}, shape: ${INTEGERS} \}`).exec(comment))) {
    return check('__expectTensor', declared ? declared[1] : stmt, JSON.stringify(m[1]), `[${m[2]}]`);
  }
  if (stmt.endsWith('.data') && (m = new RegExp(String.raw`^≈?\s*${NUMBERS}`).exec(comment))) {
    return check('__expectClose', stmt, JSON.stringify(m[1]));
  }
  // `// [2, 197, 768]: ...`, `// a · aᵀ, shape [2, 2]`, `// { data: Float32Array, shape: [2304, 768] }`,
  // `// logical [768, 2304]` (a PackedMatrix's shape).
  if ((m = new RegExp(String.raw`^${INTEGERS}(?:$|[:,;\s])|(?:\bshape:? |\blogical )${INTEGERS}`).exec(comment))) {
    const shape = m[1] ?? m[2];
    const target = declared ? declared[1] : stmt.endsWith('.shape') ? stmt.slice(0, -'.shape'.length) : stmt;
    return check('__expectShape', target, `[${shape}]`);
  }
  // `const { output, weights } = ...; // weights [8, 197, 197]`: a name the statement binds.
  if ((m = new RegExp(String.raw`^(\w+) ${INTEGERS}(?:$|[:,;\s])`).exec(comment)) && new RegExp(String.raw`^(?:const|let) \{[^}]*\b${m[1]}\b`).test(stmt)) {
    return check('__expectShape', m[1], `[${m[2]}]`);
  }
  if ((m = /^(true|false|-?\d+(?:\.\d+)?)$/.exec(comment.trim()))) {
    return check('__expectEqual', stmt, m[1]);
  }
  return null;
}

const PRELUDE_NAMES: Record<string, string> = {
  block: 'const block = __vitBlock();',
  x: 'const x = __input(2);',
  x1: 'const x1 = __input(1);',
  x2: 'const x2 = __input(3);',
  hugeBatch: 'const hugeBatch = __input(4);',
  w: 'const w = __random([2304, 768]);',
  weights: 'const weights = __random([2304, 768]).data;',
  bias: 'const bias = __random([2304]);',
  qkvWeight: 'const qkvWeight = __random([2304, 768]);',
  qkvBias: 'const qkvBias = __random([2304]);',
  outWeight: 'const outWeight = __random([768, 768]);',
  outBias: 'const outBias = __random([768]);',
  normWeight: 'const normWeight = __random([768]);',
  normBias: 'const normBias = __random([768]);',
};

/** The module for one example: imports, the prelude's missing names, the body with its checks. */
function moduleSource(ex: Example, claims: Claims): string {
  const lib = JSON.stringify(path.join(ROOT, 'lib'));
  const imports: string[] = [];
  const body: string[] = [];
  ex.lines.forEach((line, i) => {
    if (/^import .* from 'mhsa';$/.test(line.trim())) imports.push(line.replace(`'mhsa'`, lib));
    else body.push(withChecks(line, `${ex.where} (+${i})`, claims));
  });
  const text = ex.lines.join('\n');
  const declares = (name: string) => new RegExp(String.raw`(?:const|let)\s+(?:\{[^}]*\b${name}\b[^}]*\}|\[[^\]]*\b${name}\b[^\]]*\]|${name}\b)`).test(text);
  const prelude = Object.entries(PRELUDE_NAMES)
    .filter(([name]) => new RegExp(String.raw`\b${name}\b`).test(text) && !declares(name))
    .map(([, decl]) => decl);
  // Every export under its own name unless the example imports its own; the helpers' names start with __.
  const all = imports.length === 0 ? [`import { ${Object.keys(mhsa).sort().join(', ')}, type Tensor, type TensorLike, type Bf16Tensor } from ${lib};`] : [];
  return [
    '// Generated from the documentation by test/doc-examples.test.ts.',
    ...all,
    ...imports,
    `import { __expectClose, __expectEqual, __expectShape, __expectTensor, __input, __random, __vitBlock } from ${JSON.stringify(path.join(ROOT, 'test', 'helpers', 'doc-examples'))};`,
    'export async function main(): Promise<void> {',
    ...prelude.map((l) => `  ${l}`),
    ...body.map((l) => `  ${l}`),
    '}',
    '',
  ].join('\n');
}


const examples = [...tsdocExamples(), ...DOC_PAGES.flatMap(markdownExamples)];
const claims: Claims = { n: 0, unchecked: [] };
const sources = examples.map((ex) => moduleSource(ex, claims));

describe('the documentation examples', () => {
  const cwd = process.cwd();
  // Examples set these; later files in this worker must not inherit them.
  const threads = mhsa.getNumThreads();
  const allocationLimit = mhsa.getAllocationLimit();
  const resultPoolLimit = mhsa.info().resultPool.limitBytes;
  let dir = '';
  beforeAll(() => {
    // The modules, and the files the examples load, in the directory they run in.
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mhsa-doc-examples-'));
    if (process.env.MHSA_DOC_EXAMPLES_KEEP) console.log(`doc examples written to ${dir}`);
    sources.forEach((source, i) => fs.writeFileSync(path.join(dir, `example${i}.ts`), source));
    writeExampleCheckpoints(dir);
    process.chdir(dir);
  });
  afterAll(() => {
    process.chdir(cwd);
    mhsa.setNumThreads(threads);
    mhsa.setAllocationLimit(allocationLimit);
    mhsa.setResultPoolLimit(resultPoolLimit);
    if (!process.env.MHSA_DOC_EXAMPLES_KEEP) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('are found: every TSDoc @example and ```ts block of README.md and docs/api.md, every value claim checked', () => {
    // Counts at the time of writing, as floors: a parser that stops finding them fails here.
    const from = (prefix: string) => examples.filter((e) => e.where.startsWith(prefix)).length;
    expect(from('lib/')).toBeGreaterThanOrEqual(15);
    expect(from('README.md:')).toBeGreaterThanOrEqual(6);
    expect(from('docs/api.md:')).toBeGreaterThanOrEqual(12);
    expect(claims.n).toBeGreaterThanOrEqual(40);
    // A comment that states a value in a form the checks do not read (or on a line without its `;`).
    expect(claims.unchecked).toEqual([]);
  });

  test.each(examples.map((ex, i) => [ex.where, i]))('%s type-checks and runs', async (_where, i) => {
    const mod = require(path.join(dir, `example${i}.ts`)) as { main: () => Promise<void> };
    await mod.main();
  });
});
