/** Reading a byte stream line by line (a child process's output, stdin). */

/**
 * Calls `onLine` for every line of `stream` (UTF-8, split on "\n", without it), and for a last
 * line without a newline (`newline` false only for that one); resolves when the stream ends.
 */
export async function forEachLine(
  stream: ReadableStream<Uint8Array>,
  onLine: (line: string, newline: boolean) => void,
): Promise<void> {
  let pending = "";
  const decoder = new TextDecoder();
  for await (const bytes of stream) {
    const lines = (pending + decoder.decode(bytes, { stream: true })).split("\n");
    pending = lines.pop()!;
    for (const line of lines) onLine(line, true);
  }
  pending += decoder.decode();
  if (pending) onLine(pending, false);
}
