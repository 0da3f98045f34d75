/**
 * The error a synchronous call throws, for tests that inspect its class and fields (not only its
 * message). Throws "expected an error" when the call returns.
 */
export function thrown(f: () => unknown): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected an error");
}
