/**
 * MultiHeadSelfAttention.fromTorch's naming schemes: which keys of a state dict
 * hold the attention weights (torch.nn.MultiheadAttention's, vit-pytorch's
 * `Attention`'s, Hugging Face's separate projections; the list is in fromTorch's
 * documentation), checked and gathered into a MultiHeadSelfAttentionConfig.
 */
import { types } from 'node:util';
import { formatShape, rangeError, typeError } from '../errors';
import { widenBf16 } from '../bf16';
import { checkBf16Tensor, checkExactShape, checkTensor, isBf16Tensor, type Bf16Tensor, type CheckedTensor, type Tensor } from '../tensor';
import { checkEps, checkOptions, isRecordLike, optEnum, positiveInteger } from '../validate';
import type { MultiHeadSelfAttentionConfig, MultiHeadSelfAttentionFromTorchOptions, StateDict } from './types';

const FROM_TORCH_KEYS = ['heads', 'prefix', 'eps', 'rope', 'softcap', 'window', 'dtype'] as const;

/** Hugging Face's names of the separate q, k and v projections (each with .weight, optional .bias). */
const HF_TRIPLES = [
  ['query', 'key', 'value'],
  ['self.query', 'self.key', 'self.value'],
  ['attention.query', 'attention.key', 'attention.value'],
  ['q_proj', 'k_proj', 'v_proj'],
];

/**
 * The config that fromTorch builds the block from: the weights found under
 * options.prefix by exactly one naming scheme, with dim and dimHead read from
 * their shapes. TypeError for a wrong kind of argument, RangeError for missing,
 * ambiguous or mis-shaped weights, naming the state-dict key.
 */
export function configFromStateDict(
  fn: string,
  stateDict: StateDict,
  options: MultiHeadSelfAttentionFromTorchOptions,
): MultiHeadSelfAttentionConfig {
  if (!types.isMap(stateDict) && !isRecordLike(stateDict)) {
    throw typeError(fn, 'stateDict', 'an object or a Map of tensors', stateDict);
  }
  if (options === undefined) throw rangeError(fn, 'options.heads is required, received no options');
  const opts = checkOptions<MultiHeadSelfAttentionFromTorchOptions>(fn, options, FROM_TORCH_KEYS);
  const heads = positiveInteger(fn, 'options.heads', opts.heads);
  let prefix = '';
  if (opts.prefix !== undefined) {
    if (typeof opts.prefix !== 'string') throw typeError(fn, 'options.prefix', 'a string', opts.prefix);
    prefix = opts.prefix === '' || opts.prefix.endsWith('.') ? opts.prefix : `${opts.prefix}.`;
  }
  const eps = checkEps(fn, 'options.eps', opts.eps);
  const dtype = optEnum(fn, 'options.dtype', opts.dtype, ['float32', 'bf16', 'int8'] as const);

  const sd: Record<string, unknown> = types.isMap(stateDict) ? Object.fromEntries(stateDict) : (stateDict as Record<string, unknown>);
  const raw = (name: string): unknown =>
    Object.prototype.hasOwnProperty.call(sd, prefix + name) ? sd[prefix + name] : undefined;
  const has = (name: string): boolean => raw(name) !== undefined;
  // Projection weights stay bf16 when kept so; everything else is used as float32.
  const weight = (name: string): CheckedTensor | Bf16Tensor | undefined => {
    const v = raw(name);
    if (v === undefined) return undefined;
    if (!isBf16Tensor(v)) return checkTensor(fn, `stateDict["${prefix + name}"]`, v);
    return checkBf16Tensor(fn, `stateDict["${prefix + name}"]`, v);
  };
  const get = (name: string): CheckedTensor | undefined => {
    const t = weight(name);
    return t && isBf16Tensor(t) ? (widenBf16(t) as CheckedTensor) : (t as CheckedTensor | undefined);
  };
  const key = (name: string) => `stateDict["${prefix + name}"]`;
  const need = (name: string, what: string): CheckedTensor | Bf16Tensor => {
    const t = weight(name);
    if (!t) throw rangeError(fn, `${key(name)} (${what}) is missing`);
    return t;
  };
  const expectShape = (name: string, t: { shape: readonly number[] }, shape: number[], what: string): void =>
    checkExactShape(fn, key(name), t.shape, shape, what);
  const matrix = (name: string, t: { shape: readonly number[] }): [number, number] => {
    if (t.shape.length !== 2) throw rangeError(fn, `${key(name)} must be a 2-D [out, in] weight, received shape ${formatShape(t.shape)}`);
    if (t.shape[0] === 0 || t.shape[1] === 0) {
      throw rangeError(fn, `${key(name)} must be an [out, in] weight with no zero dim, received shape ${formatShape(t.shape)}`);
    }
    return [t.shape[0], t.shape[1]];
  };

  // Which naming scheme: exactly one must be present under the prefix.
  const found: string[] = [];
  if (has('in_proj_weight') || has('q_proj_weight')) found.push('torch');
  if (has('to_qkv.weight')) found.push('vit');
  const triples = HF_TRIPLES.filter((t) => t.some((n) => has(`${n}.weight`)));
  if (triples.length > 0) found.push('hf');
  const describeScheme = (s: string) =>
    s === 'torch'
      ? `${prefix}${has('in_proj_weight') ? 'in_proj_weight' : 'q_proj_weight'}`
      : s === 'vit'
        ? `${prefix}to_qkv.weight`
        : triples.map((t) => `${prefix}${t[0]}.weight`).join(', ');
  if (found.length === 0 || triples.length > 1) {
    if (triples.length > 1) {
      throw rangeError(fn, `ambiguous state dict: found ${describeScheme('hf')}; choose one with options.prefix`);
    }
    throw rangeError(fn, `no attention weights under prefix ${JSON.stringify(prefix)}: expected in_proj_weight ` +
      `(torch.nn.MultiheadAttention), to_qkv.weight (ViT) or query/key/value.weight, q_proj/k_proj/v_proj.weight ` +
      `(Hugging Face)${suggestPrefixes(Object.keys(sd))}`);
  }
  if (found.length > 1) {
    throw rangeError(fn, `ambiguous state dict: found ${found.map(describeScheme).join(' and ')}; choose one with options.prefix`);
  }
  const scheme = found[0];

  let qkvWeight: Tensor | Bf16Tensor;
  let qkvBias: Tensor | undefined;
  let qkvName: string;
  let outNames: string[];
  let kvRows: number | undefined;
  let outRequired: boolean;
  let norm: { weight: Tensor; bias?: Tensor } | undefined;

  if (scheme === 'torch' || scheme === 'hf') {
    if (scheme === 'torch') {
      for (const n of ['bias_k', 'bias_v']) {
        if (has(n)) throw rangeError(fn, `${key(n)} is present: add_bias_kv is not supported`);
      }
    }
    let names: string[];
    if (scheme === 'torch' && has('in_proj_weight')) {
      names = [];
      qkvName = 'in_proj_weight';
      qkvWeight = need('in_proj_weight', '[3·embed_dim, embed_dim]');
      const [rows] = matrix(qkvName, qkvWeight);
      if (rows % 3 !== 0) throw rangeError(fn, `${key(qkvName)}.shape[0] must be a multiple of 3 (q, k, v), received ${rows}`);
    } else {
      names = scheme === 'torch' ? ['q_proj_weight', 'k_proj_weight', 'v_proj_weight'] : triples[0].map((n) => `${n}.weight`);
      qkvName = names[0];
      const parts = names.map((n) => need(n, 'a [inner, dim] projection weight'));
      const [inner, dim] = matrix(names[0], parts[0]);
      // Hugging Face's k and v may be narrower than q (grouped-query attention: kvHeads < heads).
      kvRows = scheme === 'hf' ? matrix(names[1], parts[1])[0] : inner;
      expectShape(names[1], parts[1], [kvRows, dim], `[kvHeads·dimHead, dim]`);
      expectShape(names[2], parts[2], [kvRows, dim], `${key(names[1])}'s shape`);
      qkvWeight = stackRows(parts, [inner + 2 * kvRows, dim]);
    }
    const inner = kvRows === undefined ? qkvWeight.shape[0] / 3 : qkvWeight.shape[0] - 2 * kvRows;
    if (scheme === 'torch') {
      const b = get('in_proj_bias');
      if (b) {
        expectShape('in_proj_bias', b, [3 * inner], '[3·embed_dim]');
        qkvBias = b;
      }
      outNames = ['out_proj'];
      outRequired = true;
    } else {
      const biasNames = triples[0].map((n) => `${n}.bias`);
      const biases = biasNames.map((n) => get(n));
      if (biases.some((b) => b)) {
        const widths = [inner, kvRows ?? inner, kvRows ?? inner];
        const fused = new Float32Array(widths[0] + widths[1] + widths[2]);
        biases.forEach((b, i) => {
          if (!b) return; // absent: zeros
          expectShape(biasNames[i], b, [widths[i]], i === 0 ? '[inner]' : '[kvHeads·dimHead]');
          fused.set(b.data, i === 0 ? 0 : widths[0] + (i - 1) * widths[1]);
        });
        qkvBias = { data: fused, shape: [fused.length] };
      }
      outNames = ['out_proj', 'o_proj', 'output.dense'];
      outRequired = false;
    }
  } else {
    qkvName = 'to_qkv.weight';
    qkvWeight = need(qkvName, '[3·inner, dim]');
    const [rows] = matrix(qkvName, qkvWeight);
    if (rows % 3 !== 0) throw rangeError(fn, `${key(qkvName)}.shape[0] must be a multiple of 3 (q, k, v), received ${rows}`);
    const b = get('to_qkv.bias');
    if (b) {
      expectShape('to_qkv.bias', b, [rows], '[3·inner]');
      qkvBias = b;
    }
    outNames = ['to_out.0'];
    outRequired = false;
    const nw = get('norm.weight');
    const nb = get('norm.bias');
    const dim = qkvWeight.shape[1];
    if (nb && !nw) throw rangeError(fn, `${key('norm.bias')} is present but ${key('norm.weight')} is missing`);
    if (nw) {
      expectShape('norm.weight', nw, [dim], '[dim]');
      if (nb) expectShape('norm.bias', nb, [dim], '[dim]');
      norm = nb ? { weight: nw, bias: nb } : { weight: nw };
    }
  }

  const [rows, dim] = matrix(qkvName, qkvWeight);
  const inner = kvRows === undefined ? rows / 3 : rows - 2 * kvRows;
  if (inner % heads !== 0) {
    throw rangeError(fn, `options.heads = ${heads} must divide the projection width ${inner} (${key(qkvName)}.shape[0]${kvRows === undefined ? ' / 3' : ''})`);
  }
  const dimHead = inner / heads;
  const kvHeads = kvRows === undefined ? heads : kvRows / dimHead;
  if (!Number.isInteger(kvHeads) || heads % kvHeads !== 0) {
    throw rangeError(fn, `${key(triples[0][1] + '.weight')}.shape[0] = ${kvRows} must be a whole number of heads of dimHead ${dimHead} dividing heads = ${heads}`);
  }
  const sinks = get('sinks');
  if (sinks) expectShape('sinks', sinks, [heads], '[heads]');

  const outFound = outNames.filter((n) => has(`${n}.weight`));
  if (outFound.length > 1) {
    throw rangeError(fn, `ambiguous output projection: found ${outFound.map((n) => key(`${n}.weight`)).join(' and ')}`);
  }
  let outWeight: Tensor | Bf16Tensor | undefined;
  let outBias: Tensor | undefined;
  if (outFound.length === 1) {
    const n = outFound[0];
    const ow = need(`${n}.weight`, '[dim, inner]');
    expectShape(`${n}.weight`, ow, [dim, inner], '[dim, inner]');
    outWeight = ow;
    const ob = get(`${n}.bias`);
    if (ob) {
      expectShape(`${n}.bias`, ob, [dim], '[dim]');
      outBias = ob;
    }
  } else {
    const stray = outNames.find((n) => has(`${n}.bias`));
    if (stray) throw rangeError(fn, `${key(`${stray}.bias`)} is present but ${key(`${stray}.weight`)} is missing`);
    if (outRequired || !(heads === 1 && dimHead === dim)) {
      throw rangeError(
        fn,
        `${outNames.map((n) => key(`${n}.weight`)).join(' or ')} (the output projection [dim, inner] = ` +
          `${formatShape([dim, inner])}) is missing`,
      );
    }
  }

  // Kept bf16 projections run in bf16 unless options.dtype says float32; then they are widened.
  const resolved = dtype ?? (isBf16Tensor(qkvWeight) || isBf16Tensor(outWeight) ? 'bf16' : 'float32');
  if (resolved === 'float32') {
    if (isBf16Tensor(qkvWeight)) qkvWeight = widenBf16(qkvWeight);
    if (outWeight && isBf16Tensor(outWeight)) outWeight = widenBf16(outWeight);
  }
  return {
    dim,
    heads,
    dimHead,
    weights: { qkvWeight, qkvBias, outWeight, outBias },
    norm,
    eps,
    ...(kvHeads !== heads ? { kvHeads } : {}),
    ...(opts.rope !== undefined ? { rope: opts.rope } : {}),
    ...(opts.softcap !== undefined ? { softcap: opts.softcap } : {}),
    ...(opts.window !== undefined ? { window: opts.window } : {}),
    ...(sinks ? { sinks: sinks.data } : {}),
    dtype: resolved,
  };
}

/** q's, k's and v's weights stacked into one [rows, dim] matrix: in bf16 when all three are, else in float32. */
function stackRows(parts: Array<CheckedTensor | Bf16Tensor>, shape: [number, number]): Tensor | Bf16Tensor {
  const allBf16 = parts.every((p) => isBf16Tensor(p));
  const fused = allBf16 ? new Uint16Array(shape[0] * shape[1]) : new Float32Array(shape[0] * shape[1]);
  let at = 0;
  for (const p of parts) {
    const data = allBf16 || !isBf16Tensor(p) ? p.data : widenBf16(p as Bf16Tensor).data;
    (fused as Uint16Array | Float32Array).set(data as never, at);
    at += data.length;
  }
  return allBf16 ? { data: fused as Uint16Array, shape, dtype: 'bf16' } : { data: fused as Float32Array, shape };
}

/** For an error message: prefixes under which some key names a known QKV weight. */
function suggestPrefixes(keys: string[]): string {
  const endings = ['in_proj_weight', 'to_qkv.weight', 'query.weight', 'q_proj.weight'];
  const prefixes = new Set<string>();
  for (const k of keys) {
    for (const e of endings) {
      if (k.endsWith(e) && (k.length === e.length || k[k.length - e.length - 1] === '.')) {
        let p = k.slice(0, k.length - e.length);
        if (e === 'query.weight' && (p.endsWith('self.') || p.endsWith('attention.'))) p = p.slice(0, p.lastIndexOf('.', p.length - 2) + 1);
        prefixes.add(p);
      }
    }
  }
  if (prefixes.size === 0) return '';
  const list = [...prefixes].slice(0, 5).map((p) => JSON.stringify(p)).join(', ');
  return `; keys found under ${list}${prefixes.size > 5 ? ', …' : ''} (pass one as options.prefix)`;
}
