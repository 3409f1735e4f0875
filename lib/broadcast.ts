/** Numpy broadcasting of two shapes (right-aligned; a dim of 1 stretches), or null. */
export function broadcastShapes(a: readonly number[], b: readonly number[]): number[] | null {
  const rank = Math.max(a.length, b.length);
  const out = new Array<number>(rank);
  for (let i = 0; i < rank; i++) {
    const da = i < rank - a.length ? 1 : a[i - (rank - a.length)];
    const db = i < rank - b.length ? 1 : b[i - (rank - b.length)];
    if (da !== db && da !== 1 && db !== 1) return null;
    out[i] = da === 1 ? db : da;
  }
  return out;
}

/** True if `shape` broadcasts to exactly `target`. */
export function broadcastsTo(shape: readonly number[], target: readonly number[]): boolean {
  if (shape.length > target.length) return false;
  const joined = broadcastShapes(shape, target);
  return joined !== null && joined.every((d, i) => d === target[i]);
}
