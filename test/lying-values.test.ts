/**
 * Arguments that lie: getters that answer differently on each read or call back into the package,
 * typed-array subclasses and own properties that hide what a buffer is. The package reads each
 * field once, asks the engine (not the object) about buffers, and never lets such a value reach
 * native code unchecked. Each case here was found by review against an earlier build, which
 * crashed, hung, computed on the wrong data or threw synchronously from an async function.
 */
import {
  attention,
  attentionAsync,
  info,
  layerNormAsync,
  loadSafetensors,
  loadSafetensorsAsync,
  matmul,
  matmulAsync,
  MultiHeadSelfAttention,
  softmax,
  softmaxAsync,
  tensor,
  type Tensor,
} from '../lib';
import { Descriptor, native } from '../lib/native';
import { expectBitEqual, makeRng, pickSeed, poisoned, randomFloat32 } from './helpers/random';

const SEED = pickSeed();
const rng = makeRng(SEED);
const random = (shape: number[]): Tensor => ({ data: randomFloat32(rng, shape.reduce((a, b) => a * b, 1)), shape });
const Resizable = ArrayBuffer as unknown as new (n: number, o: { maxByteLength: number }) => ArrayBuffer;

/** A Float32Array of n elements on a resizable buffer that claims, through an own property, not to be. */
function resizableDisguisedByProperty(n: number): Float32Array {
  const buffer = new Resizable(4 * n, { maxByteLength: 8 * n });
  Object.defineProperty(buffer, 'resizable', { value: false });
  return new Float32Array(buffer, 0, n);
}

/** The same, through a subclass whose `buffer` getter shows a fixed-length buffer instead. */
function resizableDisguisedBySubclass(n: number): Float32Array {
  class Disguised extends Float32Array {
    override get buffer(): ArrayBuffer {
      return new ArrayBuffer(4 * n);
    }
  }
  return new Disguised(new Resizable(4 * n, { maxByteLength: 8 * n }), 0, n);
}

describe('a resizable buffer in disguise is still refused by the async ops (shrinking one mid-call was a segfault)', () => {
  for (const [how, make] of [
    ['an own resizable: false', resizableDisguisedByProperty],
    ['a subclass with a buffer getter', resizableDisguisedBySubclass],
  ] as const) {
    test(`${how}: every async op rejects, naming the buffer, and leaves out untouched`, async () => {
      const out = poisoned(6);
      const before = out.slice();
      const hidden = make(6);
      hidden.set([1, 2, 3, 4, 5, 6]);
      const calls: Array<[string, string, () => Promise<unknown>]> = [
        ['softmaxAsync', 'x', () => softmaxAsync({ data: hidden, shape: [2, 3] }, { out: { data: out, shape: [2, 3] } })],
        ['matmulAsync', 'options.out', () => matmulAsync(random([3, 2]), random([2, 2]), { out: { data: make(6), shape: [3, 2] } })],
        ['layerNormAsync', 'x', () => layerNormAsync({ data: hidden, shape: [2, 3] }, { out: { data: out, shape: [2, 3] } })],
        ['attentionAsync', 'q', () => attentionAsync({ data: make(4), shape: [1, 1, 1, 4] }, random([1, 1, 1, 4]), random([1, 1, 1, 4]))],
      ];
      for (const [fn, arg, call] of calls) {
        await expect(call()).rejects.toThrow(new RegExp(`^${fn}: ${arg.replace('.', '\\.')} is backed by a resizable ArrayBuffer`));
      }
      expectBitEqual(out, before, { seed: SEED, label: `${how}: out after the refused calls` });

      const block = new MultiHeadSelfAttention({ dim: 2, heads: 1, dimHead: 2, weights: { qkvWeight: random([6, 2]) } });
      await expect(block.forwardAsync({ data: make(4), shape: [1, 2, 2] })).rejects.toThrow(
        /^MultiHeadSelfAttention\.forwardAsync: x is backed by a resizable ArrayBuffer/,
      );
    });
  }

  test('loadSafetensorsAsync: a disguised resizable source is refused', async () => {
    const header = Buffer.from('{"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}');
    const bytes = new Uint8Array(new Resizable(8 + header.length + 4, { maxByteLength: 1024 }));
    new DataView(bytes.buffer).setBigUint64(0, BigInt(header.length), true);
    bytes.set(header, 8);
    Object.defineProperty(bytes.buffer, 'resizable', { value: false });
    await expect(loadSafetensorsAsync(bytes)).rejects.toThrow(/^loadSafetensorsAsync: source is backed by a resizable ArrayBuffer/);
  });

  (info().pinsAsyncBuffers ? test : test.skip)('the addon refuses a resizable buffer itself, whatever JS let through', () => {
    const x = new Float32Array(new Resizable(24, { maxByteLength: 48 }));
    const descriptor = new Descriptor('softmax').shape('x.shape', [2, 3]).shape('out.shape', [2, 3]).number('scale', 1).done();
    let called = false;
    expect(() => native.softmax(x, new Float32Array(6), descriptor, () => (called = true))).toThrow(
      /^softmax: a buffer is backed by a resizable ArrayBuffer; async ops need fixed-length buffers$/,
    );
    expect(called).toBe(false);
    expect(native.info().pendingAsync).toBe(0);
  });
});

describe('getters that change their answer: the array checked is the array used', () => {
  /** An object whose `data` is `first` on the first read and `second` after. */
  function flaky(first: unknown, second: unknown, shape: number[]): { data: Float32Array; shape: number[] } {
    let reads = 0;
    return {
      get data() {
        return (reads++ === 0 ? first : second) as Float32Array;
      },
      shape,
    };
  }

  test('matmul computes on the data it checked (a Float64Array second read was refused only by the addon)', () => {
    const a = random([2, 3]), b = random([3, 2]);
    const expected = matmul(a, b);
    expectBitEqual(matmul(flaky(a.data, new Float64Array(6), [2, 3]), b).data, expected.data, { seed: SEED, label: 'matmul' });
  });

  test('matmulAsync never throws synchronously, whatever a getter returns later', async () => {
    const a = random([2, 3]), b = random([3, 2]);
    const expected = matmul(a, b);
    let p: Promise<Tensor> | undefined;
    expect(() => (p = matmulAsync(flaky(a.data, { length: 6 }, [2, 3]), b))).not.toThrow();
    expectBitEqual((await p!).data, expected.data, { seed: SEED, label: 'matmulAsync' });
  });

  test('out: the result goes into the array checked, and the call returns the caller\'s own object', () => {
    const x = random([2, 3]);
    const checked = poisoned(6), other = poisoned(6);
    const out = flaky(checked, other, [2, 3]);
    expect(softmax(x, { out })).toBe(out);
    expectBitEqual(checked, softmax(x).data, { seed: SEED, label: 'softmax into the checked out' });
    expect(Array.from(other).every(Number.isNaN)).toBe(true);
  });

  test('attention: a nested call from out\'s getter does not change this call (it overwrote the shared descriptor)', () => {
    const q = random([1, 2, 3, 4]), k = random([1, 2, 3, 4]), v = random([1, 2, 3, 4]);
    const expected = attention(q, k, v) as Tensor;
    const outData = poisoned(24);
    const out = {
      shape: [1, 2, 3, 4],
      get data() {
        const t = random([1, 3, 2, 4]); // same length, other shape
        attention(t, t, t);
        return outData;
      },
    };
    attention(q, k, v, { out });
    expectBitEqual(outData, expected.data, { seed: SEED, label: 'attention with a re-entrant out getter' });
  });

  test('a byteLength own property that throws does not leave an async call pending (the promise settled never)', async () => {
    const data = new Float32Array([1, 2, 3, 4]);
    let armed = false;
    Object.defineProperty(data, 'byteLength', {
      get() {
        if (armed) throw new Error('getter called');
        return 16;
      },
    });
    const p = softmaxAsync({ data, shape: [4] });
    armed = true;
    expectBitEqual((await p).data, softmax(tensor(new Float32Array([1, 2, 3, 4]), [4])).data, { seed: SEED, label: 'softmaxAsync' });
    expect(info().queued + info().inFlight).toBe(0);
  }, 10_000);

  test('keyPaddingMask: the data read once is the data used', () => {
    const q = random([1, 1, 2, 4]);
    const keep = new Uint8Array([0, 0]);
    let reads = 0;
    const pad = {
      get data() {
        return reads++ === 0 ? keep : new Uint8Array([1, 1, 1]);
      },
      shape: [1, 2],
    };
    expectBitEqual((attention(q, q, q, { keyPaddingMask: pad }) as Tensor).data, (attention(q, q, q) as Tensor).data, {
      seed: SEED,
      label: 'attention with a flaky keyPaddingMask',
    });
  });
});

describe('loadSafetensors reads the bytes it was given', () => {
  const header = Buffer.from('{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}');
  const image = (): Uint8Array => {
    const bytes = new Uint8Array(8 + header.length + 8);
    new DataView(bytes.buffer).setBigUint64(0, BigInt(header.length), true);
    bytes.set(header, 8);
    const data = new DataView(bytes.buffer, 8 + header.length);
    data.setFloat32(0, 1.5, true);
    data.setFloat32(4, -2, true);
    return bytes;
  };

  test('a Uint8Array subclass whose buffer and byteOffset getters lie', () => {
    const real = image();
    class Liar extends Uint8Array {
      override get buffer(): ArrayBuffer {
        return new ArrayBuffer(real.length);
      }
      override get byteOffset(): number {
        return 3;
      }
    }
    const source = new Liar(real.buffer as ArrayBuffer, 0, real.length);
    expect(Array.from(loadSafetensors(source).tensors.t.data)).toEqual([1.5, -2]);
  });

  test('an options.filter that detaches the source is named', () => {
    const source = image();
    const filter = (): boolean => {
      structuredClone(source.buffer, { transfer: [source.buffer as ArrayBuffer] });
      return true;
    };
    expect(() => loadSafetensors(source, { filter })).toThrow(/^loadSafetensors: source was detached by options\.filter$/);
  });
});

describe('messages that say what came', () => {
  test('a rank past 32 gives the rank received', () => {
    const shape = new Array<number>(33).fill(1);
    expect(() => softmax({ data: new Float32Array(1), shape })).toThrow(/^softmax: x\.shape must have from 0 to 32 dims, received 33$/);
  });

  test('a Proxy around a Float32Array is called a Proxy (was "expected a Float32Array … but received a Float32Array")', () => {
    const data = new Proxy(new Float32Array(6), {});
    expect(() => softmax({ data, shape: [2, 3] })).toThrow(
      /^softmax: expected a Float32Array for x\.data but received a Proxy \(typed arrays must be passed as they are\)$/,
    );
  });

  test('fromTorch names the weight with a zero dim (was "config.dimHead must be a positive integer")', () => {
    for (const shape of [[0, 4], [6, 0]]) {
      expect(() => MultiHeadSelfAttention.fromTorch({ in_proj_weight: tensor(new Float32Array(0), shape) }, { heads: 1 })).toThrow(
        new RegExp(`^MultiHeadSelfAttention\\.fromTorch: stateDict\\["in_proj_weight"\\] must be an \\[out, in\\] weight with no zero dim, received shape \\[${shape.join(', ')}\\]$`),
      );
    }
  });

  test('forward with returnWeights on an empty batch of long sequences gives empty results (was a matmul shape error)', () => {
    const block = new MultiHeadSelfAttention({ dim: 4, heads: 2, dimHead: 2, weights: { qkvWeight: random([12, 4]), outWeight: random([4, 4]) } });
    const { output, weights } = block.forward({ data: new Float32Array(0), shape: [0, 2 ** 27, 4] }, { returnWeights: true });
    expect(output.shape).toEqual([0, 2 ** 27, 4]);
    expect(weights.shape).toEqual([0, 2 ** 27, 2 ** 27]);
    expect(weights.data.length).toBe(0);
  });
});
