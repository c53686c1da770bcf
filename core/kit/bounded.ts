/**
 * Bounded concurrency: run an async function over items with at most `limit` calls in flight,
 * results in the items' order. The first rejection is thrown once every started call settled (no
 * call is left running behind the caller's back).
 */

/** Maps `items` through `fn` with at most `limit` calls at once; results keep the items' order. */
export async function mapBounded<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  if (!(limit >= 1)) throw new RangeError(`mapBounded: limit must be ≥ 1, not ${limit}`);
  const results = new Array<R>(items.length);
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (next < items.length && !failure) {
      const i = next++;
      try {
        results[i] = await fn(items[i], i);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure) throw failure.error;
  return results;
}
